"""Opening partition logs at start-up: after a clean shutdown (Kafka's ``.kafka_cleanshutdown``
in each log dir) nothing is scanned or fsynced and the logs go on exactly as after a full
recovery (same end, same index entries for later appends, same segment age); without the
marker, or when the tail does not hold up, the log is recovered as after a crash. Logs are
opened by several threads at once (``num.recovery.threads.per.data.dir``)."""

from __future__ import annotations

import os
import uuid

import pytest

from kraft.broker import partition_dir as names
from kraft.broker.partition_logs import PartitionLogs
from kraft.log import LogConfig
from kraft.records import build_batch

TID = uuid.UUID(int=0xF00)


def _cfg(**kw):
    return LogConfig(**{"append_linger_ms": 0.0, "index_interval_bytes": 256, **kw})


def _batch(i: int, ts: int) -> bytearray:
    return bytearray(build_batch([b"value-%d-" % i + b"x" * 90, b"second"], timestamp=ts))


def _fill(path: str, partitions: int, batches: int, first: int = 0) -> PartitionLogs:
    logs = PartitionLogs([path], _cfg())
    logs.open_all()
    for p in range(partitions):
        plog = logs.create("t", p, TID)
        for i in range(first, first + batches):
            plog.log.append(_batch(i, 1_000_000 + 10 * i), leader_epoch=3)
    return logs


def _index_files(path: str, partitions: int) -> dict:
    out = {}
    for p in range(partitions):
        d = os.path.join(path, f"t-{p}")
        for name in sorted(os.listdir(d)):
            if name.endswith((".index", ".timeindex", ".log")) or name == "leader-epoch-checkpoint":
                with open(os.path.join(d, name), "rb") as f:
                    out[(p, name)] = f.read()
    return out


def test_a_clean_shutdown_leaves_the_marker_and_the_next_open_scans_nothing(tmp_path):
    path = str(tmp_path)
    _fill(path, 3, 40).close()
    assert os.path.exists(tmp_path / names.CLEAN_SHUTDOWN_FILE)
    logs = PartitionLogs([path], _cfg())
    opened = logs.open_all(threads=2)
    assert len(opened) == 3
    for plog in opened:
        assert plog.log.end_offset == 80
        assert plog.log.recovery.scanned_segments == 0 and plog.log.recovery.scanned_bytes == 0
    assert not os.path.exists(tmp_path / names.CLEAN_SHUTDOWN_FILE), "the marker must not outlive the start"
    logs.close()


def test_without_the_marker_the_tail_is_scanned(tmp_path):
    path = str(tmp_path)
    _fill(path, 2, 10).close()
    os.unlink(tmp_path / names.CLEAN_SHUTDOWN_FILE)  # as after SIGKILL
    logs = PartitionLogs([path], _cfg())
    for plog in logs.open_all():
        assert plog.log.recovery.scanned_segments == 1 and plog.log.end_offset == 20
    logs.close()


@pytest.mark.parametrize("threads", [1, 4])
def test_a_clean_open_goes_on_exactly_as_a_full_recovery_would(tmp_path, threads):
    """Same files after more appends: the index builder resumes where a rebuild from a full
    scan would have left it (entries every index.interval.bytes, time entries only on a new
    maximum), the segment age is the first batch's timestamp."""
    results = {}
    for how in ("clean", "crash"):
        path = str(tmp_path / how)
        _fill(path, 4, 37).close()
        if how == "crash":
            os.unlink(os.path.join(path, names.CLEAN_SHUTDOWN_FILE))
        logs = PartitionLogs([path], _cfg())
        logs.open_all(threads=threads)
        for p in range(4):
            plog = logs.get("t", p)
            seg = plog.log._segments[-1]
            assert seg.rolling_timestamp_ms == 1_000_000
            for i in range(37, 80):
                plog.log.append(_batch(i, 1_000_000 + 10 * i - (5 if i % 3 else 0)), leader_epoch=4)
        logs.close()
        results[how] = _index_files(path, 4)
    assert results["clean"] == results["crash"]


def test_a_bad_tail_after_a_clean_shutdown_is_recovered_as_after_a_crash(tmp_path):
    path = str(tmp_path)
    _fill(path, 1, 30).close()
    seg = tmp_path / "t-0" / "00000000000000000000.log"
    with open(seg, "ab") as f:
        f.write(b"\x00\x01garbage after the last batch")
    logs = PartitionLogs([path], _cfg())
    (plog,) = logs.open_all()
    assert plog.log.end_offset == 60 and plog.log.recovery.scanned_segments == 1
    assert plog.log.recovery.truncated_bytes > 0
    logs.close()


def test_many_logs_open_on_several_threads_with_their_checkpoints(tmp_path):
    path = str(tmp_path)
    logs = _fill(path, 60, 3)
    for p in range(60):
        logs.get("t", p).high_watermark = 4
    logs.close()
    again = PartitionLogs([path], _cfg())
    opened = again.open_all(threads=8)
    assert sorted(p.partition for p in opened) == list(range(60))
    assert all(p.high_watermark == 4 and p.log.end_offset == 6 for p in opened)
    again.close()


