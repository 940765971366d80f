"""The event-loop watchdog's stall histograms: a callback that holds the loop shows up as a late
tick in both; time the loop thread spent waiting for a CPU is taken out of the own-stall one;
the tick's interval comes from KRAFT_LOOP_WATCHDOG_MS or is refused."""

from __future__ import annotations

import asyncio
import logging
import time

from kraft.server import loop_watchdog
from kraft.server.loop_watchdog import LoopWatchdog, RunQueueClock, interval_from_env
from kraft.server.metrics import NodeMetrics


def _count_over(hist, ms: float) -> int:
    """Observations in buckets whose lower bound is at least ``ms``."""
    total = 0
    for i, c in enumerate(hist.counts):
        lower = 0 if i == 0 else hist.buckets[i - 1]
        if lower >= ms:
            total += c
    return total


def _run(watchdog: LoopWatchdog, body) -> None:
    async def main():
        watchdog.start()
        try:
            await body()
        finally:
            watchdog.close()
    asyncio.run(main())


def test_a_callback_holding_the_loop_is_a_late_tick_in_both_histograms():
    wd = LoopWatchdog(1, interval_s=0.005)

    async def body():
        await asyncio.sleep(0.03)  # a few ordinary ticks first
        t = time.monotonic()
        while time.monotonic() - t < 0.06:  # the loop held for 60 ms, on the CPU
            pass
        await asyncio.sleep(0.03)
    _run(wd, body)
    assert wd.lag.count >= 3
    assert _count_over(wd.lag, 20) >= 1, wd.lag.counts
    assert _count_over(wd.own_stall, 20) >= 1, wd.own_stall.counts
    assert wd.worst_ms >= 50


def test_time_spent_waiting_for_a_cpu_is_not_the_loops_own_stall():
    class Starved:
        """A run-queue clock that says the thread waited for a CPU all along."""
        def waited_ns(self):
            return int(time.monotonic() * 1e9)

        def close(self):
            pass
    wd = LoopWatchdog(1, interval_s=0.005)

    async def body():
        wd._clock = Starved()
        wd._waited = wd._clock.waited_ns()
        t = time.monotonic()
        while time.monotonic() - t < 0.06:
            pass
        await asyncio.sleep(0.02)
    _run(wd, body)
    assert _count_over(wd.lag, 20) >= 1
    assert _count_over(wd.own_stall, 2) == 0, wd.own_stall.counts


def test_the_run_queue_clock_reads_this_thread():
    clock = RunQueueClock()
    try:
        a = clock.waited_ns()
        b = clock.waited_ns()
        assert isinstance(a, int) and 0 <= a <= b
    finally:
        clock.close()
    assert clock.waited_ns() == 0  # closed: no descriptor, no error


def test_the_interval_comes_from_the_environment_or_is_refused(caplog):
    assert interval_from_env({}) == loop_watchdog.INTERVAL_S
    assert interval_from_env({"KRAFT_LOOP_WATCHDOG_MS": "5"}) == 0.005
    with caplog.at_level(logging.WARNING, logger="kraft.node"):
        for bad in ("0", "1001", "abc", "-3", "2.5"):
            assert interval_from_env({"KRAFT_LOOP_WATCHDOG_MS": bad}) == loop_watchdog.INTERVAL_S
    assert sum("KRAFT_LOOP_WATCHDOG_MS" in r.getMessage() for r in caplog.records) == 5


def test_the_histograms_are_exported():
    metrics = NodeMetrics(3)
    wd = LoopWatchdog(3, metrics, interval_s=0.005)

    async def body():
        await asyncio.sleep(0.03)
    _run(wd, body)
    text = metrics.render()
    assert 'kraft_event_loop_lag_ms_bucket{node_id="3",le="10"}' in text
    assert 'kraft_event_loop_own_stall_ms_count{node_id="3"}' in text
    count = int(text.split('kraft_event_loop_lag_ms_count{node_id="3"} ')[1].split()[0])
    assert count >= 3
