"""A follower's incremental Fetch read only where something happened: Kafka's incremental fetch
context looks at every partition of the session on every request, which in Python made a
replication round cost in proportion to the partitions a leader shares with each follower (a
broker holding 1,000 idle partitions beside one written one: ~1,600 µs of leader CPU per write
for the idle ones).

A session partition whose follower was found caught up and in sync (an ``IdleNote`` on the
``CachedPartition``, ``idle_note``) is *quiet*: registered here under its partition log
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


class IdleNote:
    """A follower found caught up on a session partition: what must be unchanged for its next
    fetch there to skip the full read (``still_idle``)."""

    __slots__ = ("image", "plog", "state", "follower", "fetch_offset", "leader_epoch", "last_fetched_epoch", "read")

    def __init__(self, image, plog, state, follower, fetch_offset, leader_epoch, last_fetched_epoch, read):
        self.image, self.plog, self.state, self.follower = image, plog, state, follower
        self.fetch_offset, self.leader_epoch, self.last_fetched_epoch = fetch_offset, leader_epoch, last_fetched_epoch
        self.read = read  # an empty read with no error: reused, its hw and log start refreshed


def idle_note(state, plog, cp, replica: int, read) -> IdleNote | None:
    """The note for session partition ``cp`` after a full read (``read``) for follower
    ``replica`` that found nothing to send and no error: taken when the follower is caught up
    at the log end, in the committed ISR and no ISR change is pending; else None."""
    if plog is None or cp.fetch_offset != plog.log.end_offset:
        return None
    st = state.replication.states.get((plog.topic, plog.partition))
    if st is None or st.pending is not None or replica not in st.isr:
        return None
    f = st.followers.get(replica)
    if f is None:
        return None
    return IdleNote(state.image, plog, st, f, cp.fetch_offset, cp.current_leader_epoch, cp.last_fetched_epoch, read)


def still_idle(state, note: IdleNote, name, cp, serving: bool, now_ms: int) -> bool:
    """Would a full read of ``cp`` find what it found when ``note`` was taken? (The same image,
    log end, fetch position, leader epochs, log and leader state, no ISR change pending, the
    broker serving, no leader quota.) If so the follower's fetch is recorded, as the full read
    would have."""
    plog = note.plog
    if (plog.log.end_offset != note.fetch_offset or cp.fetch_offset != note.fetch_offset
            or state.image is not note.image or cp.current_leader_epoch != note.leader_epoch
            or cp.last_fetched_epoch != note.last_fetched_epoch or note.state.pending is not None or not serving
            or state.leader_quota.bound is not None or state.logs.get(name, cp.partition) is not plog
            or state.replication.states.get((name, cp.partition)) is not note.state):
        return False
    note.follower.update(cp.fetch_offset, cp.log_start_offset, note.fetch_offset, now_ms)
    return True


class QuietPartitions:
    def __init__(self):
        self._by_log: dict = {}  # PartitionLog -> {CachedPartition: its IdleNote}

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
            # (its ``still_idle`` update, skipped), before the log end moved on makes it lag.
            note.follower.update(cp.fetch_offset, cp.log_start_offset, note.fetch_offset, session.read_ms)
            session.dirty[cp.key] = None
            on_woken(cp)
