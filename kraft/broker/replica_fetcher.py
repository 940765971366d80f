"""The follower half of partition replication: one ``ReplicaFetcher`` per (source broker,
fetcher id) (Kafka's ``ReplicaFetcherThread`` / ``AbstractFetcherThread`` as a sans-I/O state
machine), and ``ReplicaFetchers``, which assigns this broker's follower partitions to them
from each metadata image (``num.replica.fetchers`` per source broker).

A fetcher builds one Fetch (v12+: last fetched epoch, current leader epoch, replica id) for
its ready partitions, then turns the answer into effects the server layer executes in order,
before it asks for the next request:

  * ``Truncate(tp, offset)``: the leader answered DivergingEpoch; the offset comes from this
    broker's own epoch checkpoint (``end_offset_for_epoch``, Kafka's ``getOffsetTruncationState``).
  * ``TruncateFullyAndStartAt(tp, offset)``: the leader no longer has our fetch offset.
  * ``AppendAsFollower(tp, records)``: the fetched batches as they arrived (no re-encode;
    offsets and epochs kept; a partial trailing batch may be dropped).
  * ``UpdateHighWatermark(tp, hw)`` / ``UpdateLogStart(tp, offset)``: from the leader's answer;
    the executor clamps the HW to its log end (a follower's HW never exceeds its LEO).

The fetcher reads local state through a small port (``local``: ``end_offset(tp)``,
``latest_epoch(tp)``, ``end_offset_for_epoch(tp, epoch) -> (offset, epoch)``) and never writes
it. Errors back off the partition (``replica.fetch.backoff.ms``); FENCED_LEADER_EPOCH parks it
until the image brings a newer leader epoch.

Each fetcher keeps a fetch session (KIP-227) with its leader (``fetch_session_client``): a
full fetch first, then incremental ones that carry only the partitions whose fetch state
changed (an idle partition costs neither request nor answer bytes). A session error makes the
next request full at once; a failed request or a backed-off partition's return goes through the
same diff. A new leader is a new fetcher, hence a new session.

Building an incremental request costs what changed, not what is followed: a partition's fetch
state moves only by this fetcher's own answers (appends, truncations, log start moves), by the
image (leader epoch, membership) and by what the local port counts in ``changes()`` (a log
made, replaced or deleted, retention). So the fetcher notes the partitions its last answer or
the image touched and asks the port only about those; anything else (a partition backed off or
fenced, a quota in force, a session to open, ``changes()`` moved, a port without it) takes the
full pass over every partition, as a broker holding 1,000 idle partitions once did on every
request.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from kraft.broker.fetch_session_client import ClientFetchSession, PartitionParams
from kraft.errors import ErrorCode
from kraft.protocol import FetchRequest, FetchResponse

F = FetchRequest
NONE = int(ErrorCode.NONE)
DEFAULT_BACKOFF_MS = 1000  # replica.fetch.backoff.ms
DEFAULT_MAX_WAIT_MS = 500  # replica.fetch.wait.max.ms
DEFAULT_MAX_BYTES = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
DEFAULT_PARTITION_MAX_BYTES = 1024 * 1024  # replica.fetch.max.bytes
FETCH_VERSION = 13
#: Session errors answered by a full fetch at once (Kafka's fetcher returns no data for them and
#: asks again; FETCH_SESSION_TOPIC_ID_ERROR backs off like any other failure).
_RETRY_FULL = frozenset({int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND), int(ErrorCode.INVALID_FETCH_SESSION_EPOCH)})


#: how long a partition held back by the follower replication quota waits before it is looked at again
THROTTLE_RECHECK_MS = 100


class Truncate(NamedTuple):
    tp: tuple
    offset: int


class TruncateFullyAndStartAt(NamedTuple):
    tp: tuple
    offset: int


class AppendAsFollower(NamedTuple):
    tp: tuple
    records: object


class UpdateHighWatermark(NamedTuple):
    tp: tuple
    high_watermark: int


class UpdateLogStart(NamedTuple):
    tp: tuple
    offset: int


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


@functools.lru_cache(maxsize=4096)
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units). Cached: every image asks it for
    every followed partition (``fetcher_id``), and a Python loop over a topic name's
    characters 1,000 times per image was a sixth of a follower's loop time."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return _int32(h)


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's ``AbstractFetcherManager.getFetcherId``: ``abs(31 * topic.hashCode + partition) % n``
    (Kafka's ``Utils.abs`` maps Integer.MIN_VALUE to 0)."""
    v = _int32(31 * java_string_hash(topic) + partition)
    return (0 if v == -(1 << 31) else abs(v)) % num_fetchers


