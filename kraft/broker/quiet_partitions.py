"""A follower's incremental Fetch read only where something happened: Kafka's incremental fetch
context looks at every partition of the session on every request, which in Python made a
replication round cost in proportion to the partitions a leader shares with each follower (a
broker holding 1,000 idle partitions beside one written one: ~1,600 µs of leader CPU per write
for the idle ones).

A session partition whose follower was found caught up and in sync (the fetch handler's
``_Idle`` note on the ``CachedPartition``) is *quiet*: registered here under its partition log
until something happens to that log. Everything that can change what a read of it would find
either wakes the log (``FetchHandler.wake``: an append, a high-watermark move, DeleteRecords,
a follower's append) or moves the *generation* the notes were taken in (a new metadata image,
the broker's lease, a leader replication quota, ``PartitionLogs.changes``: a log made, replaced
or cut by retention). So an incremental follower request reads:

  * the partitions it names (their fetch state changed),
  * the quiet ones woken since its last request (``session.dirty``),
  * the ones that were not quiet at their last read (``session.active``: lagging or out of
    the ISR, errors),

and every partition when the generation moved since the session's last full read.

What a skipped read would have done is kept: the read of a quiet partition records the
follower's fetch (``ReplicaProgress.update``, which the ISR shrink check reads). A caught-up
follower counts as in sync whatever the time, so nothing is lost while the partition stays
quiet; when it wakes, the follower's last request is recorded first, at that request's time,
before the partition's new log end can make it look behind. A woken partition of a session
whose request is parked joins that parked request at once (``on_woken``).
"""

from __future__ import annotations


class QuietPartitions:
    def __init__(self):
        self._by_log: dict = {}  # PartitionLog -> {CachedPartition: its _Idle note}

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_log.values())

    def narrow(self, session, requested, generation):
        """The keys an incremental follower request on ``session`` reads (an ordered list), or
        None: every partition of the session (its notes were taken in another generation; the
        read that follows takes them again)."""
        old = session.quiet_since  # (image, ...): the image by identity (it holds the image alive)
        if old is None or old[0] is not generation[0] or old[1:] != generation[1:]:
            session.quiet_since = generation
            session.dirty = {}
            session.active = set()
            return None
        keys = dict.fromkeys(requested)
        keys.update(session.dirty)
        session.dirty = {}
        parts = session.partitions
        gone = []
        for key in session.active:
            if key in parts:
                keys[key] = None
            else:
                gone.append(key)
        for key in gone:  # forgotten by the session
            session.active.discard(key)
        return list(keys)

    def note(self, cp, note, plog) -> None:
        """After a full read of session partition ``cp``: ``note`` is its quiet note, or None
        (the next request reads it again)."""
        cp.idle = note
        session = cp.session
        if note is None:
            if session is not None:
                session.active.add(cp.key)
            return
        if session is not None:
            session.active.discard(cp.key)
        self._by_log.setdefault(plog, {})[cp] = note

    def wake(self, plog, on_woken) -> None:
        """Something happened to ``plog``: its quiet partitions are read at their session's next
        request; ``on_woken(cp)`` for each (a parked request of its session reads it now)."""
        quiet = self._by_log.pop(plog, None)
        if not quiet:
            return
        for cp, note in quiet.items():
            if cp.idle is not note:
                continue  # read again since (its new note, if any, is registered anew)
            cp.idle = None
            session = cp.session
            if session is None or session.closed or session.partitions.get(cp.key) is not cp:
                continue  # the follower has left that session or partition: nothing to record
            # The follower's last request found it caught up at the log end of then: record it
            # (its ``_still_idle`` update, skipped), before the log end moved on makes it lag.
            note.follower.update(cp.fetch_offset, cp.log_start_offset, note.fetch_offset, session.read_ms)
            session.dirty[cp.key] = None
            on_woken(cp)

    def forget_all(self) -> None:
        self._by_log.clear()
