"""ElectionState, the durable part of a replica's quorum state, and LeaderAndEpoch.

ElectionState is what Kafka writes to the ``quorum-state`` file: the epoch, the leader if
known, and the vote cast in that epoch. The core asks for it to be persisted through a
``PersistElection`` effect; the server's store writes it (temp file, fsync, rename). Pure
values: no file format here.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.raft.voters import ReplicaKey


@dataclass(frozen=True, slots=True)
class ElectionState:
    """Invariants: ``epoch >= 0``; ``leader_id == -1`` or a replica id; a vote, once cast in
    an epoch, is kept for that whole epoch (also after the leader is known), so a restarted
    voter never votes twice in one epoch."""

    epoch: int
    leader_id: int = -1
    voted_key: ReplicaKey | None = None

    @property
    def has_leader(self) -> bool:
        return self.leader_id >= 0

    def is_leader(self, local_id: int) -> bool:
        return self.leader_id >= 0 and self.leader_id == local_id

    def is_voted_candidate(self, key: ReplicaKey) -> bool:
        return self.voted_key is not None and self.voted_key.matches(key)

    @staticmethod
    def initial() -> "ElectionState":
        return ElectionState(0)


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    """What ``RaftListener.handle_leader_change`` receives; ``leader_id`` is -1 when unknown."""

    leader_id: int
    epoch: int

    @property
    def has_leader(self) -> bool:
        return self.leader_id >= 0
