"""SharedLoopFlusher: what many logs on one flusher need beyond the single-log tests of
test_loop_flusher.py (which run against it too): every log's appends become durable and are
reported on the loop, no more fdatasyncs run at once than it has syncers, a closing log gets
no more cycles (and leaves nothing scheduled behind), a log closed from another thread while
its cycle runs closes, and ``stop`` ends the syncers."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from _log_helpers import NO_EXTENSIONS, batch_for

from kraft.log import LogConfig, SegmentedLog, hotloops
from kraft.log import _pure_syncer
from kraft.server.shared_loop_flusher import SharedLoopFlusher

KINDS = ["python"] if NO_EXTENSIONS else ["native", "python"]


async def until(cond, timeout=10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.001)


def open_logs(tmp_path, flusher, n, reports):
    logs = []
    for i in range(n):
        def on_flushed(offset, i=i):
            reports.append((i, offset, threading.get_ident()))
        logs.append(SegmentedLog.open(str(tmp_path / f"log-{i}"), LogConfig(append_linger_ms=5.0),
                                      on_flushed=on_flushed, flusher=flusher))
    return logs


@pytest.mark.parametrize("kind", KINDS)
def test_many_logs_all_become_durable_and_are_reported_on_the_loop(tmp_path, kind):
    reports: list = []

    async def main():
        loop_thread = threading.get_ident()
        flusher = SharedLoopFlusher(asyncio.get_running_loop(), 2, hotloops.syncer_class(kind))
        logs = open_logs(tmp_path, flusher, 40, reports)
        try:
            for log in logs:
                log.append(batch_for(0, 1), leader_epoch=1)  # each log's first cycle: its epoch checkpoint
            await until(lambda: all(log.flushed_offset == 1 for log in logs))
            for rnd in range(5):
                for log in logs:
                    log.append(batch_for(log.end_offset, 3), leader_epoch=1)
                    if rnd % 2:
                        log.request_flush()  # some asked for at once, some after the linger
                await asyncio.sleep(0)
            await until(lambda: all(log.flushed_offset == log.end_offset == 16 for log in logs))
            later = [r for r in reports if r[1] > 1]
            assert later and {t for _, _, t in later} == {loop_thread}
            for i in range(40):
                mine = [o for j, o, _ in reports if j == i]
                assert mine == sorted(mine) and mine[-1] == 16
        finally:
            for log in logs:
                log.close()
            flusher.stop()

    asyncio.run(main())
    for i in range(40):
        reopened = SegmentedLog.open(str(tmp_path / f"log-{i}"), LogConfig())
        assert reopened.end_offset == 16
        reopened.close()


def test_no_more_fdatasyncs_at_once_than_syncers(tmp_path, monkeypatch):
    running, most = [0], [0]
    lock = threading.Lock()
    real = os.fdatasync

    def counted(fd):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            threading.Event().wait(0.005)  # long enough for the others to pile up
            real(fd)
        finally:
            with lock:
                running[0] -= 1

    async def main():
        flusher = SharedLoopFlusher(asyncio.get_running_loop(), 2, _pure_syncer.Syncer)
        logs = open_logs(tmp_path, flusher, 12, [])
        try:
            for log in logs:
                log.append(batch_for(0, 1), leader_epoch=1)
            await until(lambda: all(log.flushed_offset == 1 for log in logs))
            monkeypatch.setattr(_pure_syncer, "fdatasync", counted)
            for log in logs:
                log.append(batch_for(1, 2), leader_epoch=1)
                log.request_flush()
            await until(lambda: all(log.flushed_offset == 3 for log in logs))
        finally:
            for log in logs:
                log.close()
            flusher.stop()

    asyncio.run(main())
    assert most[0] == 2, f"{most[0]} fdatasyncs ran at once on a flusher of 2 syncers"


@pytest.mark.parametrize("kind", KINDS)
def test_a_closed_log_gets_no_more_cycles_and_leaves_nothing_scheduled(tmp_path, kind):
    async def main():
        loop = asyncio.get_running_loop()
        flusher = SharedLoopFlusher(loop, 1, hotloops.syncer_class(kind))
        a, b = open_logs(tmp_path, flusher, 2, [])
        try:
            a.append(batch_for(0, 1), leader_epoch=1)
            b.append(batch_for(0, 1), leader_epoch=1)
            await until(lambda: a.flushed_offset == b.flushed_offset == 1)
            a.append(batch_for(1, 2), leader_epoch=1)  # dirty, lingering
            b.append(batch_for(1, 2), leader_epoch=1)
            b.request_flush()  # b's cycle runs on the only syncer while a closes
            a.close()
            assert a.flushed_offset == 3  # close flushed it
            await until(lambda: b.flushed_offset == 3)
            await asyncio.sleep(0.02)
            assert not flusher._running and not flusher._due
            assert [h for h in loop._scheduled if not h.cancelled() and "SharedLoopFlusher" in repr(h)] == []
        finally:
            b.close()
            flusher.stop()

    asyncio.run(main())


@pytest.mark.parametrize("kind", KINDS)
def test_closing_from_another_thread_while_its_cycle_runs(tmp_path, kind):
    async def main():
        loop = asyncio.get_running_loop()
        flusher = SharedLoopFlusher(loop, 2, hotloops.syncer_class(kind))
        logs = open_logs(tmp_path, flusher, 6, [])
        try:
            for log in logs:
                for _ in range(5):
                    log.append(batch_for(log.end_offset, 2), leader_epoch=1)
                log.request_flush()
            await asyncio.wait_for(asyncio.gather(*(loop.run_in_executor(None, log.close) for log in logs)), 20)
            assert all(log.closed and log.flushed_offset == 10 for log in logs)
        finally:
            flusher.stop()

    asyncio.run(main())


def test_stop_ends_the_native_syncer_threads_and_takes_no_more_work(tmp_path):
    if NO_EXTENSIONS:
        pytest.skip("the native Syncer is not built in a KRAFT_NO_EXTENSIONS run")

    async def main():
        flusher = SharedLoopFlusher(asyncio.get_running_loop(), 2, hotloops.syncer_class("native"))
        (log,) = open_logs(tmp_path, flusher, 1, [])
        log.append(batch_for(0, 1), leader_epoch=1)
        await until(lambda: log.flushed_offset == 1)
        log.close()
        flusher.stop()
        flusher.schedule(object(), 0.0)  # after stop: ignored, nothing raised
        assert flusher._closed and not flusher._running

    asyncio.run(main())


def test_epoch_checkpoint_cycles_of_many_logs_use_at_most_as_many_threads_as_syncers(tmp_path, monkeypatch):
    """A leader election moves the epoch of every partition it hands over: each log's next
    cycle writes its epoch checkpoint off the loop. Thousands of threads at once would be the
    cost of a thread each; they take turns instead, and every log still becomes durable."""
    running, most = [0], [0]
    lock = threading.Lock()
    real = SharedLoopFlusher._sync_slow

    def counted(group, cycle):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            threading.Event().wait(0.003)
            real(group, cycle)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(SharedLoopFlusher, "_sync_slow", staticmethod(counted))

    async def main():
        flusher = SharedLoopFlusher(asyncio.get_running_loop(), 2, hotloops.syncer_class(KINDS[0]))
        logs = open_logs(tmp_path, flusher, 30, [])
        try:
            for log in logs:
                log.append(batch_for(0, 2), leader_epoch=7)
                log.request_flush()
            await until(lambda: all(log.flushed_offset == 2 for log in logs))
            logs[0].append(batch_for(2, 1), leader_epoch=8)  # one more, then closed while it may wait
            logs[0].request_flush()
        finally:
            for log in logs:
                log.close()
            flusher.stop()

    asyncio.run(main())
    assert most[0] == 2
    for i in range(30):
        reopened = SegmentedLog.open(str(tmp_path / f"log-{i}"), LogConfig())
        assert reopened.end_offset == (3 if i == 0 else 2) and reopened.latest_epoch == (8 if i == 0 else 7)
        reopened.close()
