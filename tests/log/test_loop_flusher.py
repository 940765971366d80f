"""SharedLoopFlusher serving one log (as the metadata log's, with one syncer, and as a partition
log's, with two): its flush cycles on an asyncio loop, fdatasync on a Syncer thread (native and
pure twin); what many logs on one flusher need is in test_shared_loop_flusher.py. What must hold: nothing appended is reported flushed before an fdatasync
that covers it returned; appends made during a cycle are covered by the next one; reports
arrive on the loop; an fsync error makes the log fatal; a synchronous flush or a close on
the loop thread never deadlocks; closing from another thread works while the loop runs."""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pytest
from _log_helpers import NO_EXTENSIONS, all_records, batch_for

from kraft.errors import FatalLogError
from kraft.log import LeaderEpochCheckpointFile, LogConfig, SegmentedLog, hotloops
from kraft.log import _pure_syncer
from kraft.server.shared_loop_flusher import SharedLoopFlusher

KINDS = ["python"] if NO_EXTENSIONS else ["native", "python"]
FLUSHERS = {"one-syncer": lambda loop, syncer: SharedLoopFlusher(loop, 1, syncer),
            "two-syncers": lambda loop, syncer: SharedLoopFlusher(loop, 2, syncer)}


@pytest.fixture(params=sorted(FLUSHERS))
def make_flusher(request):
    """A flusher on a loop; the shared one's syncers stop when the test ends."""
    made = []

    def make(loop, syncer):
        f = FLUSHERS[request.param](loop, syncer)
        made.append(f)
        return f
    yield make
    for f in made:
        stop = getattr(f, "stop", None)
        if stop is not None:
            stop()


class Recorder:
    """on_flushed / on_fatal, with the thread each came from."""

    def __init__(self):
        self.flushed: list[tuple[int, int]] = []
        self.fatal: list[BaseException] = []

    def on_flushed(self, offset):
        self.flushed.append((offset, threading.get_ident()))

    def on_fatal(self, exc):
        self.fatal.append(exc)


def open_log(tmp_path, flusher, rec, **config):
    return SegmentedLog.open(str(tmp_path / "log"), LogConfig(**config), on_flushed=rec.on_flushed,
                             on_fatal=rec.on_fatal, flusher=flusher)


def run(tmp_path, syncer, body, make=FLUSHERS["one-syncer"], **config):
    """Open a log with a flusher made by ``make(loop, syncer)`` on a fresh loop, run ``await
    body(log, rec)``, close the log; returns the Recorder."""
    rec = Recorder()

    async def main():
        flusher = make(asyncio.get_running_loop(), syncer)
        log = open_log(tmp_path, flusher, rec, **config)
        try:
            await body(log, rec)
        finally:
            try:
                log.close()
            except FatalLogError:
                pass  # a failed log may fail to close too
            stop = getattr(flusher, "stop", None)
            if stop is not None:
                stop()

    asyncio.run(main())
    return rec


async def until(cond, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.001)


@pytest.mark.parametrize("kind", KINDS)
def test_appends_become_flushed_and_are_reported_on_the_loop(tmp_path, kind, make_flusher):
    rec = Recorder()

    async def main():
        loop_thread = threading.get_ident()
        flusher = make_flusher(asyncio.get_running_loop(), hotloops.syncer_class(kind))
        log = open_log(tmp_path, flusher, rec)
        try:
            for i in range(50):
                log.append(batch_for(log.end_offset, 3), leader_epoch=1)
                if i % 7 == 0:
                    await asyncio.sleep(0)
            await until(lambda: log.flushed_offset == log.end_offset == 150)
            offsets = [o for o, _ in rec.flushed]
            assert offsets == sorted(offsets) and offsets[-1] == 150
            # Only the first cycle (it writes the new epoch's checkpoint) ends on a thread.
            assert {t for _, t in rec.flushed[1:]} == {loop_thread}
            # Group commit: fewer cycles than appends (appends during a cycle share the next).
            assert len(offsets) < 50
        finally:
            log.close()
        assert not rec.fatal

    asyncio.run(main())
    reopened = SegmentedLog.open(str(tmp_path / "log"), LogConfig())
    assert reopened.end_offset == 150 and len(all_records(reopened)) == 150
    reopened.close()


@pytest.mark.parametrize("kind", KINDS)
def test_a_report_never_precedes_the_fdatasync_that_covers_it(tmp_path, kind, monkeypatch, make_flusher):
    """The pure syncer's fdatasync is held; the native one cannot be, so for it the check is
    that reports never run ahead of what the log counts as flushed."""
    rec = Recorder()
    gate = threading.Event()
    synced: list[int] = []
    armed = threading.Event()
    if kind == "python":
        real = os.fdatasync

        def held(fd):
            if armed.is_set():
                gate.wait(10)
            real(fd)
            synced.append(fd)

        monkeypatch.setattr(_pure_syncer, "fdatasync", held)

    async def main():
        flusher = make_flusher(asyncio.get_running_loop(), hotloops.syncer_class(kind))
        log = open_log(tmp_path, flusher, rec)
        try:
            log.append(batch_for(0, 1), leader_epoch=1)  # the epoch's checkpoint cycle first
            await until(lambda: log.flushed_offset == 1)
            rec.flushed.clear()
            synced.clear()
            armed.set()
            log.append(batch_for(1, 5), leader_epoch=1)
            await asyncio.sleep(0.05)
            if kind == "python":
                assert log.flushed_offset == 1 and rec.flushed == []  # the fsync is still held
            log.append(batch_for(6, 4), leader_epoch=1)  # during the cycle: the next one's
            gate.set()
            await until(lambda: log.flushed_offset == 10)
            assert [o for o, _ in rec.flushed][-1] == 10
            if kind == "python":
                assert [o for o, _ in rec.flushed] == [6, 10] and len(synced) == 2
        finally:
            gate.set()
            log.close()

    asyncio.run(main())


