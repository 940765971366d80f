"""Fetch (API key 1, v4-v17) for consumers (Kafka's ``ReplicaManager.fetchMessages`` with
``FetchIsolation.HIGH_WATERMARK``) and for follower replicas (a replica id >= 0: reads up to
the log end, answers DivergingEpoch when the follower's last fetched epoch ends earlier here,
and reports the fetch offset to ``state.replication``, which may move the high watermark;
``on_high_watermark(plog)`` then wakes acks=all produce waits).

Per partition: leader and leader-epoch checks (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
UNKNOWN_LEADER_EPOCH), OFFSET_OUT_OF_RANGE outside ``[log start, log end]``, then whole
batches below the high watermark, at most ``partition_max_bytes`` each and ``max_bytes`` in
all (the first batch of the response always, Kafka's ``minOneMessage``). read_committed
sees the same as read_uncommitted: without transactions the last stable offset is the high
watermark. v15 names a follower in ReplicaState; v16 answers a leadership error with the
current leader's endpoint (KIP-951 NodeEndpoints); v17's ReplicaDirectoryId is not used.

Fetch from follower (KIP-392): a consumer's v11+ Fetch carries client metadata, so any replica
answers it, a follower up to its own high watermark (or last stable offset). With
``replica.selector.class`` rack-aware, the leader answers a consumer that names its rack with
``preferred_read_replica`` (no records, at once) when an in-sync follower in that rack holds the
fetch offset (``BrokerState.preferred_read_replica``); the consumer fetches there next.

Fetch sessions (KIP-227) are a layer around that read, in ``fetch_sessions``: before it, the
request's session fields pick the partitions to read (the request's own, or for an incremental
fetch every partition of its session; for a follower's, only the ones that may have changed:
``quiet_partitions``); after it, the session decides which results go into
the answer and which session id it names. Every pre-KIP-227 client sends session epoch -1 and
gets today's sessionless full answer.

No copy for large reads: a partition's records of 64 KiB or more stay in the segment file as a
``FileSlice`` (``log_reads.read_answer``) that the connection sends with ``sendfile``; smaller
ones are read with ``pread`` (not views of the maps, which would raise SIGBUS if a follower
truncated a segment while the answer waits to be written; a truncation reads the slices it
would cut into memory first). The answer is an ``EncodedParts`` whose record parts are those
slices and buffers, spliced into the encoding of the rest of the response at marker
positions, and the server writes them to the socket as they are. A request that finds fewer than ``min_bytes``
parks until an append to one of its partitions (``wake``) or ``max_wait_ms``.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time

from kraft.broker.broker_state import NONE, BrokerState
from kraft.broker.fetch_sessions import DEFAULT_CACHE_SLOTS, CachedPartition, FetchSessionCache, FetchSessions
from kraft.broker.quiet_partitions import QuietPartitions, idle_note, still_idle
from kraft.errors import ErrorCode, FatalLogError, KraftError, OffsetOutOfRangeError
from kraft.log.log_reads import read_answer
from kraft.protocol import EncodedParts, FetchRequest, FetchResponse
from kraft.protocol.primitives import uvarint_bytes

F = FetchResponse
_MARKER_PREFIX = os.urandom(12)
_I32 = struct.Struct(">i")
_EMPTY = b""
READ_COMMITTED = 1


class _Read:
    """One partition's outcome."""

    __slots__ = ("topic", "topic_id", "partition", "code", "hw", "log_start", "records", "plog", "leader",
                 "diverging", "lso", "aborted", "throttled", "preferred")

    def __init__(self, topic, topic_id, partition):
        self.topic, self.topic_id, self.partition = topic, topic_id, partition
        self.code, self.hw, self.log_start = NONE, -1, -1
        self.lso = None  # the last stable offset; None: the HW (a follower's read)
        self.aborted = None  # read_committed: [(producer id, first offset)] of aborted transactions in range
        self.records = _EMPTY
        self.plog = None
        self.leader = None
        self.diverging = None  # (epoch, end offset) for a follower whose log diverged
        self.throttled = False  # a follower's read of a partition under the leader replication quota
        self.preferred = -1  # KIP-392: the replica this consumer should fetch from instead (no records)


