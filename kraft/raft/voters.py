"""Replica identity and the voter set as data.

A replica is (node id, directory id): a node whose disk was wiped comes back with a new
directory id and is, to the quorum, a different replica, so it can neither vote twice in an
epoch it already voted in nor be counted for data it lost (KIP-853's ReplicaKey). A
``directory_id`` of ``None`` means "not known" and matches any directory (a static
``controller.quorum.voters`` has no directory ids).

The voter set is a value that holds from a log offset on (:class:`VoterSetHistory`), not a
constant baked into the states, so dynamic membership can add entries at the offsets of
VotersRecords. No I/O, no parsing of records here.
"""

from __future__ import annotations

import bisect
from kraft.types import ReplicaKey


class VoterSet:
    """An immutable set of voters, keyed by node id. ``endpoints`` (optional): node id ->
    tuple of ``Endpoint`` (a Voters record carries each voter's listeners; a static
    ``controller.quorum.voters`` set has them in the configuration instead)."""

    __slots__ = ("_voters", "_ids", "_endpoints")

    def __init__(self, voters, endpoints=None):
        keys = [v if isinstance(v, ReplicaKey) else ReplicaKey(int(v)) for v in voters]
        self._voters = {k.id: k for k in keys}
        if len(self._voters) != len(keys):
            raise ValueError(f"duplicate voter ids in {keys}")
        self._ids = frozenset(self._voters)
        self._endpoints = {i: tuple(e) for i, e in (endpoints or {}).items() if i in self._ids}

    def endpoints(self, node_id: int) -> tuple:
        """The listeners of voter ``node_id`` as the Voters record gave them (empty if unknown)."""
        return self._endpoints.get(node_id, ())

    def with_voter(self, key: ReplicaKey, endpoints=()) -> "VoterSet":
        """A copy with ``key`` added (AddRaftVoter)."""
        eps = dict(self._endpoints)
        eps[key.id] = tuple(endpoints)
        return VoterSet([*self._voters.values(), key], eps)

    def without_voter(self, key: ReplicaKey) -> "VoterSet":
        """A copy with ``key`` removed (RemoveRaftVoter)."""
        return VoterSet([k for k in self._voters.values() if k.id != key.id], self._endpoints)

    def with_endpoints(self, node_id: int, endpoints) -> "VoterSet":
        """A copy with voter ``node_id``'s listeners replaced (UpdateRaftVoter)."""
        eps = dict(self._endpoints)
        eps[node_id] = tuple(endpoints)
        return VoterSet(self._voters.values(), eps)

    @property
    def ids(self) -> frozenset[int]:
        return self._ids

    def keys(self) -> list[ReplicaKey]:
        return [self._voters[i] for i in sorted(self._voters)]

    def key(self, node_id: int) -> ReplicaKey | None:
        return self._voters.get(node_id)

    def is_voter(self, key: ReplicaKey) -> bool:
        voter = self._voters.get(key.id)
        return voter is not None and voter.matches(key)

    def is_only_voter(self, key: ReplicaKey) -> bool:
        return len(self._voters) == 1 and self.is_voter(key)

    def __len__(self) -> int:
        return len(self._voters)

    def __eq__(self, other) -> bool:
        return isinstance(other, VoterSet) and self._voters == other._voters and self._endpoints == other._endpoints

    def __hash__(self) -> int:
        return hash(frozenset(self._voters.items()))

    def __repr__(self) -> str:
        return f"VoterSet({self.keys()})"


class VoterSetHistory:
    """The voter set in force at each log offset.

    The bootstrap set (from configuration or the bootstrap snapshot) holds from offset -1;
    ``add_at(offset, voters)`` records a change written at ``offset``. Entries above a
    truncation point are dropped with the log (``truncate_new_entries``).
    Invariant: offsets strictly increase.
    """

    __slots__ = ("_offsets", "_sets", "latest")

    def __init__(self, bootstrap: VoterSet):
        self._offsets: list[int] = [-1]
        self._sets: list[VoterSet] = [bootstrap]
        #: The voter set in force now (``last()``), as an attribute: the leader's poll checks
        #: it several times per request.
        self.latest = bootstrap

    def add_at(self, offset: int, voters: VoterSet) -> None:
        if offset <= self._offsets[-1]:
            raise ValueError(f"voter set change at {offset} not after {self._offsets[-1]}")
        self._offsets.append(offset)
        self._sets.append(voters)
        self.latest = voters

    def last(self) -> VoterSet:
        return self.latest

    def previous(self) -> VoterSet | None:
        """The set before the latest change (None if there was none since the bootstrap)."""
        return self._sets[-2] if len(self._sets) > 1 else None

    def last_offset(self) -> int:
        """Offset of the record that set the current voters (-1: the bootstrap set)."""
        return self._offsets[-1]

    def reset(self, voters: VoterSet, offset: int = -1) -> None:
        """Forget all history: ``voters`` hold from ``offset`` (a snapshot was loaded)."""
        self._offsets = [offset]
        self._sets = [voters]
        self.latest = voters

    def at(self, offset: int) -> VoterSet:
        """The voter set in force for the record at ``offset``."""
        return self._sets[self.index_at(offset)]

    def index_at(self, offset: int) -> int:
        """Position in the history of the entry in force at ``offset``."""
        return max(bisect.bisect_right(self._offsets, offset) - 1, 0)

    def __len__(self) -> int:
        return len(self._sets)

    def truncate_new_entries(self, end_offset: int) -> None:
        """Forget changes at offsets >= ``end_offset`` (the log was truncated there)."""
        while len(self._offsets) > 1 and self._offsets[-1] >= end_offset:
            self._offsets.pop()
            self._sets.pop()
        self.latest = self._sets[-1]
