"""Group commit: appends return at once, one fdatasync covers every append made before it
started, the flushed offset is reported back, linger batches flushes, and an fsync or write
error is fatal and never retried. Timing is never asserted, only order and coverage."""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest
from _log_helpers import batch_for

from kraft.errors import FatalLogError
from kraft.log import LogConfig, SegmentedLog, files


class FsyncSpy:
    """Wraps ``os.fdatasync``: counts calls, can block a call or fail them."""

    def __init__(self, monkeypatch):
        self.calls = 0
        self.paths: list[str] = []
        self.gate: threading.Event | None = None
        self.started = threading.Event()
        self.fail_with: OSError | None = None
        real = os.fdatasync

        def fake(fd):
            self.calls += 1
            self.paths.append(os.readlink(f"/proc/self/fd/{fd}"))
            self.started.set()
            if self.gate is not None:
                self.gate.wait(10)
            if self.fail_with is not None:
                raise self.fail_with
            real(fd)

        monkeypatch.setattr(os, "fdatasync", fake)


def open_log(path, **config):
    reports = []
    log = SegmentedLog.open(str(path), LogConfig(**config), on_flushed=reports.append)
    return log, reports


def append_n(log, n, count=3):
    for _ in range(n):
        log.append(batch_for(log.end_offset, count), leader_epoch=1)


def test_flushed_offsets_are_reported_in_order_up_to_the_end(tmp_path):
    log, reports = open_log(tmp_path)
    try:
        for _ in range(300):
            append_n(log, 1)
        assert log.wait_for_flush(timeout=30)
        assert reports == sorted(set(reports)) and reports[-1] == log.end_offset == log.flushed_offset
    finally:
        log.close()


def test_a_flush_covers_exactly_the_appends_made_before_it_started(tmp_path, monkeypatch):
    log, reports = open_log(tmp_path)
    spy = FsyncSpy(monkeypatch)
    try:
        spy.gate = threading.Event()
        append_n(log, 1)  # offsets 0..2; the flusher starts and blocks inside fdatasync
        assert spy.started.wait(10)
        before = log.end_offset
        append_n(log, 3)  # made while that fdatasync runs
        assert log.flushed_offset == 0
        spy.gate.set()
        assert log.wait_for_flush(timeout=30)
        assert reports[0] == before  # the blocked flush did not claim the later appends
        assert reports[-1] == log.end_offset
    finally:
        spy.gate.set()
        log.close()


def test_linger_holds_the_flush_until_requested_and_groups_appends(tmp_path, monkeypatch):
    log, reports = open_log(tmp_path, append_linger_ms=3_600_000)
    spy = FsyncSpy(monkeypatch)
    try:
        append_n(log, 20)
        time.sleep(0.2)  # far inside the one-hour linger: nothing may be flushed yet
        assert spy.calls == 0 and log.flushed_offset == 0 and reports == []
        log.request_flush()
        assert log.wait_for_flush(timeout=30)
        segment_syncs = [p for p in spy.paths if p.endswith(".log")]
        assert segment_syncs == [str(tmp_path / "00000000000000000000.log")] and reports == [60]
    finally:
        log.close()


def test_wait_for_flush_of_a_given_offset(tmp_path):
    log, _ = open_log(tmp_path, append_linger_ms=3_600_000)
    try:
        append_n(log, 2)
        assert log.wait_for_flush(3, timeout=30) and log.flushed_offset >= 3
        assert not log.wait_for_flush(log.end_offset + 100, timeout=0.05)
    finally:
        log.close()


def test_without_flusher_thread_request_flush_is_inline(tmp_path):
    log, reports = open_log(tmp_path, background_flush=False)
    try:
        append_n(log, 2)
        assert log.flushed_offset == 0
        log.request_flush()
        assert log.flushed_offset == 6 and reports == [6]
        assert log.wait_for_flush()
    finally:
        log.close()


def test_fsync_error_is_fatal_and_never_retried(tmp_path, monkeypatch):
    fatal = []
    log = SegmentedLog.open(str(tmp_path), LogConfig(), on_fatal=fatal.append)
    spy = FsyncSpy(monkeypatch)
    spy.fail_with = OSError(errno.EIO, "Input/output error")
    append_n(log, 2)
    with pytest.raises(FatalLogError, match="fdatasync"):
        log.wait_for_flush(timeout=30)
    calls = spy.calls
    assert len(fatal) == 1 and isinstance(fatal[0], FatalLogError) and "never retried" in str(fatal[0])
    assert log.flushed_offset == 0
    for op in (lambda: append_n(log, 1), log.flush, lambda: log.read(0, 100), log.roll,
               lambda: log.truncate_to(0)):
        with pytest.raises(FatalLogError):
            op()
    log.request_flush()
    time.sleep(0.05)
    assert spy.calls == calls  # no retry, not even when asked
    log.close()


def test_write_error_is_fatal(tmp_path, monkeypatch):
    log, _ = open_log(tmp_path)
    append_n(log, 1)
    real = os.pwrite

    def full_disk(fd, data, pos):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full_disk)
    with pytest.raises(FatalLogError, match="No space"):
        append_n(log, 1)
    monkeypatch.setattr(os, "pwrite", real)
    with pytest.raises(FatalLogError):
        append_n(log, 1)
    log.close()


def test_truncation_lowers_the_flushed_offset_until_the_next_flush(tmp_path):
    log, reports = open_log(tmp_path, append_linger_ms=3_600_000)
    try:
        append_n(log, 4)
        assert log.wait_for_flush(timeout=30) and log.flushed_offset == 12
        log.truncate_to(6)
        assert log.flushed_offset == 6
        append_n(log, 1)
        assert log.wait_for_flush(timeout=30) and log.flushed_offset == 9
    finally:
        log.close()


def test_directory_is_fsynced_after_creating_renaming_and_deleting(tmp_path, monkeypatch):
    events = []
    real_sync_dir, real_replace = files.fsync_dir, os.replace
    monkeypatch.setattr(files, "fsync_dir", lambda p: (events.append("dir"), real_sync_dir(p)))
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("rename"), real_replace(a, b)))
    log, _ = open_log(tmp_path, segment_bytes=300, background_flush=False)
    assert "dir" in events  # the first segment
    events.clear()
    append_n(log, 1)  # a new epoch: the checkpoint goes with the flush
    log.flush()  # epoch checkpoint: temp → fsync → rename → dir
    assert events == ["rename", "dir"]
    events.clear()
    append_n(log, 4)  # rolls: old segment synced, new file created, directory synced
    assert len(log.segments) > 1 and events == ["dir"] * (len(log.segments) - 1)
    events.clear()
    log.delete_below(log.segments[1].base_offset)
    assert events == ["dir"]
    log.close()


def test_close_flushes_everything(tmp_path):
    log, reports = open_log(tmp_path, append_linger_ms=3_600_000)
    append_n(log, 5)
    log.close()
    assert reports[-1] == 15
    with pytest.raises(Exception):
        append_n(log, 1)


def test_flush_stats_account_for_every_appended_byte(tmp_path):
    stats = []
    log = SegmentedLog.open(str(tmp_path), LogConfig(), on_flush_stats=stats.append)
    try:
        total = 0
        for _ in range(50):
            total += log.append(batch_for(log.end_offset, 3), leader_epoch=1).size_bytes
        assert log.wait_for_flush(timeout=30)
    finally:
        log.close()
    assert sum(s.bytes for s in stats) == total and sum(s.batches for s in stats) == 50
    assert stats[-1].flushed_offset == 150 and all(s.fsync_seconds >= 0 for s in stats)
