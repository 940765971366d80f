"""MetadataLog on disk: what survives a clean close and what survives a crash.

A crash is simulated by copying the log directory while the log is open (never by opening
a second MetadataLog on a live directory): the copy holds exactly what the files held at
that moment. The port (kraft/raft/log_port.py) promises that flushed appends, truncations,
prefix deletions and frozen snapshots are durable when they return, and that a snapshot
ending past the log is installed at open."""

from __future__ import annotations

import os
import shutil

import pytest

from kraft.types import OffsetAndEpoch
from kraft.log.replicated_log import METADATA_DIR, MetadataLog

from log_port_helpers import batch, close_log, lead, oe, open_log, summary, write_snapshot


@pytest.fixture
def disk(tmp_path):
    opened = []

    def open_(name="live", **config):
        lg = open_log("disk", tmp_path / name, **config)
        opened.append(lg)
        return lg
    yield open_
    for lg in opened:
        close_log(lg)


def crash_copy(tmp_path, name="live", copy="crashed") -> str:
    """The directory as a crash would leave it now (the page cache included, which is the
    best case for the copy; only durability ordering is tested this way)."""
    src, dst = tmp_path / name, tmp_path / copy
    shutil.copytree(src, dst)
    return copy


def _history(log):
    """Epochs 1, 2, 4 over several segments, a snapshot, and a prefix delete."""
    for epoch in (1, 2, 4):
        lead(log, epoch, n=4, batches=3)
    log.update_high_watermark(log.end_offset())
    write_snapshot(log, 12, 1)
    write_snapshot(log, 16, 2)
    assert log.delete_before_snapshot(OffsetAndEpoch(12, 1))


@pytest.mark.parametrize("segment_bytes", [256, 1 << 20])
def test_reopen_after_close_keeps_everything(disk, tmp_path, segment_bytes):
    log = disk(segment_bytes=segment_bytes)
    _history(log)
    before = summary(log)
    log.close()
    again = disk(segment_bytes=segment_bytes)
    assert summary(again) == before
    assert again.flushed_offset() == again.end_offset()  # full recovery scan at open
    assert again.append_as_leader(batch(2, 5), 5) == (36, 37)


def test_files_are_kafkas(disk, tmp_path):
    log = disk()
    lead(log, 1, n=2)
    lead(log, 3, n=2)
    log.update_high_watermark(4)
    write_snapshot(log, 2, 1)
    log.close()
    names = set(os.listdir(tmp_path / "live" / METADATA_DIR))
    assert {"00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
            "leader-epoch-checkpoint", "00000000000000000002-0000000001.checkpoint"} <= names
    with open(tmp_path / "live" / METADATA_DIR / "leader-epoch-checkpoint") as f:
        assert f.read().split("\n")[:4] == ["0", "2", "1 0", "3 2"]


def test_flushed_appends_survive_a_crash(disk, tmp_path):
    log = disk(segment_bytes=256)
    for epoch in (1, 2):
        lead(log, epoch, n=3, batches=4)
    log.flush(log.end_offset())
    before = summary(log)
    crashed = disk(crash_copy(tmp_path), segment_bytes=256)
    assert summary(crashed) == before


def test_truncation_is_durable_without_a_flush(disk, tmp_path):
    log = disk(segment_bytes=256)
    for epoch in (1, 2, 3):
        lead(log, epoch, n=3, batches=3)
    log.flush(log.end_offset())
    log.truncate_to(12)  # epochs: 1 at 0-8, 2 at 9-17, 3 at 18-26; epoch 3's entry is now stale on disk
    before = summary(log)
    crashed = disk(crash_copy(tmp_path), segment_bytes=256)
    assert summary(crashed) == before
    assert crashed.last_fetched_epoch() == 2
    assert oe(crashed.end_offset_for_epoch(3)) == (12, 2)


