"""LoopWatchdog: notices when this node's event loop stopped turning for a while (a long
callback, a GC pause, a starved CPU), logs it and keeps the worst figure as a gauge.

Why: a loop that does not turn answers no Fetch and sends no Fetch; past the fetch timeout a
follower campaigns and a leader resigns (check-quorum). A line naming the stall, next to the
election it caused, says which it was. No work of its own beyond one timer every
``INTERVAL_S``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

log = logging.getLogger("kraft.node")

INTERVAL_S = 0.1
#: A timer this much later than due is logged (well under the 2 s fetch timeout).
REPORT_S = 0.5
#: A cyclic garbage collection this long is logged (its pause is a stall of every thread).
GC_REPORT_S = 0.2


class LoopWatchdog:
    def __init__(self, node_id: int, metrics=None):
        self.node_id = node_id
        self.worst_ms = 0.0
        self._handle = None
        self._due = 0.0
        if metrics is not None:
            from kraft.server.metrics import Gauge
            gauge = Gauge("kraft_event_loop_stall_max_ms", "Longest time the event loop did not turn (ms)")
            metrics.event_loop_stall_max = gauge
            metrics.on_render(lambda: gauge.set(self.worst_ms))

    def start(self) -> None:
        self._due = time.monotonic() + INTERVAL_S
        self._handle = asyncio.get_running_loop().call_later(INTERVAL_S, self._fire)
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
        late = now - self._due
        if late > REPORT_S:
            log.warning("node %d: the event loop did not turn for %.0f ms", self.node_id, late * 1000)
        self.worst_ms = max(self.worst_ms, late * 1000)
        self._due = now + INTERVAL_S
        self._handle = asyncio.get_running_loop().call_later(INTERVAL_S, self._fire)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