class FetchPartition:
    """One partition a fetcher follows. Invariant: fetched only when ``fenced`` is False and
    ``backoff_until_ms <= now``."""

    __slots__ = ("tp", "topic_id", "leader_epoch", "backoff_until_ms", "fenced", "in_sync", "params")

    def __init__(self, tp: tuple, topic_id, leader_epoch: int):
        self.tp, self.topic_id, self.leader_epoch = tp, topic_id, leader_epoch
        self.backoff_until_ms = 0
        self.fenced = False
        self.in_sync = False  # this replica is in the ISR (the image): never throttled then
        self.params: PartitionParams | None = None  # what the last request asked with


def _params(p: FetchPartition, position, max_bytes: int) -> PartitionParams:
    """What a request asks for ``p``, from the local log's ``position``. Unchanged (most
    partitions of a session, most of the time): the same tuple again, which the session
    compares by identity first. (The topic id by identity first: UUID's == is Python code, a
    seventh of a poll.)"""
    end, start, latest = position(p.tp)
    latest = -1 if latest is None else latest
    params = p.params
    if (params is None or params[1] != end or params[2] != start or params[5] != latest
            or params[4] != p.leader_epoch or params[3] != max_bytes
            or (params[0] is not p.topic_id and params[0] != p.topic_id)):
        params = p.params = PartitionParams(p.topic_id, end, start, max_bytes, p.leader_epoch, latest)
    return params