class FetchHandler:
    def __init__(self, state: BrokerState, *, on_high_watermark=None, clock_ms=None,
                 session_cache_slots: int = DEFAULT_CACHE_SLOTS):
        self.state = state
        self.on_high_watermark = on_high_watermark  # on_high_watermark(plog): a follower moved the HW
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.sessions = FetchSessions(FetchSessionCache(session_cache_slots))
        self._parked: dict = {}  # PartitionLog -> set of _Parked
        self._due: dict = {}  # parked fetch -> its partition logs to read again at the end of this loop turn
        self._wake_scheduled = False
        self._serving = False  # state.is_serving(), taken once per read of a request
        self._now_ms = 0  # the replication clock, read once per read of a request
        self.quiet = QuietPartitions()  # follower session partitions read only when woken

    def handle(self, request: FetchRequest, version: int, listener: str | None = None):
        replica = request.replica_state.replica_id if version >= 15 else request.replica_id
        # The session layer, before the read: which partitions this Fetch reads.
        ctx = self.sessions.context(request, version, self.state.image.topics.by_id, follower=replica >= 0,
                                    now_ms=self.clock_ms(), narrow=self._narrow if replica >= 0 else None)
        if ctx.error != NONE:
            return F(throttle_time_ms=0, error_code=ctx.error, session_id=0, responses=[])
        wanted = ctx.wanted
        if replica >= 0:
            wanted = [(name, tid, p, replica) for name, tid, p in wanted]
        reads, size, errors = self._read_all(wanted, request.max_bytes, version, _isolation(request, version),
                                             _client_rack(request, version, replica), listener)
        session = ctx.session if replica >= 0 else None
        if session is not None:
            session.read_ms = self._now_ms
        if request.max_wait_ms <= 0 or size >= request.min_bytes or errors or not (wanted or session):
            return self._answer(ctx, reads, version, listener)
        loop = asyncio.get_running_loop()
        parked = _Parked(self, wanted, request, version, loop.create_future(), ctx, listener)
        if session is not None:
            # Its quiet partitions are not in ``wanted``: one that wakes joins it (``_woken``).
            parked.session, parked.replica = session, replica
            session.parked = parked
        parked.timer = loop.call_later(request.max_wait_ms / 1000, parked.finish)
        parked.reads, parked.size = reads, size
        for i, r in enumerate(reads):
            if r.plog is not None:
                self._parked.setdefault(r.plog, set()).add(parked)
                parked.positions.setdefault(r.plog, []).append(i)
        parked.fut.add_done_callback(lambda _: parked.unpark())
        return parked.fut

    def _answer(self, ctx, reads, version: int, listener: str | None = None):
        """The session layer, after the read: which results go out, under which session id."""
        now = self.clock_ms()
        code, session_id, reads = ctx.respond(reads, now)
        throttled = sum(len(r.records) for r in reads if r.throttled)
        if throttled:
            self.state.leader_quota.record(throttled, now)  # what the answer carries, once
        endpoints = None
        if version >= 16 and listener is not None:
            endpoints = self._leader_endpoints(reads, listener)
        return _encode(reads, version, session_id, code, endpoints)

    def _leader_endpoints(self, reads, listener: str) -> list:
        """KIP-951 (v16+): the endpoints of the leaders named in the answer's CurrentLeader
        fields, on the listener the request came in on, so a client moves without a Metadata
        round trip."""
        out = []
        for leader in sorted({r.leader[0] for r in reads if r.leader is not None and r.leader[0] >= 0}):
            e = self.state.leader_endpoint(leader, listener)
            if e is not None:
                out.append(F.NodeEndpoint(node_id=leader, host=e[0], port=e[1], rack=e[2]))
        return out

    def _narrow(self, session, requested):
        """``FetchSessions.context``'s choice of what a follower's incremental request reads
        (``quiet_partitions``); None: all of it."""
        changes = getattr(self.state.logs, "changes", None)
        if changes is None:
            return None  # logs that do not count their changes: nothing may be skipped
        state = self.state
        generation = (state.image, state.is_serving(), state.leader_quota.bound is None, changes)
        return self.quiet.narrow(session, requested, generation)

    def _woken(self, cp) -> None:
        """A quiet partition of ``cp.session`` woke: a request parked on the session reads it."""
        parked = cp.session.parked
        if parked is not None and not parked.fut.done():
            parked.add(cp)

    def wake(self, plog) -> None:
        """An append to ``plog``: parked fetches on it look again — once the current loop turn
        is over, and once however many of their partitions were appended to in it. A Produce
        to 1,000 partitions used to answer a follower's parked fetch after the first append
        (one partition of data, then another full fetch for the other 999), re-reading all
        1,000 partitions on the way. Without a running loop (tests), at once."""
        self.quiet.wake(plog, self._woken)
        waiting = self._parked.get(plog)
        if not waiting:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            for parked in list(waiting):
                parked.check((plog,))
            return
        due = self._due
        for parked in waiting:
            plogs = due.get(parked)
            if plogs is None:
                due[parked] = {plog}
            else:
                plogs.add(plog)
        if not self._wake_scheduled:
            self._wake_scheduled = True
            loop.call_soon(self._wake_due)

    def _wake_due(self) -> None:
        self._wake_scheduled = False
        due, self._due = self._due, {}
        for parked, plogs in due.items():
            parked.check(plogs)

    def wake_all(self) -> None:
        """A new metadata image: every parked fetch looks again, once. (Waking each partition
        in turn re-read a fetch parked on N partitions N times: a follower's fetch of 1,000
        partitions cost a million partition reads per image on the leader.)"""
        seen = set()
        for waiting in list(self._parked.values()) + [{s.parked} for s in self._parked_sessions()]:
            for parked in list(waiting):
                if parked not in seen:
                    seen.add(parked)
                    if parked.session is not None:
                        # It holds only what changed: answered now, the follower's next request
                        # reads its whole session again (the image moved the generation).
                        parked.finish()
                    else:
                        parked.check()

    def _parked_sessions(self):
        """Follower sessions with a request parked (it may hold none of their partitions)."""
        return [s for s in self.sessions.cache.sessions.values() if s.parked is not None]

    def _read_all(self, wanted, max_bytes: int, version: int, isolation: int = 0, rack: str | None = None,
                  listener: str | None = None):
        """``rack``: a consumer's v11+ Fetch (its ``client.rack``, perhaps ""), which a follower may
        answer and the leader may redirect (KIP-392); None before v11, leader only."""
        remaining = max_bytes
        size, errors = 0, False
        reads = []
        self._serving = self.state.is_serving()  # once per read of a whole request, not per partition
        self._now_ms = self.state.replication.clock_ms()
        still_idle = self._still_idle
        for entry in wanted:
            idle = getattr(entry[2], "idle", None) if len(entry) == 4 else None
            r = still_idle(idle, entry) if idle is not None else None
            if r is None:
                r = self._read_entry(entry, remaining, size == 0, version, isolation, rack, listener)
            n = len(r.records)
            size += n
            remaining -= n
            errors = errors or _answer_now(r)
            reads.append(r)
        return reads, size, errors

    def _reread(self, wanted, reads, size: int, positions, max_bytes: int, version: int, isolation: int = 0,
                rack: str | None = None, listener: str | None = None):
        """``_read_all`` for a parked fetch woken by some of its partitions: only the entries at
        ``positions`` are read again, the others keep what they found when the fetch parked
        (nothing new happened to them: every append, high-watermark move and image wakes the
        partitions it touches). A follower's fetch parked on the ~300 partitions a leader holds
        of 1,000 re-read all of them on every append and every HW move of any one: most of a
        replication round's CPU, O(partitions) per write. ``reads`` (changed in place) holds no
        error (one would have answered the fetch), ``size`` is its records' bytes."""
        for i in positions:
            size -= len(reads[i].records)
        remaining = max_bytes - size
        errors = False
        for i in sorted(positions):
            r = self._read_entry(wanted[i], remaining, size == 0, version, isolation, rack, listener)
            n = len(r.records)
            size += n
            remaining -= n
            errors = errors or _answer_now(r)
            reads[i] = r
        return reads, size, errors

    def _read_entry(self, entry, remaining: int, first: bool, version: int, isolation: int, rack, listener) -> _Read:
        name, topic_id, p, *replica = entry
        if replica:
            return self._read_for_replica(name, topic_id, p, replica[0], remaining, first, version)
        return self._read(name, topic_id, p, remaining, first, version, isolation, rack, listener)

    def _read(self, name, topic_id, p, remaining: int, first: bool, version: int, isolation: int = 0,
              rack: str | None = None, listener: str | None = None) -> _Read:
        r = _Read(name, topic_id, p.partition)
        if name is None:
            r.code = int(ErrorCode.UNKNOWN_TOPIC_ID)
            return r
        state = self.state
        # From v11 a follower answers too, up to its own high watermark (Kafka's fetchOnlyLeader false)
        code, plog, reg = state.local_leader(name, p.partition, p.current_leader_epoch, any_replica=rack is not None)
        if code != NONE:
            r.code = code
            if reg is not None:
                r.leader = (reg.leader, reg.leader_epoch)
            return r
        r.plog = plog
        log = plog.log
        r.hw = state.advance_high_watermark(plog, reg)
        r.log_start = log.start_offset
        if rack:
            r.preferred = state.preferred_read_replica(plog, reg, rack, p.fetch_offset, listener)
            if r.preferred >= 0:  # no records: the consumer asks the preferred replica next
                r.lso = state.producer_states.last_stable_offset(plog)
                return r
        try:
            states = state.producer_states
            r.lso = states.last_stable_offset(plog)
            upper = r.lso if isolation == READ_COMMITTED else r.hw
            r.records = read_answer(log, p.fetch_offset, min(p.partition_max_bytes, max(remaining, 0)),
                                   upper_offset=upper, min_one=first)
            if isolation == READ_COMMITTED:
                # Kafka's collectAbortedTransactions: the consumer drops these producers'
                # records from each first offset up to the ABORT marker.
                r.aborted = [(a.producer_id, a.first_offset)
                             for a in states.aborted_transactions(plog, p.fetch_offset, upper)] \
                    if len(r.records) else []
        except OffsetOutOfRangeError:
            r.code = int(ErrorCode.OFFSET_OUT_OF_RANGE)
        except FatalLogError:
            r.code = int(ErrorCode.KAFKA_STORAGE_ERROR)
        except KraftError as exc:
            r.code = int(exc.code)
        return r


    def _read_for_replica(self, name, topic_id, p, replica: int, remaining: int, first: bool, version: int) -> _Read:
        """A follower's fetch (Kafka's ``Partition.fetchRecords`` for a follower); a session
        partition found caught up last time is answered by ``_still_idle`` first (in _read_all)."""
        r = self._read_slow(name, topic_id, p, replica, remaining, first, version)
        if type(p) is CachedPartition:
            self.quiet.note(p, self._idle_note(r, p, replica), r.plog)
        return r

    def _still_idle(self, idle, entry) -> _Read | None:
        """The answer for a session partition whose follower was caught up at its last fetch,
        if nothing that the full read checks has changed since (``quiet_partitions.still_idle``):
        its one effect is the follower's progress. A follower session holds every partition a
        leader shares with it; the full read of each idle one on every fetch made a replication
        round's CPU grow with the partitions of the session, not with the data."""
        if not still_idle(self.state, idle, entry[0], entry[2], self._serving, self._now_ms):
            return None
        r = idle.read  # what this partition's full read found, kept current
        r.log_start = idle.plog.log.start_offset
        r.hw = idle.plog.high_watermark
        return r

    def _idle_note(self, r: _Read, p, replica: int):
        """What ``_still_idle`` needs, when this read found the follower caught up and in sync
        with nothing to do (else None: the next fetch reads in full)."""
        if r.code != NONE or len(r.records) or r.diverging is not None or r.throttled:
            return None
        return idle_note(self.state, r.plog, p, replica, r)

    def _read_slow(self, name, topic_id, p, replica: int, remaining: int, first: bool, version: int) -> _Read:
        r = _Read(name, topic_id, p.partition)
        if name is None:
            r.code = int(ErrorCode.UNKNOWN_TOPIC_ID)
            return r
        code, plog, reg = self.state.local_leader(name, p.partition, p.current_leader_epoch)
        if code == NONE and replica not in reg.replicas:
            code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if code != NONE:
            r.code = code
            if reg is not None:
                r.leader = (reg.leader, reg.leader_epoch)
            return r
        r.plog = plog
        log = plog.log
        r.log_start = log.start_offset
        last_epoch = p.last_fetched_epoch if version >= 12 else -1
        if last_epoch >= 0:
            end = log.end_offset_for_epoch(last_epoch)
            if end.epoch < last_epoch or end.offset < p.fetch_offset:
                r.diverging = (end.epoch, end.offset)
                r.hw = plog.high_watermark
                return r
        if p.fetch_offset < log.start_offset or p.fetch_offset > log.end_offset:
            r.code = int(ErrorCode.OFFSET_OUT_OF_RANGE)
            return r
        moved = self.state.replication.on_follower_fetch(plog, reg, replica, p.fetch_offset, p.log_start_offset)
        if moved and self.on_high_watermark is not None:
            self.on_high_watermark(plog)
        # on_follower_fetch brought the leader state up to this log end and synced the HW
        # (what advance_high_watermark would do again; twice per partition per fetch was a
        # fifth of a leader's fetch handling).
        r.hw = plog.high_watermark
        quota = self.state.leader_quota
        if quota.bound is not None and quota.throttled(name, p.partition):
            r.throttled = True
            if quota.holds_back(name, p.partition, replica in reg.isr, self.clock_ms()):
                return r  # Kafka's shouldLeaderThrottle: no records for this replica this time
        if p.fetch_offset == log.end_offset:
            return r  # caught up: nothing to read (most partitions of a session, most of the time)
        try:
            r.records = read_answer(log, p.fetch_offset, min(p.partition_max_bytes, max(remaining, 0)), min_one=first)
        except OffsetOutOfRangeError:
            r.code = int(ErrorCode.OFFSET_OUT_OF_RANGE)
        except FatalLogError:
            r.code = int(ErrorCode.KAFKA_STORAGE_ERROR)
        except KraftError as exc:
            r.code = int(exc.code)
        return r