@pytest.mark.parametrize("kind", KINDS)
def test_a_sync_flush_on_the_loop_while_a_cycle_runs_does_not_deadlock(tmp_path, kind, make_flusher):
    async def body(log, rec):
        for _ in range(20):
            log.append(batch_for(log.end_offset, 2), leader_epoch=1)  # starts a cycle
            assert log.flush() == log.end_offset  # settles it, then flushes inline
            assert log.wait_for_flush(timeout=5)
        assert log.flushed_offset == 40

    assert not run(tmp_path, hotloops.syncer_class(kind), body, make_flusher).fatal


@pytest.mark.parametrize("kind", KINDS)
def test_wait_for_flush_on_the_loop_while_a_cycle_runs_does_not_deadlock(tmp_path, kind, make_flusher):
    async def body(log, rec):
        for _ in range(20):
            log.append(batch_for(log.end_offset, 2), leader_epoch=1)  # starts a cycle
            assert log.wait_for_flush(timeout=5)  # waiting would block the loop that ends it
            assert log.flushed_offset == log.end_offset

    assert not run(tmp_path, hotloops.syncer_class(kind), body, make_flusher).fatal


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_epoch_is_checkpointed_off_the_loop_before_it_is_reported(tmp_path, kind, make_flusher):
    async def body(log, rec):
        checkpoint = LeaderEpochCheckpointFile(os.path.join(log.directory, "leader-epoch-checkpoint"))
        log.append(batch_for(0, 4), leader_epoch=3)
        await until(lambda: log.flushed_offset == 4)
        assert checkpoint.read() == [(3, 0)]
        log.append(batch_for(4, 4), leader_epoch=5)
        await until(lambda: log.flushed_offset == 8)
        assert checkpoint.read() == [(3, 0), (5, 4)]

    run(tmp_path, hotloops.syncer_class(kind), body, make_flusher)


def test_an_fsync_error_makes_the_log_fatal(tmp_path, monkeypatch, make_flusher):
    def failing(fd):
        raise OSError(errno.EIO, "Input/output error")

    async def body(log, rec):
        log.append(batch_for(0, 2), leader_epoch=1)  # the epoch's checkpoint cycle, on a thread
        await until(lambda: log.flushed_offset == 2)
        rec.flushed.clear()
        monkeypatch.setattr(_pure_syncer, "fdatasync", failing)
        log.append(batch_for(2, 2), leader_epoch=1)
        await until(lambda: rec.fatal)
        assert "Input/output error" in str(rec.fatal[0]) and log.flushed_offset == 2
        with pytest.raises(FatalLogError):
            log.append(batch_for(4, 2), leader_epoch=1)
        assert rec.flushed == []

    run(tmp_path, _pure_syncer.Syncer, body, make_flusher)


@pytest.mark.parametrize("kind", KINDS)
def test_close_from_another_thread_while_the_loop_runs(tmp_path, kind, make_flusher):
    async def body(log, rec):
        for _ in range(10):
            log.append(batch_for(log.end_offset, 2), leader_epoch=1)
        await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, log.close), 10)
        assert log.closed and log.flushed_offset == 20

    run(tmp_path, hotloops.syncer_class(kind), body, make_flusher)


def test_the_native_syncer_runs_no_python_thread(tmp_path, make_flusher):
    if NO_EXTENSIONS:
        pytest.skip("the native Syncer is not built in a KRAFT_NO_EXTENSIONS run")

    async def body(log, rec):
        before = threading.active_count()
        log.append(batch_for(0, 2), leader_epoch=1)  # a new epoch: checkpointed on a thread
        await until(lambda: log.flushed_offset == 2 and threading.active_count() == before)
        for _ in range(20):
            log.append(batch_for(log.end_offset, 2), leader_epoch=1)
            await asyncio.sleep(0)
            assert threading.active_count() == before  # no flusher thread taking the GIL
        await until(lambda: log.flushed_offset == 42)

    run(tmp_path, hotloops.syncer_class("native"), body, make_flusher)


@pytest.mark.parametrize("kind", KINDS)
def test_a_requested_flush_leaves_no_linger_timer_behind(tmp_path, kind, make_flusher):
    """An append arms the linger timer; the flush requested right after starts the cycle at
    once, and the timer goes with it (it used to stay armed and wake the loop for nothing
    after every append)."""
    async def body(log, rec):
        loop = asyncio.get_running_loop()

        def armed():
            return [h for h in loop._scheduled if not h.cancelled()
                    and "SharedLoopFlusher._on_timer" in repr(h)]

        for i in range(5):
            # The append arms the 10 s linger, unless a cycle is still ending (the first one
            # writes the epoch checkpoint on a thread and hands its end back to the loop).
            log.append(batch_for(i, 1), leader_epoch=1)
            log.request_flush()
            assert armed() == []
            await until(lambda: log.flushed_offset == log.end_offset)
        assert [o for o, _ in rec.flushed] == [1, 2, 3, 4, 5]

    run(tmp_path, hotloops.syncer_class(kind), body, make_flusher, append_linger_ms=10_000)