class ReplicaFetcher:
    def __init__(self, broker_id: int, leader_id: int, fetcher_index: int, local, *,
                 version: int = FETCH_VERSION, backoff_ms: int = DEFAULT_BACKOFF_MS,
                 max_wait_ms: int = DEFAULT_MAX_WAIT_MS, min_bytes: int = 1, max_bytes: int = DEFAULT_MAX_BYTES,
                 partition_max_bytes: int = DEFAULT_PARTITION_MAX_BYTES, fetch_sessions: bool = True,
                 quota=None):
        if version < 12:
            raise ValueError("replica fetchers use Fetch v12+ (last fetched epoch, DivergingEpoch)")
        self.broker_id, self.leader_id, self.fetcher_index = broker_id, leader_id, fetcher_index
        self.local = local
        self.version = version
        self.backoff_ms, self.max_wait_ms, self.min_bytes = backoff_ms, max_wait_ms, min_bytes
        self.max_bytes, self.partition_max_bytes = max_bytes, partition_max_bytes
        self.partitions: dict[tuple, FetchPartition] = {}
        self.in_flight: dict[tuple, int] | None = None  # tp -> leader epoch, of the request out
        self.session = ClientFetchSession(enabled=fetch_sessions)
        self.quota = quota  # the follower replication quota (kraft.broker.replication_quotas), or None
        # What lets a request skip the partitions nothing touched (see the module's note):
        self._epochs: dict[tuple, int] = {}  # tp -> leader epoch of every partition; copied before a change while out
        self._dirty: dict[tuple, None] = {}  # partitions to ask the port about (a dict: ordered, deterministic)
        self._held: set = set()  # fenced or backed off at the last full pass (or since)
        self._rescan = True  # a partition came or went: the next request is a full pass
        self._seen = None  # (local.changes(), partition_max_bytes) at the last full pass

    # --- membership (from image changes) -------------------------------------------------------
    def add_or_update(self, tp: tuple, topic_id, leader_epoch: int, in_sync: bool = False) -> None:
        p = self.partitions.get(tp)
        if p is None or p.topic_id != topic_id:
            p = self.partitions[tp] = FetchPartition(tp, topic_id, leader_epoch)
            self._rescan = True
            self._set_epoch(tp, leader_epoch)
        elif leader_epoch != p.leader_epoch:
            p.leader_epoch, p.fenced, p.backoff_until_ms = leader_epoch, False, 0
            self._held.discard(tp)
            self._dirty[tp] = None
            self._set_epoch(tp, leader_epoch)
        p.in_sync = in_sync

    def remove(self, tp: tuple) -> None:
        if self.partitions.pop(tp, None) is not None:
            self._rescan = True
            self._set_epoch(tp, None)

    def _set_epoch(self, tp: tuple, epoch: int | None) -> None:
        """``_epochs`` is the request's record of what it asked (``in_flight``) while one is
        out: a change then goes to a copy, so the answer is judged by the epochs it was asked in."""
        if self.in_flight is self._epochs:
            self._epochs = dict(self._epochs)
        if epoch is None:
            self._epochs.pop(tp, None)
        else:
            self._epochs[tp] = epoch

    def _hold(self, p: FetchPartition) -> None:
        """``p`` was just fenced or backed off: the requests go through the full pass until it is back."""
        self._held.add(p.tp)

    # --- requests ------------------------------------------------------------------------------
    def poll(self, now_ms: int) -> FetchRequest | None:
        """The next Fetch to send to ``leader_id``, or None (one in flight, or nothing ready)."""
        if self.in_flight is not None:
            return None
        if self._steady():
            return self._poll_changed()
        ready = [p for p in self.partitions.values() if not p.fenced and p.backoff_until_ms <= now_ms]
        quota = self.quota
        if quota is not None and quota.bound is not None:
            # Kafka's shouldFollowerThrottle: a throttled partition of a replica out of the ISR
            # is left out of the request while the follower quota is exceeded.
            held = [p for p in ready if quota.holds_back(p.tp[0], p.tp[1], p.in_sync, now_ms)]
            for p in held:  # looked at again soon (the rate spans seconds), not in a busy loop
                p.backoff_until_ms = now_ms + THROTTLE_RECHECK_MS
            if held:
                ready = [p for p in ready if p.backoff_until_ms <= now_ms]
        if not ready:
            if self.partitions or not self.session.open:
                return None
            # Followed nothing any more: one last request forgets every partition, so the
            # leader closes the session instead of keeping it until eviction.
            self.in_flight = {}
            return self._request(self.session.build({}))
        position = self.local.position
        max_bytes = self.partition_max_bytes
        wanted = {}
        for p in ready:
            wanted[p.tp] = _params(p, position, max_bytes)
        # Every session partition may be answered, so every one is "asked" (stale answers are
        # recognised by leader epoch).
        self.in_flight = {p.tp: p.leader_epoch for p in ready}
        self._full_pass_done(now_ms)
        return self._request(self.session.build(wanted))

    def _steady(self) -> bool:
        """May this request ask the port only about the partitions noted since the last one?"""
        if self._rescan or self._held or not self.session.open or self._seen is None:
            return False
        if self.quota is not None and self.quota.bound is not None:
            return False  # throttling is decided per partition, per request
        changes = getattr(self.local, "changes", None)
        return changes is not None and self._seen == (changes(), self.partition_max_bytes)

    def _full_pass_done(self, now_ms: int) -> None:
        changes = getattr(self.local, "changes", None)
        self._seen = (changes(), self.partition_max_bytes) if changes is not None else None
        self._rescan = False
        self._dirty.clear()
        self._held = {tp for tp, p in self.partitions.items() if p.fenced or p.backoff_until_ms > now_ms}

    def _poll_changed(self) -> FetchRequest:
        """An incremental request from the partitions noted since the last one (every
        partition is ready: none is held)."""
        position = self.local.position
        max_bytes = self.partition_max_bytes
        partitions = self.partitions
        changed = {}
        for tp in self._dirty:
            p = partitions.get(tp)
            if p is not None:
                changed[tp] = _params(p, position, max_bytes)
        self._dirty.clear()
        self.in_flight = self._epochs
        return self._request(self.session.build_changed(changed))

    @property
    def idle(self) -> bool:
        """Nothing to follow, nothing in flight, no session left open on the leader."""
        return not self.partitions and self.in_flight is None and not self.session.open

    def _request(self, s) -> FetchRequest:
        by_topic: dict = {}
        for tp, w in s.to_send.items():
            by_topic.setdefault((tp[0], w.topic_id), []).append(F.Topic.Partition(
                partition=tp[1], current_leader_epoch=w.current_leader_epoch, fetch_offset=w.fetch_offset,
                last_fetched_epoch=w.last_fetched_epoch, log_start_offset=w.log_start_offset,
                partition_max_bytes=w.partition_max_bytes))
        forget: dict = {}
        for tp, topic_id in s.to_forget:
            forget.setdefault((tp[0], topic_id), []).append(tp[1])
        # The replica is named by ``replica_id`` up to v14 and by ``replica_state`` from v15
        # (the codec refuses a field its version cannot carry).
        who = (dict(replica_state=F.ReplicaState(replica_id=self.broker_id, replica_epoch=-1)) if self.version >= 15
               else dict(replica_id=self.broker_id))
        return F(**who, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes, max_bytes=self.max_bytes, isolation_level=0,
                 session_id=s.session_id, session_epoch=s.session_epoch, rack_id="",
                 forgotten_topics_data=[F.ForgottenTopic(topic=name, topic_id=tid, partitions=ps)
                                        for (name, tid), ps in forget.items()],
                 topics=[F.Topic(topic=name, topic_id=tid, partitions=ps) for (name, tid), ps in by_topic.items()])

    def next_ready_ms(self) -> int | None:
        """When a backed-off partition becomes ready (the driver's next wake-up), or None."""
        times = [p.backoff_until_ms for p in self.partitions.values() if not p.fenced]
        return min(times) if times else None

    # --- answers -------------------------------------------------------------------------------
    def on_failure(self, now_ms: int) -> None:
        """The request failed as a whole (connection lost, timeout, top-level error)."""
        for tp in self.in_flight or ():
            p = self.partitions.get(tp)
            if p is not None:
                p.backoff_until_ms = now_ms + self.backoff_ms
                self._hold(p)
        self.in_flight = None
        self.session.on_error()

    def on_response(self, resp: FetchResponse, now_ms: int, by_id: dict | None = None) -> list:
        """Effects for the answer to the request from ``poll``, in the order to execute
        them. ``by_id`` maps topic id -> name (v13+ answers carry ids only)."""
        asked = self.in_flight or {}
        if not self.session.on_response(resp.error_code, resp.session_id):
            if resp.error_code in _RETRY_FULL and self.session.enabled:
                self.in_flight = None  # the session is gone or out of step: a full fetch, now
            else:
                self.on_failure(now_ms)
            return []
        self.in_flight = None
        names = dict(by_id or {})
        for tp in asked:
            p = self.partitions.get(tp)
            if p is not None:
                names.setdefault(p.topic_id, tp[0])
        effects: list = []
        for t in resp.responses:
            name = t.topic if self.version < 13 else names.get(t.topic_id)
            for part in t.partitions:
                tp = (name, part.partition_index)
                p = self.partitions.get(tp)
                if p is None or asked.get(tp) != p.leader_epoch:
                    continue  # removed or re-led meanwhile: this answer is from a past leader
                self._partition(p, part, now_ms, effects)
        return effects

    def _partition(self, p: FetchPartition, part, now_ms: int, effects: list) -> None:
        code = part.error_code
        tp = p.tp
        self._dirty[tp] = None  # its effects may move what the next request asks with
        if code == NONE:
            div = part.diverging_epoch
            if div is not None and (div.epoch >= 0 or div.end_offset >= 0):
                effects.append(Truncate(tp, self._truncation_offset(tp, div.epoch, div.end_offset)))
                return
            if part.records is not None and len(part.records):
                effects.append(AppendAsFollower(tp, part.records))
                if self.quota is not None and self.quota.throttled(tp[0], tp[1]):
                    self.quota.record(len(part.records), now_ms)
            if part.log_start_offset > self.local.start_offset(tp):
                effects.append(UpdateLogStart(tp, part.log_start_offset))
            if part.high_watermark >= 0:
                effects.append(UpdateHighWatermark(tp, part.high_watermark))
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE and part.log_start_offset > self.local.end_offset(tp):
            effects.append(TruncateFullyAndStartAt(tp, part.log_start_offset))
            return
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            p.fenced = True  # our leader epoch is old: the image will bring the new one
            self._hold(p)
            return
        # NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH (the leader is behind us), storage
        # errors, out of range above the leader's end (unclean election; needs ListOffsets)...
        p.backoff_until_ms = now_ms + self.backoff_ms
        self._hold(p)

    def _truncation_offset(self, tp: tuple, leader_epoch: int, leader_end_offset: int) -> int:
        """Kafka's ``getOffsetTruncationState`` with the local epoch checkpoint."""
        leo = self.local.end_offset(tp)
        if leader_end_offset < 0:
            return min(self.local.high_watermark(tp), leo)  # the leader knows no such epoch
        if leader_epoch < 0:
            return min(leader_end_offset, leo)
        offset, epoch = self.local.end_offset_for_epoch(tp, leader_epoch)
        if offset < 0:
            return min(leader_end_offset, leo)
        if epoch != leader_epoch:
            # We never had the leader's epoch: cut back to the end of our last epoch before it
            # and ask again with that epoch (the next answer may diverge further).
            return min(offset, leo)
        return min(leader_end_offset, offset, leo)