class _Parked:
    __slots__ = ("handler", "wanted", "request", "version", "fut", "timer", "positions", "reads", "size", "ctx",
                 "listener", "session", "replica")

    def __init__(self, handler, wanted, request, version, fut, ctx, listener=None):
        self.handler, self.wanted, self.request, self.version, self.fut = handler, wanted, request, version, fut
        self.ctx = ctx  # the fetch session context: it cuts the answer when the wait ends
        self.listener = listener
        self.timer = None
        self.positions: dict = {}  # PartitionLog -> indexes of its entries in wanted / reads
        self.reads = None  # what the last read found, entry by entry
        self.size = 0  # the bytes of records in it
        self.session = None  # a follower's session whose quiet partitions may join (``add``)
        self.replica = -1

    def add(self, cp) -> None:
        """A quiet partition of the session woke: read it with this request (at the end of the
        loop turn, by the wake that follows); until then it answers nothing new."""
        plog = self.handler.state.logs.get(cp.topic, cp.partition) if cp.topic is not None else None
        if plog is None or plog in self.positions:
            return  # the next request reads it (a dirty key) / this one reads it already
        entry = (cp.topic, cp.topic_id, cp, self.replica)
        i = len(self.wanted)
        self.wanted.append(entry)
        self.ctx.wanted.append(entry[:3])
        placeholder = _Read(cp.topic, cp.topic_id, cp.partition)
        placeholder.hw, placeholder.log_start = cp.high_watermark, cp.local_log_start
        self.reads.append(placeholder)
        self.positions.setdefault(plog, []).append(i)
        self.handler._parked.setdefault(plog, set()).add(self)
        # It stays in the session's dirty keys too (the next request reads it once more):
        # cheaper than proving that every way this request can end has read it.

    def check(self, plogs=None) -> None:
        """Look again: at the entries of ``plogs`` (woken by them), or at every entry (None: a
        new image may have changed any partition's leadership)."""
        if self.fut.done():
            return
        request, version = self.request, self.version
        if plogs is None or self.reads is None:
            reads, size, errors = self.handler._read_all(self.wanted, request.max_bytes, version,
                                                         _isolation(request, version),
                                                         _client_rack(request, version), self.listener)
        else:
            positions = set()
            for plog in plogs:
                positions.update(self.positions.get(plog, ()))
            reads, size, errors = self.handler._reread(self.wanted, self.reads, self.size, positions,
                                                       request.max_bytes, version, _isolation(request, version),
                                                       _client_rack(request, version), self.listener)
        self.reads, self.size = reads, size
        if size >= request.min_bytes or errors:
            self.fut.set_result(self.handler._answer(self.ctx, reads, self.version, self.listener))

    def finish(self) -> None:
        if not self.fut.done():
            reads, _, _ = self.handler._read_all(self.wanted, self.request.max_bytes, self.version,
                                                 _isolation(self.request, self.version),
                                                 _client_rack(self.request, self.version), self.listener)
            self.fut.set_result(self.handler._answer(self.ctx, reads, self.version, self.listener))

    def unpark(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if self.session is not None and self.session.parked is self:
            self.session.parked = None
        parked = self.handler._parked
        self.handler._due.pop(self, None)
        for plog in self.positions:
            s = parked.get(plog)
            if s is not None:
                s.discard(self)
                if not s:
                    del parked[plog]


def _client_rack(request, version: int, replica: int | None = None) -> str | None:
    """A consumer's rack from a v11+ Fetch ("" when it names none), which any replica may answer
    (Kafka gives such a request client metadata); None: a follower's or an older request."""
    if version < 11:
        return None
    if replica is None:
        replica = request.replica_state.replica_id if version >= 15 else request.replica_id
    if replica >= 0:
        return None
    return request.rack_id or ""


def _answer_now(r: _Read) -> bool:
    """An outcome that answers a fetch at once, whatever min_bytes says: an error, a diverging
    log, or a KIP-392 redirect (Kafka's forceComplete)."""
    return r.code != NONE or r.diverging is not None or r.preferred >= 0


def _isolation(request, version: int) -> int:
    """The request's isolation level (v4+; READ_UNCOMMITTED before, and for a follower)."""
    return request.isolation_level if version >= 4 else 0


def _encode(reads, version: int, session_id: int = 0, error_code: int = NONE,
            node_endpoints=None) -> EncodedParts | FetchResponse:
    """The answer: encoded once with a marker for each non-empty records field, then cut at
    the markers so the views go out as they are."""
    # Grouped by topic first, then numbered: the markers must be numbered in the order the
    # body holds them. Numbered in request order, a request whose partitions of one topic were
    # not contiguous (a fetch session's order, after leadership moved) was cut at the wrong
    # places and every client got an undecodable answer.
    grouped: dict = {}
    for r in reads:
        grouped.setdefault((r.topic, r.topic_id), []).append(r)
    topics = []
    views = []
    for (name, tid), rs in grouped.items():
        parts = []
        for r in rs:
            records = r.records
            if len(records):
                records = _MARKER_PREFIX + _I32.pack(len(views))
                views.append(r.records)
            part = F.Topic.Partition(partition_index=r.partition, error_code=r.code, high_watermark=r.hw,
                                     last_stable_offset=r.hw if r.lso is None else r.lso,
                                     log_start_offset=r.log_start,
                                     aborted_transactions=None if r.aborted is None else [
                                         F.AbortedTransaction(producer_id=pid, first_offset=first)
                                         for pid, first in r.aborted],
                                     preferred_read_replica=r.preferred, records=records)
            if r.leader is not None and version >= 12:
                part.current_leader = F.LeaderIdAndEpoch(leader_id=r.leader[0], leader_epoch=r.leader[1])
            if r.diverging is not None and version >= 12:
                part.diverging_epoch = F.EpochEndOffset(epoch=r.diverging[0], end_offset=r.diverging[1])
            parts.append(part)
        topics.append(F.Topic(topic=name or "", topic_id=tid, partitions=parts))
    resp = F(throttle_time_ms=0, error_code=error_code, session_id=session_id, responses=topics)
    if node_endpoints:
        resp.node_endpoints = node_endpoints
    if not views:
        return resp
    body = resp.encode(version)
    flexible = version >= 12
    prefix_len = 1 if flexible else 4  # uvarint(17) / int32 16 before each 16-byte marker
    parts = EncodedParts()
    at = 0
    for i, view in enumerate(views):
        m = body.find(_MARKER_PREFIX + _I32.pack(i), at)
        if m < 0:
            raise AssertionError(f"records marker {i} not found in order in the encoded Fetch answer")
        parts.append(body[at:m - prefix_len])
        n = view.nbytes
        parts.append(uvarint_bytes(n + 1) if flexible else _I32.pack(n))
        parts.append(view)
        at = m + 16
    parts.append(body[at:])
    return parts
