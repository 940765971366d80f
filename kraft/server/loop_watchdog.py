"""LoopWatchdog: notices when this node's event loop stopped turning for a while (a long
callback, a GC pause, a starved CPU), logs it and keeps the worst figure as a gauge.

Why: a loop that does not turn answers no Fetch and sends no Fetch; past the fetch timeout a
follower campaigns and a leader resigns (check-quorum). A line naming the stall, next to the
election it caused, says which it was. No work of its own beyond one timer every
``INTERVAL_S``.

Each tick's lateness also goes into two histograms (ms): ``kraft_event_loop_lag_ms``, the
lateness itself, and ``kraft_event_loop_own_stall_ms``, the lateness less the time the loop
thread spent waiting for a CPU meanwhile (``/proc/thread-self/schedstat``): on a machine with
more runnable threads than cores the first counts the scheduler's delays, the second what the
loop itself did (a long callback, a blocking call, a GC pause). A stall of S shows as a tick
late by at least S minus the interval, so a benchmark that must see stalls of 10 ms sets
``KRAFT_LOOP_WATCHDOG_MS`` (default 100) to 5: the interval, not a setting of the node.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time

log = logging.getLogger("kraft.node")

INTERVAL_S = 0.1
#: Upper bounds of the stall histograms, ms.
STALL_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 250, 500, 1000, 2500)
#: A timer this much later than due is logged (well under the 2 s fetch timeout).
REPORT_S = 0.5
#: A cyclic garbage collection this long is logged (its pause is a stall of every thread).
GC_REPORT_S = 0.2


def interval_from_env(environ=os.environ) -> float:
    """The tick in seconds: ``KRAFT_LOOP_WATCHDOG_MS`` (1-1000) or ``INTERVAL_S``; anything else
    is refused with a warning (the default is used)."""
    raw = environ.get("KRAFT_LOOP_WATCHDOG_MS")
    if raw is None:
        return INTERVAL_S
    try:
        ms = int(raw)
    except ValueError:
        ms = 0
    if not 1 <= ms <= 1000:
        log.warning("KRAFT_LOOP_WATCHDOG_MS=%r ignored: expected an integer from 1 to 1000 (ms)", raw)
        return INTERVAL_S
    return ms / 1000


class RunQueueClock:
    """Nanoseconds the calling thread has spent runnable but not running (the second field of
    ``/proc/thread-self/schedstat``), read through a descriptor opened by that thread; 0 when
    the kernel does not keep it (no schedstats), so own stall then equals lateness."""

    def __init__(self):
        try:
            self._fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self._fd = -1

    def waited_ns(self) -> int:
        if self._fd < 0:
            return 0
        try:
            return int(os.pread(self._fd, 128, 0).split()[1])
        except (OSError, IndexError, ValueError):
            return 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class LoopWatchdog:
    def __init__(self, node_id: int, metrics=None, interval_s: float | None = None):
        from kraft.server.metrics import Gauge, Histogram
        self.node_id = node_id
        self.interval_s = interval_from_env() if interval_s is None else interval_s
        self.worst_ms = 0.0
        self.lag = Histogram("kraft_event_loop_lag_ms", "Lateness of the event loop's watchdog tick (ms)",
                             STALL_BUCKETS_MS)
        self.own_stall = Histogram("kraft_event_loop_own_stall_ms",
                                   "Lateness of the watchdog tick less the loop thread's wait for a CPU (ms)",
                                   STALL_BUCKETS_MS)
        self._handle = None
        self._due = 0.0
        self._clock = None
        self._waited = 0
        if metrics is not None:
            gauge = Gauge("kraft_event_loop_stall_max_ms", "Longest time the event loop did not turn (ms)")
            metrics.event_loop_stall_max = gauge
            metrics.event_loop_lag = self.lag
            metrics.event_loop_own_stall = self.own_stall
            metrics.on_render(lambda: gauge.set(self.worst_ms))

    def start(self) -> None:
        """On the loop's thread (the run-queue clock is that thread's)."""
        self._clock = RunQueueClock()
        self._waited = self._clock.waited_ns()
        self._due = time.monotonic() + self.interval_s
        self._handle = asyncio.get_running_loop().call_later(self.interval_s, self._fire)
        self._gc_started = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.monotonic()
        elif self._gc_started:
            took = time.monotonic() - self._gc_started
            if took > GC_REPORT_S:
                log.warning("node %d: a generation-%d garbage collection took %.0f ms (%d objects collected)",
                            self.node_id, info.get("generation", -1), took * 1000, info.get("collected", 0))

    def _fire(self) -> None:
        now = time.monotonic()
        late = max(0.0, now - self._due)
        if late > REPORT_S:
            log.warning("node %d: the event loop did not turn for %.0f ms", self.node_id, late * 1000)
        self.worst_ms = max(self.worst_ms, late * 1000)
        waited = self._clock.waited_ns()
        # The wait counted since the last tick may fall before this tick was due too: the own
        # stall is then understated by at most that part, never overstated.
        own = max(0.0, late - (waited - self._waited) / 1e9)
        self._waited = waited
        self.lag.observe(late * 1000)
        self.own_stall.observe(own * 1000)
        self._due = now + self.interval_s
        self._handle = asyncio.get_running_loop().call_later(self.interval_s, self._fire)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._clock is not None:
            self._clock.close()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
