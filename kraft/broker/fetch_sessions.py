"""Fetch sessions (KIP-227 incremental fetch), the broker side: Kafka's ``FetchSessionCache``,
``FetchSession``, ``CachedPartition`` and the four fetch contexts of ``FetchManager.newContext``.
Sans-I/O: the clock comes in as ``now_ms``, randomness (session ids) is injected, and the
partition reads stay in ``fetch_handler``; this module only says *which* partitions a Fetch
reads and *which* of the read results go into the answer.

The rules, by the request's (session id, session epoch):

  * epoch -1 (FINAL): a sessionless full fetch (every pre-KIP-227 client); a named session is
    closed first. The answer says session 0 and carries every partition.
  * epoch 0 (INITIAL): a full fetch that creates a session (closing a named one first); the
    answer carries every partition and the new session id, or 0 when the cache has no slot
    the requester may take.
  * epoch n > 0: incremental. Unknown id -> FETCH_SESSION_ID_NOT_FOUND; epoch not the
    session's -> INVALID_FETCH_SESSION_EPOCH; a v13+ request on a session made with topic names
    (or the reverse) -> FETCH_SESSION_TOPIC_ID_ERROR. Otherwise the request's partitions are
    added or updated, ``forgotten_topics_data`` removed, and every session partition is read;
    the answer carries only the partitions with records, a new high watermark or log start
    offset, an error or a diverging epoch. A session left empty is closed (a sessionless answer).

Eviction when all ``max.incremental.fetch.session.cache.slots`` are taken (Kafka's
``tryEvict``): the least recently used session goes if it was unused for longer than the
minimum eviction age; otherwise the least valuable evictable session goes if the newcomer is
worth more, ordered by (privileged, partition count). Followers' sessions are privileged. A
session younger than the minimum age can be evicted only by a follower, and only if it is a
consumer's.

What this module must not do: read logs, touch sockets, or look at anything but the request,
the topic-name map it is given and its own cache.
"""

from __future__ import annotations

import random

from kraft.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_CACHE_SLOTS = 1000  # max.incremental.fetch.session.cache.slots
MIN_EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
_INT32_MAX = (1 << 31) - 1
NONE = int(ErrorCode.NONE)


