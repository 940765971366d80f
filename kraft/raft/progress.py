"""Follower progress as the leader sees it: end offsets, fetch times, check-quorum.

One :class:`ReplicaProgress` per replica, voters keyed by node id and observers by
(node id, directory id). Only valid fetches move a replica's end offset (the caller checks
validity); the leader's own entry is its *flushed* end offset. Pure bookkeeping: the high
watermark rule itself lives in ``LeaderState``, the arithmetic in ``majority``.
"""

from __future__ import annotations

from kraft.raft.rpcs import replica_state
from kraft.raft.voters import ReplicaKey, VoterSet


class ReplicaProgress:
    """Invariant: ``end_offset`` is -1 until the replica's first valid fetch."""

    __slots__ = ("key", "end_offset", "last_fetch_ms", "last_caught_up_ms", "acknowledged")

    def __init__(self, key: ReplicaKey):
        self.key = key
        self.end_offset = -1
        self.last_fetch_ms = -1
        self.last_caught_up_ms = -1
        self.acknowledged = False  # answered BeginQuorumEpoch or fetched in this epoch

    def describe(self):
        """This replica as a DescribeQuorum ReplicaState."""
        return replica_state(self.key.id, self.key.directory_id, self.end_offset,
                             self.last_fetch_ms, self.last_caught_up_ms)

    def __repr__(self) -> str:
        return f"ReplicaProgress({self.key.id}, end={self.end_offset}, fetched={self.last_fetch_ms})"


class ProgressTracker:
    """Progress of every replica in one leader epoch."""

    __slots__ = ("local", "voters", "observers", "_fetched_voters")

    def __init__(self, local: ReplicaKey, voters: VoterSet):
        self.local = local
        self.voters: dict[int, ReplicaProgress] = {k.id: ReplicaProgress(k) for k in voters.keys()}
        self.observers: dict[ReplicaKey, ReplicaProgress] = {}
        self._fetched_voters: set[int] = set()  # voters that fetched since the last check-quorum reset

    def voter_progress(self, key: ReplicaKey) -> ReplicaProgress | None:
        """The voter entry for ``key`` if ``key`` is that voter (same directory)."""
        p = self.voters.get(key.id)
        return p if p is not None and p.key.matches(key) else None

    def progress(self, key: ReplicaKey) -> ReplicaProgress:
        p = self.voter_progress(key)
        if p is None:
            p = self.observers.get(key)
            if p is None:
                p = self.observers[key] = ReplicaProgress(key)
        return p

    def set_voters(self, voters: VoterSet) -> None:
        """The voter set changed (a Voters record was appended): voters keep their progress,
        a promoted observer brings its own, a removed voter becomes an observer."""
        old = self.voters
        new: dict[int, ReplicaProgress] = {}
        for k in voters.keys():
            p = old.get(k.id)
            if p is None or not p.key.matches(k):
                p = self.observers.pop(k, None) or ReplicaProgress(k)
            elif p.key != k:
                p.key = k  # the same replica, its directory id now known (kraft.version 0 -> 1)
            new[k.id] = p
        for i, p in old.items():
            if i not in new and i != self.local.id:
                self.observers[p.key] = p
        self.voters = new
        self._fetched_voters &= set(new)

    def update_local(self, flushed_end_offset: int) -> bool:
        """Record the leader's flushed end offset; True if it changed."""
        p = self.voters.get(self.local.id)
        if p is None:
            p = self.observers.get(self.local)
            if p is not None:
                p.end_offset = flushed_end_offset  # kept for DescribeQuorum, never counted
            return False
        if p.end_offset == flushed_end_offset:
            return False
        if flushed_end_offset < p.end_offset:
            raise AssertionError(f"leader end offset went back {p.end_offset} -> {flushed_end_offset}")
        p.end_offset = flushed_end_offset
        return True

    def update_replica(self, key: ReplicaKey, end_offset: int, now_ms: int, leader_end: int) -> bool:
        """Record a valid fetch at ``end_offset``; True if a voter's end offset changed."""
        if key.id == self.local.id:
            return False
        p = self.voter_progress(key)
        is_voter = p is not None
        if p is None:
            p = self.progress(key)
        p.last_fetch_ms = now_ms
        p.acknowledged = True
        if end_offset >= leader_end:
            p.last_caught_up_ms = now_ms
        changed = p.end_offset != end_offset
        p.end_offset = end_offset
        if is_voter:
            self._fetched_voters.add(key.id)
        return changed and is_voter

    def note_fetch_snapshot(self, key: ReplicaKey, now_ms: int) -> None:
        """A FetchSnapshot also proves the replica follows us (for check-quorum)."""
        p = self.voter_progress(key)
        if p is not None and key.id != self.local.id:
            p.last_fetch_ms = now_ms
            self._fetched_voters.add(key.id)

    def voter_end_offsets(self) -> list[int]:
        return [p.end_offset for p in self.voters.values()]

    def check_quorum_satisfied(self) -> bool:
        """True (and the window restarts) once a majority, counting the leader if it is a
        voter, has fetched since the last reset (Kafka LeaderState check-quorum)."""
        need = len(self.voters) // 2 + 1
        if self.local.id in self.voters:
            need -= 1
        if len(self._fetched_voters) >= need:
            self._fetched_voters.clear()
            return True
        return False

    def followers_by_descending_end_offset(self) -> list[int]:
        others = [p for i, p in self.voters.items() if i != self.local.id]
        others.sort(key=lambda p: (-p.end_offset, p.key.id))
        return [p.key.id for p in others]

    def describe_voters(self, now_ms: int) -> list:
        return [self._describe(self.voters[i], now_ms) for i in sorted(self.voters)]

    def describe_observers(self, now_ms: int) -> list:
        return [self._describe(p, now_ms) for p in sorted(self.observers.values(), key=lambda p: p.key.id)]

    def _describe(self, p: ReplicaProgress, now_ms: int):
        if p.key.id == self.local.id:
            # The leader is its own freshest replica: Kafka's LeaderState reports its fetch
            # and caught-up times as now.
            return replica_state(p.key.id, p.key.directory_id, p.end_offset, now_ms, now_ms)
        return p.describe()