def test_prefix_delete_is_durable_without_a_flush(disk, tmp_path):
    log = disk(segment_bytes=256)
    lead(log, 1, n=3, batches=6)
    log.flush(log.end_offset())
    log.update_high_watermark(18)
    write_snapshot(log, 9, 1)
    assert log.delete_before_snapshot(OffsetAndEpoch(9, 1))
    crashed = disk(crash_copy(tmp_path), segment_bytes=256)
    assert crashed.start_offset() == 9
    assert crashed.earliest_snapshot_id() == OffsetAndEpoch(9, 1)
    assert summary(crashed) == summary(log)


def test_installed_snapshot_is_durable(disk, tmp_path):
    log = disk()
    lead(log, 1, n=5)
    log.flush(5)
    write_snapshot(log, 50, 3)
    assert log.truncate_to_latest_snapshot()
    crashed = disk(crash_copy(tmp_path))
    assert (crashed.start_offset(), crashed.end_offset(), crashed.last_fetched_epoch()) == (50, 50, 3)
    assert crashed.latest_snapshot_id() == OffsetAndEpoch(50, 3)


def test_a_snapshot_frozen_just_before_a_crash_is_installed_at_open(disk, tmp_path):
    log = disk()
    lead(log, 1, n=5)
    log.flush(5)
    write_snapshot(log, 50, 3)  # crash before truncate_to_latest_snapshot
    crashed = disk(crash_copy(tmp_path))
    assert (crashed.start_offset(), crashed.end_offset(), crashed.last_fetched_epoch()) == (50, 50, 3)
    assert crashed.read(50, 100) == b""


def test_unfrozen_snapshots_vanish_at_open(disk, tmp_path):
    log = disk()
    lead(log, 1, n=5)
    log.update_high_watermark(5)
    raw = log.create_snapshot(OffsetAndEpoch(5, 1))
    raw.append(b"partial")
    crashed = disk(crash_copy(tmp_path))
    assert crashed.latest_snapshot_id() is None
    assert not [n for n in os.listdir(crashed.directory) if n.endswith(".part")]
    assert crashed.create_snapshot(OffsetAndEpoch(5, 1)) is not None


@pytest.mark.parametrize("garbage", [b"\x00" * 7, b"\xff" * 100, None], ids=["zeros", "ones", "torn batch"])
def test_a_torn_tail_is_cut_back_to_the_last_whole_batch(disk, tmp_path, garbage):
    log = disk()
    lead(log, 1, n=3, batches=3)
    log.flush(9)
    before = summary(log)
    copy = crash_copy(tmp_path)
    segment = tmp_path / copy / METADATA_DIR / "00000000000000000000.log"
    with open(segment, "ab") as f:
        f.write(garbage if garbage is not None else batch(4, 1, base=9)[:-5])
    crashed = disk(copy)
    assert summary(crashed) == before
    assert crashed.append_as_follower(batch(4, 1, base=9)) == (9, 12)


def test_close_flushes_what_was_never_flushed(disk, tmp_path):
    log = disk()
    lead(log, 1, n=3, batches=2)
    lead(log, 2, n=3)
    before = summary(log)
    log.close()
    again = disk()
    assert summary(again) == before
    assert again.last_fetched_epoch() == 2


def test_background_flusher_reports_durability(tmp_path):
    flushed = []
    from kraft.log import LogConfig
    log = MetadataLog(str(tmp_path), LogConfig(append_linger_ms=0), on_flushed=flushed.append)
    try:
        log.append_as_leader(batch(3, 1), 1)
        log.request_flush()
        assert log.log.wait_for_flush(3, timeout=5)
        assert log.flushed_offset() == 3 and flushed and flushed[-1] == 3
    finally:
        log.close()


def test_batches_of_an_epoch_above_the_quorum_state_epoch_are_dropped(disk):
    """A flipped bit in a PartitionLeaderEpoch (outside the CRC) can raise an epoch past any
    this node ever persisted; kept, it would win elections it must not win."""
    log = disk()
    lead(log, 1, n=4)
    lead(log, 2, n=4)
    lead(log, 5, n=4)  # stands for the damaged batch: quorum-state says epoch 2 at most
    assert log.drop_epochs_above(5) == 0 and log.end_offset() == 12
    assert log.drop_epochs_above(2) == 4
    assert log.end_offset() == 8 and log.last_fetched_epoch() == 2
    assert log.flushed_offset() == 8