def next_epoch(epoch: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``: FINAL stays FINAL, the maximum wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


class CachedPartition:
    """One partition of a session: the request parameters last sent for it (named as the
    request fields are, so the handler reads it exactly like a request partition) and the
    high watermark and log start offset last answered. ``topic`` is None while a v13+ topic id
    is unknown here."""

    __slots__ = ("key", "topic", "topic_id", "partition", "partition_max_bytes", "fetch_offset",
                 "log_start_offset", "current_leader_epoch", "last_fetched_epoch", "high_watermark",
                 "local_log_start", "idle", "session")

    def __init__(self, key, topic, topic_id, p, session=None):
        self.key, self.topic, self.topic_id = key, topic, topic_id
        self.partition = p.partition
        self.high_watermark = -1
        self.local_log_start = -1
        #: the note of a follower found caught up here (``quiet_partitions.IdleNote``)
        self.idle = None
        self.session = session  # the FetchSession holding it (None until the session exists)
        self.update(p)

    def update(self, p) -> None:
        self.partition_max_bytes = p.partition_max_bytes
        self.fetch_offset = p.fetch_offset
        self.log_start_offset = getattr(p, "log_start_offset", -1)
        self.current_leader_epoch = getattr(p, "current_leader_epoch", -1)
        self.last_fetched_epoch = getattr(p, "last_fetched_epoch", -1)

    def must_respond(self, read) -> bool:
        """Kafka's ``maybeUpdateResponseData`` with update: whether ``read`` goes into an
        incremental answer; remembers what the fetcher now knows."""
        must = len(read.records) > 0 or read.diverging is not None or read.preferred >= 0  # (KIP-392)
        if self.high_watermark != read.hw:
            self.high_watermark = read.hw
            must = True
        if self.local_log_start != read.log_start:
            self.local_log_start = read.log_start
            must = True
        if read.code != NONE or read.diverging is not None:
            # So the partition is sent again once the error is gone, or the follower has
            # truncated: a follower acts on a diverging epoch alone and ignores the high
            # watermark beside it (as Kafka's does), so it was not told. (Kafka records it as
            # told, and the follower's HW then lags until the next write; the replication
            # simulator's convergence check found ours doing the same, seed 200754.)
            self.high_watermark = -1
            must = True
        return must


class FetchSession:
    """Invariant: ``epoch`` is the epoch the next incremental request must carry.

    ``dirty``, ``active``, ``quiet_since``, ``parked`` and ``read_ms`` are the fetch handler's
    notes for reading only what changed (``kraft.broker.quiet_partitions``); this module
    only carries them."""

    __slots__ = ("id", "privileged", "partitions", "uses_topic_ids", "creation_ms", "last_used_ms", "epoch",
                 "dirty", "active", "quiet_since", "parked", "read_ms", "closed")

    def __init__(self, session_id: int, privileged: bool, partitions: dict, uses_topic_ids: bool, now_ms: int):
        self.id, self.privileged, self.uses_topic_ids = session_id, privileged, uses_topic_ids
        self.partitions = partitions  # key -> CachedPartition, in read order (answered ones move last)
        self.creation_ms = self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.dirty: dict = {}  # keys woken since the last request (an ordered set)
        self.active: set = set()  # keys whose last read left no quiet note: read every time
        self.quiet_since = None  # the handler's generation its notes hold for (None: none yet)
        self.parked = None  # the handler's fetch parked on this session, if any
        self.read_ms = 0  # the replication clock at the last request
        self.closed = False  # removed from the cache (closed or evicted)

    def worth(self) -> tuple:
        """Kafka's ``EvictableKey`` order: consumers before followers, small before large."""
        return (self.privileged, len(self.partitions), self.id)


class FetchSessionCache:
    def __init__(self, max_slots: int = DEFAULT_CACHE_SLOTS, min_eviction_ms: int = MIN_EVICTION_MS, *,
                 rng: random.Random | None = None):
        self.max_slots = max_slots
        self.min_eviction_ms = min_eviction_ms
        self.rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}  # in least-recently-used order (touch moves last)
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def total_partitions(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.closed = True
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        session.last_used_ms = now_ms
        if self.sessions.pop(session.id, None) is not None:
            self.sessions[session.id] = session

    def create(self, now_ms: int, privileged: bool, partitions: dict, uses_topic_ids: bool) -> int:
        """A new session's id, or ``INVALID_SESSION_ID`` when no slot may be taken."""
        if self.max_slots <= 0:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_slots and not self._evict(privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        self.sessions[session_id] = FetchSession(session_id, privileged, partitions, uses_topic_ids, now_ms)
        return session_id

    def _new_id(self) -> int:
        while True:
            session_id = self.rng.randint(1, _INT32_MAX - 1)
            if session_id not in self.sessions:
                return session_id

    def _evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Kafka's ``tryEvict``; one session at most."""
        oldest = next(iter(self.sessions.values()), None)
        if oldest is None:
            return False
        if now_ms - oldest.last_used_ms > self.min_eviction_ms:
            return self._evicted(oldest)
        # Only sessions past the minimum age can go, except that a follower may push out a
        # consumer's session at any age (replication matters more than a consumer's savings).
        old_enough = [s for s in self.sessions.values()
                      if now_ms - s.creation_ms > self.min_eviction_ms or (privileged and not s.privileged)]
        if not old_enough:
            return False
        victim = min(old_enough, key=FetchSession.worth)
        if (privileged, size, INVALID_SESSION_ID) < victim.worth():
            return False  # the newcomer is worth less than everything it could evict
        return self._evicted(victim)

    def _evicted(self, session: FetchSession) -> bool:
        del self.sessions[session.id]
        session.closed = True
        self.evictions += 1
        return True


class FetchContext:
    """What one Fetch reads and how its answer is cut. ``wanted`` is ``(topic name or None,
    topic id or None, partition)`` per partition to read, in order; ``respond(reads)`` takes
    the read results in the same order and returns ``(error code, session id, reads to send)``."""

    __slots__ = ("error", "wanted", "_cache", "_session", "_epoch", "_privileged", "_uses_ids", "_now_ms")

    def __init__(self, wanted, *, error: int = NONE, cache=None, session=None, privileged=False,
                 uses_ids=False, now_ms=0):
        self.error, self.wanted = error, wanted
        self._cache, self._session, self._privileged, self._uses_ids = cache, session, privileged, uses_ids
        self._epoch = session.epoch if session is not None else None
        self._now_ms = now_ms

    @property
    def session(self):
        """The incremental fetch's session (None for the other kinds)."""
        return self._session

    @property
    def kind(self) -> str:
        if self.error != NONE:
            return "error"
        if self._session is not None:
            return "incremental"
        return "full" if self._cache is not None else "sessionless"

    def respond(self, reads, now_ms: int | None = None):
        if self.error != NONE:
            return self.error, INVALID_SESSION_ID, []
        session = self._session
        if session is not None:
            return self._incremental(session, reads)
        if self._cache is None:
            return NONE, INVALID_SESSION_ID, reads
        partitions = {}
        for (name, topic_id, p), r in zip(self.wanted, reads):
            key = (topic_id, p.partition) if self._uses_ids else (name, p.partition)
            cp = CachedPartition(key, name, topic_id, p)
            cp.must_respond(r)  # what this full answer tells the fetcher (-1: nothing usable)
            partitions[key] = cp
        now = self._now_ms if now_ms is None else now_ms
        session_id = self._cache.create(now, self._privileged, partitions, self._uses_ids)
        session = self._cache.get(session_id)
        for cp in partitions.values():
            cp.session = session
        return NONE, session_id, reads

    def _incremental(self, session: FetchSession, reads):
        if session.epoch != self._epoch:
            # Another request moved the session on while this one was parked (a duplicate).
            return int(ErrorCode.INVALID_FETCH_SESSION_EPOCH), session.id, []
        out = []
        parts = session.partitions
        for (_, _, cp), r in zip(self.wanted, reads):
            if cp.must_respond(r):
                out.append(r)
                if parts.get(cp.key) is cp:  # answered partitions go last: the next reads are fairer
                    parts[cp.key] = parts.pop(cp.key)
        return NONE, session.id, out


class FetchSessions:
    """Kafka's ``FetchManager``: turns a Fetch into a ``FetchContext``."""

    def __init__(self, cache: FetchSessionCache | None = None):
        self.cache = cache if cache is not None else FetchSessionCache()

    def context(self, request, version: int, names_by_id: dict, *, follower: bool, now_ms: int,
                narrow=None) -> FetchContext:
        """``narrow(session, requested keys)``: for an incremental fetch, the keys of the session
        partitions to read (the request's among them), or None for every one (the default)."""
        uses_ids = version >= 13
        session_id, epoch = (request.session_id, request.session_epoch) if version >= 7 else (0, FINAL_EPOCH)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.cache.remove(session_id)  # a full fetch closes the session it names
            wanted = _request_partitions(request, uses_ids, names_by_id)
            if epoch == FINAL_EPOCH:
                return FetchContext(wanted)
            return FetchContext(wanted, cache=self.cache, privileged=follower, uses_ids=uses_ids, now_ms=now_ms)
        session = self.cache.get(session_id)
        if session is None:
            return FetchContext([], error=int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
        if session.epoch != epoch:
            return FetchContext([], error=int(ErrorCode.INVALID_FETCH_SESSION_EPOCH))
        if session.uses_topic_ids != uses_ids:
            return FetchContext([], error=int(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR))
        wanted = _request_partitions(request, uses_ids, names_by_id)
        parts = session.partitions
        requested = []
        for name, topic_id, p in wanted:
            key = (topic_id, p.partition) if uses_ids else (name, p.partition)
            cp = parts.get(key)
            if cp is None:
                parts[key] = CachedPartition(key, name, topic_id, p, session)
            else:
                cp.update(p)
            requested.append(key)
        for t in request.forgotten_topics_data or ():
            for partition in t.partitions:
                parts.pop((t.topic_id, partition) if uses_ids else (t.topic, partition), None)
        if not parts:
            self.cache.remove(session.id)
            return FetchContext(wanted)  # sessionless: the closed session's id is not answered
        self.cache.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        keys = narrow(session, requested) if narrow is not None else None
        if keys is None:
            chosen = parts.values()
        else:
            get_part = parts.get
            chosen = [cp for cp in map(get_part, keys) if cp is not None]
        if uses_ids:
            # Names follow the image: a topic id unknown at first may resolve later, a deleted
            # topic's partitions answer UNKNOWN_TOPIC_ID rather than another topic's data.
            get = names_by_id.get
            cached = []
            for cp in chosen:
                topic = get(cp.topic_id)
                cp.topic = topic.name if topic is not None else None
                cached.append((cp.topic, cp.topic_id, cp))
        else:
            cached = [(cp.topic, None, cp) for cp in chosen]
        return FetchContext(cached, session=session, cache=self.cache)


def _request_partitions(request, uses_ids: bool, names_by_id: dict) -> list:
    wanted = []
    for t in request.topics:
        if uses_ids:
            topic = names_by_id.get(t.topic_id)
            name, topic_id = (topic.name if topic is not None else None), t.topic_id
        else:
            name, topic_id = t.topic, None
        for p in t.partitions:
            wanted.append((name, topic_id, p))
    return wanted
