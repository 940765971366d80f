"""A per-key rate limit for log lines about a peer (a misconfigured node, a corrupt fetch).

A problem that repeats on every request (each Fetch every few hundred milliseconds) must
be visible in the log without flooding it: at most one line per key per ``interval_s``,
and the line says how many were held back since the last one. This module only decides;
callers log. No I/O, no threads; the clock is ``time.monotonic`` unless one is passed.
"""

from __future__ import annotations

import time

PEER_PROBLEM_LOG_INTERVAL_S = 10.0


class LogThrottle:
    def __init__(self, interval_s: float = PEER_PROBLEM_LOG_INTERVAL_S, clock=time.monotonic):
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict = {}  # key -> time of the last line logged
        self._held: dict = {}  # key -> lines held back since then

    def allow(self, key) -> int | None:
        """None if a line for ``key`` must be held back now; otherwise how many were held
        back before this one (0 on the first), and the line should be logged."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)


def held_note(held: int) -> str:
    """The suffix that says how many similar lines were held back."""
    return f" ({held} similar in the last interval not logged)" if held else ""
