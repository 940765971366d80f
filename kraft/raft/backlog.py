"""UncommittedBacklog: what the leader appended in its epoch and a majority has not yet
acknowledged, in records and bytes, against the bounds a driver admits new work under.

Why a bound: a leader that accepts proposals faster than its followers replicate them builds
a tail that only grows (Kafka bounds its Raft accumulator with a memory pool, and each
controller operation to 10,000 records); every uncommitted record is lost work if leadership moves, and a tail larger
than one Fetch answer takes a follower several round trips to acknowledge. The core never
refuses a proposal for it (an atomic unit must not be cut in two): drivers ask
``RaftCore.accepting_proposals()`` before they start new work, so the tail overshoots by at
most the unit they admitted last.

Counting: appends (one per drain) are remembered as (end offset, bytes) until the high
watermark passes their end; an append the high watermark is inside of counts whole. Records
are offsets: the accumulator's next offset minus the node's high watermark (a new leader's
tail from earlier epochs counts too: it commits with the first record of the epoch). No I/O.
"""

from __future__ import annotations

import collections


class UncommittedBacklog:
    """Invariant: ``appended_bytes`` is the sum of the bytes of the remembered appends, each
    ending above the last high watermark seen."""

    __slots__ = ("_appends", "appended_bytes")

    def __init__(self):
        self._appends: collections.deque = collections.deque()  # (end offset, bytes), in offset order
        self.appended_bytes = 0

    def appended(self, end_offset: int, nbytes: int) -> None:
        """An append of ``nbytes`` bytes ending just below ``end_offset`` is in the log."""
        self._appends.append((end_offset, nbytes))
        self.appended_bytes += nbytes

    def committed(self, high_watermark: int) -> None:
        """The high watermark moved: appends wholly below it leave the backlog."""
        q = self._appends
        while q and q[0][0] <= high_watermark:
            self.appended_bytes -= q.popleft()[1]

    @staticmethod
    def records(next_offset: int, high_watermark: int) -> int:
        """Offsets appended or accumulated (below ``next_offset``) and not committed."""
        return max(0, next_offset - max(high_watermark, 0))
