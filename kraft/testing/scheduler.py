"""A virtual clock and a deterministic event queue for the simulator.

Events run in (time, insertion order); nothing here reads the real clock. Same seed, same
calls: same order of events, so every simulated run replays exactly.
"""

from __future__ import annotations

import heapq


class EventQueue:
    def __init__(self, start_ms: int = 0):
        self.now = start_ms
        self._heap: list = []
        self._seq = 0

    def at(self, time_ms: int, event: tuple) -> None:
        """Schedule ``event`` (a tuple whose first item names its kind) at ``time_ms``."""
        self._seq += 1
        heapq.heappush(self._heap, (max(time_ms, self.now), self._seq, event))

    def pop(self):
        """The next event, advancing the clock to it; None when the queue is empty."""
        if not self._heap:
            return None
        t, _, event = heapq.heappop(self._heap)
        self.now = t
        return event

    def peek_time(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