class ReplicaFetchers:
    """Which fetcher follows which partition, from the metadata image (Kafka's
    ``ReplicaFetcherManager``). Becoming leader removes a partition from every fetcher
    before anything else (seed 003: the new leader stops fetching from the old one)."""

    def __init__(self, broker_id: int, local, *, num_fetchers: int = 1, **fetcher_options):
        self.broker_id = broker_id
        self.local = local
        self.num_fetchers = max(1, num_fetchers)
        self.fetcher_options = fetcher_options
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self.assigned: dict[tuple, tuple[int, int]] = {}  # tp -> fetcher key

    def on_image(self, image) -> list[tuple]:
        """Follow the image; returns the partitions that stopped being followed."""
        wanted: dict[tuple, tuple] = {}
        for topic in image.topics.by_id.values():
            for pid, reg in topic.partitions.items():
                if self.broker_id in reg.replicas and reg.leader != self.broker_id and reg.leader >= 0:
                    wanted[(topic.name, pid)] = (topic.id, reg.leader, reg.leader_epoch, self.broker_id in reg.isr)
        # A partition whose local log is still being made is followed once it is there.
        wanted = {tp: w for tp, w in wanted.items() if self.local.has(tp)}
        stopped = []
        for tp, key in list(self.assigned.items()):
            w = wanted.get(tp)
            if w is None or (w[1], fetcher_id(tp[0], tp[1], self.num_fetchers)) != key:
                self.fetchers[key].remove(tp)
                del self.assigned[tp]
                if w is None:
                    stopped.append(tp)
        for tp, (topic_id, leader, epoch, in_sync) in wanted.items():
            key = (leader, fetcher_id(tp[0], tp[1], self.num_fetchers))
            f = self.fetchers.get(key)
            if f is None:
                f = self.fetchers[key] = ReplicaFetcher(self.broker_id, leader, key[1], self.local,
                                                        **self.fetcher_options)
            f.add_or_update(tp, topic_id, epoch, in_sync)
            self.assigned[tp] = key
        for key in [k for k, f in self.fetchers.items() if f.idle]:
            del self.fetchers[key]
        return stopped
