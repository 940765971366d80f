"""A send attached to a flush (Syncer.attach, LoopFlusher.attach_send,
SegmentedLog.send_after_flush): a Raft follower's next Fetch written by the fsync thread.
What must hold: the frame leaves only after an fdatasync that succeeded and covers what it
acknowledges; never after a failed one; a truncation before it left withdraws it; it is
refused when no fdatasync runs (the caller then sends the usual way); its callback runs
before the flush is reported. Native and pure twins alike."""

from __future__ import annotations

import asyncio
import os
import socket
import threading

import pytest
from _log_helpers import NO_EXTENSIONS, batch_for
from test_loop_flusher import Recorder, open_log, until

from kraft.log import _pure_syncer, hotloops
from kraft.server.loop_flusher import LoopFlusher

KINDS = ["python"] if NO_EXTENSIONS else ["native", "python"]
FRAME = b"\x00\x00\x00\x05hello"


def pending(peer: socket.socket) -> bytes:
    peer.setblocking(False)
    try:
        return peer.recv(1 << 16)
    except BlockingIOError:
        return b""


@pytest.fixture
def slow_job(tmp_path, monkeypatch):
    """``start(syncer)`` submits a job whose fdatasync is still running when it returns,
    and ``finish()`` lets it end: the pure twin's is held; the native one's syncs 64 MiB of
    fresh page cache (hundreds of ms here, far longer than the attach that follows)."""
    gate = threading.Event()
    real = os.fdatasync

    def held(fd):
        gate.wait(10)
        real(fd)

    monkeypatch.setattr(_pure_syncer, "fdatasync", held)

    class Job:
        def start(self, syncer):
            fd = os.open(tmp_path / "big.bin", os.O_RDWR | os.O_CREAT, 0o644)
            os.write(fd, os.urandom(1 << 20) * 64)
            syncer.submit(fd)

        def finish(self):
            gate.set()
    yield Job()
    gate.set()


@pytest.mark.parametrize("kind", KINDS)
def test_an_attached_frame_leaves_once_the_fdatasync_returned(kind, slow_job):
    syncer = hotloops.syncer_class(kind)()
    mine, peer = socket.socketpair()
    try:
        slow_job.start(syncer)
        assert syncer.attach(os.dup(mine.fileno()), FRAME)
        if kind == "python":  # the fdatasync is held: nothing has left
            assert pending(peer) == b""
        dup = os.dup(mine.fileno())
        assert not syncer.attach(dup, b"x")  # one send per job
        os.close(dup)
        slow_job.finish()
        err, _, sent = syncer.wait()
        assert (err, sent) == (0, len(FRAME))
        assert pending(peer) == FRAME
    finally:
        syncer.close()
        mine.close()
        peer.close()


@pytest.mark.parametrize("kind", KINDS)
def test_attach_is_refused_without_a_running_fdatasync(kind, tmp_path):
    syncer = hotloops.syncer_class(kind)()
    mine, peer = socket.socketpair()
    dup = os.dup(mine.fileno())
    try:
        assert not syncer.attach(dup, FRAME)  # no job
        fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
        syncer.submit(fd)
        assert syncer.wait()[2] == -1  # a job without a send
        assert not syncer.attach(dup, FRAME)  # its fdatasync returned
        with pytest.raises(ValueError):
            syncer.attach(dup, b"")
        assert pending(peer) == b""
    finally:
        os.close(dup)
        syncer.close()
        mine.close()
        peer.close()


@pytest.mark.parametrize("kind", KINDS)
def test_detach_withdraws_a_send_the_thread_has_not_taken(kind, slow_job):
    syncer = hotloops.syncer_class(kind)()
    mine, peer = socket.socketpair()
    try:
        slow_job.start(syncer)
        assert syncer.attach(os.dup(mine.fileno()), FRAME)
        assert syncer.detach()
        assert not syncer.detach()
        slow_job.finish()
        assert syncer.wait()[2] == -1
        assert pending(peer) == b""
    finally:
        syncer.close()
        mine.close()
        peer.close()


def test_nothing_is_sent_after_a_failed_fdatasync(monkeypatch, tmp_path):
    """The pure twin (its fdatasync can be made to fail and to wait for the attach; the
    native thread's cannot be both here): the errno is reported and nothing is written."""
    attached = threading.Event()

    def failing(fd):
        attached.wait(10)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_pure_syncer, "fdatasync", failing)
    syncer = _pure_syncer.Syncer()
    mine, peer = socket.socketpair()
    try:
        syncer.submit(os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644))
        assert syncer.attach(os.dup(mine.fileno()), FRAME)
        attached.set()
        err, _, sent = syncer.wait()
        assert (err, sent) == (5, -1)
        assert pending(peer) == b""
    finally:
        syncer.close()
        mine.close()
        peer.close()


def _log_with_held_flush(tmp_path, monkeypatch, body):
    """A SegmentedLog on a LoopFlusher (pure syncer, fdatasync held until ``release()``)."""
    gate = threading.Event()
    armed = threading.Event()
    real = os.fdatasync

    def held(fd):
        if armed.is_set():
            gate.wait(10)
        real(fd)

    monkeypatch.setattr(_pure_syncer, "fdatasync", held)
    rec = Recorder()

    async def main():
        flusher = LoopFlusher(asyncio.get_running_loop(), _pure_syncer.Syncer)
        log = open_log(tmp_path, flusher, rec)
        try:
            log.append(batch_for(0, 1), leader_epoch=1)  # the epoch's checkpoint cycle first
            await until(lambda: log.flushed_offset == 1)
            armed.set()
            await body(log, rec, gate.set)
        finally:
            gate.set()
            log.close()

    asyncio.run(main())


def test_the_send_leaves_after_the_flush_and_is_reported_before_it(tmp_path, monkeypatch):
    mine, peer = socket.socketpair()
    order = []

    async def body(log, rec, release):
        log.append(batch_for(1, 4), leader_epoch=1)
        log.request_flush()
        await asyncio.sleep(0.02)
        # Offset 6 is beyond what the running cycle covers (5): refused.
        assert not log.send_after_flush(6, mine.fileno(), FRAME, order.append)
        assert log.send_after_flush(5, mine.fileno(), FRAME, lambda sent: order.append(("sent", sent, rec.flushed[:])))
        await asyncio.sleep(0.05)
        assert pending(peer) == b"" and order == []
        release()
        await until(lambda: log.flushed_offset == 5)
        assert pending(peer) == FRAME
        # The callback ran before the flush to 5 was reported.
        assert order[0][:2] == ("sent", len(FRAME)) and 5 not in [o for o, _ in order[0][2]]
    try:
        _log_with_held_flush(tmp_path, monkeypatch, body)
    finally:
        mine.close()
        peer.close()


def test_a_truncation_withdraws_a_send_not_yet_written(tmp_path, monkeypatch):
    mine, peer = socket.socketpair()
    outcomes = []

    async def body(log, rec, release):
        log.append(batch_for(1, 2) + batch_for(3, 2), leader_epoch=1)  # one cycle covers both
        log.request_flush()
        await asyncio.sleep(0.02)
        assert log.send_after_flush(5, mine.fileno(), FRAME, outcomes.append)
        assert log.truncate_to(3) == 3  # what the frame would acknowledge is gone
        await until(lambda: outcomes == [-1])
        release()
        await until(lambda: log.flushed_offset == 3)
        await asyncio.sleep(0.05)
        assert pending(peer) == b"" and outcomes == [-1]
    try:
        _log_with_held_flush(tmp_path, monkeypatch, body)
    finally:
        mine.close()
        peer.close()