def test_closing_logs_that_were_never_all_opened_marks_nothing_and_keeps_checkpoints(tmp_path):
    """A start that failed before every log was opened, then shut down: the logs it never
    opened keep their recovery points and nothing claims a clean shutdown."""
    path = str(tmp_path)
    _fill(path, 3, 5).close()
    os.unlink(tmp_path / names.CLEAN_SHUTDOWN_FILE)  # as after SIGKILL
    before = (tmp_path / names.RECOVERY_POINT_CHECKPOINT).read_text()
    PartitionLogs([path], _cfg()).close()
    assert not os.path.exists(tmp_path / names.CLEAN_SHUTDOWN_FILE)
    assert (tmp_path / names.RECOVERY_POINT_CHECKPOINT).read_text() == before


def test_after_a_crash_the_recovered_tails_are_made_durable_once_per_log_dir(tmp_path, monkeypatch):
    """One syncfs for the log dir instead of an fdatasync per log (10,000 of them, one after
    the other, dominated a start after SIGKILL); with syncfs missing, every tail is synced."""
    from kraft.log import files

    path = str(tmp_path)
    _fill(path, 5, 3).close()
    os.unlink(tmp_path / names.CLEAN_SHUTDOWN_FILE)
    calls, fdatasyncs = [], []
    real = files._SYNCFS
    monkeypatch.setattr(files, "_SYNCFS", lambda fd: calls.append(fd) or real(fd))
    monkeypatch.setattr(files.os, "fdatasync", lambda fd: fdatasyncs.append(fd))
    logs = PartitionLogs([path], _cfg())
    assert len(logs.open_all()) == 5
    assert len(calls) == 1 and fdatasyncs == []
    logs.close()
    os.unlink(tmp_path / names.CLEAN_SHUTDOWN_FILE)
    monkeypatch.setattr(files, "_SYNCFS", None)
    logs = PartitionLogs([path], _cfg())
    fdatasyncs.clear()
    opened = logs.open_all()
    assert {p.log.segments[-1].fd for p in opened} <= set(fdatasyncs)
    logs.close()


def test_a_compacted_log_is_recovered_after_a_crash(tmp_path):
    """A compacted log has offset gaps between batches; the broker recovers its partition logs
    before it knows which topics are compacted, so recovery must not require contiguous
    offsets (Kafka never does for partition logs)."""
    from kraft.log.cleaner import clean_log
    from kraft.log.compact_codec import OffsetMap
    path = str(tmp_path / "logs")
    logs = PartitionLogs([path], _cfg(segment_bytes=2048, strict_order=False))
    logs.open_all()
    plog = logs.create("t", 0, TID)
    for i in range(60):
        plog.log.append(bytearray(build_batch([b"v%d" % i] * 5, keys=[b"k%d" % (i % 3)] * 5, timestamp=1_000)),
                        leader_epoch=3)
    plog.log.roll()
    stats = clean_log(plog.log, 0, plog.log.end_offset, OffsetMap(1 << 16), now_ms=2_000, delete_retention_ms=0,
                      segment_bytes=1 << 20)
    assert stats.records_kept < stats.records_read
    plog.log.flush()
    logs.write_checkpoints()  # no clean-shutdown marker: the next open recovers as after a crash
    for p in logs:
        p.log.close()
    for flusher in logs._flushers.values():  # a crash: no marker, but no threads left behind either
        flusher.stop()
    os.unlink(os.path.join(path, names.RECOVERY_POINT_CHECKPOINT))  # every segment is scanned
    again = PartitionLogs([path], _cfg())
    opened = again.open_all()
    assert [p.log.end_offset for p in opened] == [300]
    again.close()


def test_the_clean_shutdown_files_carry_the_broker_epoch_to_the_next_registration(tmp_path):
    """KIP-966: the broker epoch the broker shut down in is written into every log dir's
    clean-shutdown file (Kafka's ``{"version":0,"brokerEpoch":N}``) and read back at the next
    open as ``previous_broker_epoch``; any dir without it, with another epoch or unreadable
    makes the restart unclean (-1)."""
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    logs = PartitionLogs([a, b], _cfg())
    logs.open_all()
    assert logs.previous_broker_epoch == -1  # a first start
    logs.shutdown_broker_epoch = 47
    logs.close()
    with open(os.path.join(a, names.CLEAN_SHUTDOWN_FILE), "rb") as f:
        assert f.read() == b'{"version":0,"brokerEpoch":47}\n'
    logs = PartitionLogs([a, b], _cfg())
    logs.open_all()
    assert logs.previous_broker_epoch == 47
    logs.close()  # no epoch handed over: the files say -1
    logs = PartitionLogs([a, b], _cfg())
    logs.open_all()
    assert logs.previous_broker_epoch == -1
    logs.shutdown_broker_epoch = 48
    logs.close()
    os.remove(os.path.join(b, names.CLEAN_SHUTDOWN_FILE))  # one dir was not shut down cleanly
    logs = PartitionLogs([a, b], _cfg())
    logs.open_all()
    assert logs.previous_broker_epoch == -1
    logs.shutdown_broker_epoch = 49
    logs.close()
    with open(os.path.join(b, names.CLEAN_SHUTDOWN_FILE), "wb") as f:
        f.write(b'{"version":0,"brokerEpoch":"x"}')  # damaged
    logs = PartitionLogs([a, b], _cfg())
    logs.open_all()
    assert logs.previous_broker_epoch == -1
    logs.close()
