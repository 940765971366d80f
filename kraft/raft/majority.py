"""Quorum arithmetic: majorities, the majority-replicated offset, and vote tallies.

Kept apart (as etcd's ``quorum/majority.go``) so the arithmetic is small and tested on its
own. Pure functions over plain values; knows nothing about roles or the log.

``majority_offset`` stays Python (issue 36 asked whether to compile it): it sorts 1-5 ints,
about 1 us, and runs only when a voter's end offset moved, while a caught-up leader Fetch cost
~150 us in ``bench/bench_raft_core.py`` at load ~8 (and did not call it at all); a native call
would still need the Python list built first, so it cannot save a measurable share.
"""

from __future__ import annotations

from enum import Enum


def majority_size(voter_count: int) -> int:
    """Smallest number of voters that is a majority: 2 of 3, 3 of 4, 3 of 5."""
    return voter_count // 2 + 1


def majority_offset(end_offsets: list[int]) -> int:
    """The largest offset that at least a majority of the given voters' end offsets reach.

    REFERENCE.md section 5 / Kafka LeaderState.maybeUpdateHighWatermark: sort descending
    and take index ``len // 2``. An unknown end offset is -1 and sorts last.
    """
    if not end_offsets:
        return -1
    ordered = sorted(end_offsets, reverse=True)
    return ordered[len(ordered) // 2]


class VoteResult(Enum):
    PENDING = "pending"
    WON = "won"
    LOST = "lost"


class VoteTally:
    """Votes of one election (or pre-election) among ``voter_ids``. Votes from non-voters
    are ignored; a voter's first answer counts (duplicates cannot flip it)."""

    __slots__ = ("voter_ids", "granted", "rejected")

    def __init__(self, voter_ids):
        self.voter_ids = frozenset(voter_ids)
        self.granted: set[int] = set()
        self.rejected: set[int] = set()

    def record(self, voter_id: int, granted: bool) -> bool:
        """Record an answer; False if it was not a voter or had answered already."""
        if voter_id not in self.voter_ids or voter_id in self.granted or voter_id in self.rejected:
            return False
        (self.granted if granted else self.rejected).add(voter_id)
        return True

    def reconsider(self, voter_id: int) -> bool:
        """Forget a rejection (the voter's reason for it may be gone); True if there was one."""
        if voter_id in self.rejected:
            self.rejected.discard(voter_id)
            return True
        return False

    def unrecorded(self) -> list[int]:
        return sorted(self.voter_ids - self.granted - self.rejected)

    def result(self) -> VoteResult:
        need = majority_size(len(self.voter_ids))
        if len(self.granted) >= need:
            return VoteResult.WON
        if len(self.voter_ids) - len(self.rejected) < need:
            return VoteResult.LOST
        return VoteResult.PENDING
