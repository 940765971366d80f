"""SegmentedLog: append (leader and follower paths), read, roll, truncate, delete_below,
offsets, and that indexes, epoch cache and files stay consistent through all of them."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from _log_helpers import all_records, batch_for, value_for

from kraft import records
from kraft.errors import CorruptRecordError, OffsetOutOfRangeError, RecordTooLargeError
from kraft.log import LeaderEpochCheckpointFile, LogSegment, UnexpectedAppendOffsetError
from kraft.log.segment import empty_scan
from kraft.types import OffsetAndEpoch


def fill(log, batches, per_batch=5, epoch=1, size=24):
    for _ in range(batches):
        log.append(batch_for(log.end_offset, per_batch, size), leader_epoch=epoch)


def check_consistent(log):
    """Every segment's index equals a rebuild from a scan; the epoch checkpoint on disk
    matches the cache after a flush; file names match the segments."""
    log.flush()
    names = sorted(n for n in os.listdir(log.directory) if n.endswith(".log"))
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    for i, seg in enumerate(log.segments):
        log._segment_with_index(i)
        scan = seg.scan()
        assert scan.error is None and scan.valid_end == seg.size == os.path.getsize(seg.path)
        fresh = LogSegment(seg.directory, seg.base_offset, seg.fd, seg.size, seg.index.interval)
        fresh.index.rebuild(scan.positions, scan.last_offsets, scan.max_timestamps, scan.sizes)
        assert seg.index.entries() == fresh.index.entries()
        on_disk = np.fromfile(seg.index.offset_path, ">i4").reshape(-1, 2).tolist()
        assert on_disk == [list(e) for e in zip(*seg.index.entries())]
    ckpt = LeaderEpochCheckpointFile(os.path.join(log.directory, "leader-epoch-checkpoint")).read()
    assert ckpt == log.epoch_cache.entries()
    for epoch, start in log.epoch_cache.entries():
        assert log.start_offset <= start <= log.end_offset


def test_leader_append_assigns_offsets_and_epoch(open_log):
    log = open_log()
    info = log.append(records.build_batch([b"a", b"b", b"c"], base_offset=77), leader_epoch=3)
    assert (info.first_offset, info.last_offset, log.end_offset) == (0, 2, 3)
    info = log.append(records.build_batch([b"d"]), leader_epoch=3)
    assert (info.first_offset, info.position) == (3, info.position)
    batch = records.RecordBatch(log.read(0, 1000))
    assert (batch.base_offset, batch.partition_leader_epoch) == (0, 3)
    assert [r.value for r in batch] == [b"a", b"b", b"c"]
    assert log.epoch_cache.entries() == [(3, 0)]


def test_leader_append_patches_a_bytearray_in_place(open_log):
    log = open_log()
    log.append(records.build_batch([b"x"]), leader_epoch=1)
    buf = bytearray(records.build_batch([b"y"]))
    log.append(buf, leader_epoch=2)
    assert records.RecordBatch(buf).base_offset == 1 and records.RecordBatch(buf).partition_leader_epoch == 2


def follower_batch(first, count, epoch):
    b = bytearray(batch_for(first, count))
    records.assign_offsets(b, first, epoch)
    return b


def test_follower_append_keeps_offsets_and_epochs(open_log):
    log = open_log()
    log.append(follower_batch(0, 3, 5), assign_offsets=False)
    log.append(follower_batch(3, 2, 7), assign_offsets=False)
    assert (log.start_offset, log.end_offset) == (0, 5)
    assert log.epoch_cache.entries() == [(5, 0), (7, 3)]
    for bad_first in (4, 6):  # overlapping, or leaving a gap
        with pytest.raises(UnexpectedAppendOffsetError):
            log.append(follower_batch(bad_first, 1, 7), assign_offsets=False)
    assert log.end_offset == 5


def test_strict_order_rejects_decreasing_epochs_and_inner_gaps(open_log):
    log = open_log()
    log.append(follower_batch(0, 3, 5), assign_offsets=False)
    with pytest.raises(CorruptRecordError):
        log.append(follower_batch(3, 1, 4), assign_offsets=False)
    with pytest.raises(CorruptRecordError):
        log.append(follower_batch(3, 1, 5) + follower_batch(5, 1, 5), assign_offsets=False)
    with pytest.raises(CorruptRecordError):
        log.append(records.build_batch([b"x"]), leader_epoch=4)  # a fenced leader's epoch
    assert log.end_offset == 3 and log.epoch_cache.entries() == [(5, 0)]


def test_without_strict_order_gaps_are_allowed(open_log):
    log = open_log(strict_order=False)
    log.append(follower_batch(10, 3, 5), assign_offsets=False)
    log.append(follower_batch(20, 1, 5), assign_offsets=False)
    assert log.end_offset == 21 and [r[0] for r in all_records(log)] == [10, 11, 12, 20]
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append(follower_batch(15, 1, 5), assign_offsets=False)


@pytest.mark.parametrize("damage", ["crc", "torn", "length", "empty"])
def test_corrupt_append_leaves_log_unchanged(open_log, damage):
    log = open_log()
    fill(log, 3)
    before = (log.end_offset, log.size_bytes, all_records(log))
    bad = bytearray(batch_for(log.end_offset, 2))
    if damage == "crc":
        bad[-1] ^= 1
    elif damage == "torn":
        bad = bad[:-3]
    elif damage == "length":
        bad[8:12] = (10).to_bytes(4, "big")
    else:
        bad = bytearray()
    with pytest.raises(CorruptRecordError):
        log.append(bytes(bad), assign_offsets=False)
    with pytest.raises(CorruptRecordError):
        log.append(bad, leader_epoch=1)
    assert (log.end_offset, log.size_bytes, all_records(log)) == before


def test_batch_over_max_message_bytes_is_rejected(open_log):
    log = open_log(max_batch_bytes=200)
    with pytest.raises(RecordTooLargeError):
        log.append(batch_for(0, 10, 50), leader_epoch=1)
    assert log.end_offset == 0


def test_read_returns_whole_batches_from_the_one_containing_offset(open_log):
    log = open_log(index_interval_bytes=100)
    fill(log, 40, per_batch=4)
    for offset in range(0, 160, 7):
        data = log.read(offset, 500)
        batches = list(records.iter_batches(data, validate=True))
        assert batches[0].base_offset <= offset <= batches[0].last_offset
        assert sum(b.size for b in batches) == len(data) <= 500
    assert log.read(160, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(161, 100)


def test_read_returns_one_batch_even_if_larger_than_max_bytes(open_log):
    log = open_log()
    log.append(batch_for(0, 50, 100), leader_epoch=1)
    data = log.read(10, 10)
    assert len(list(records.iter_batches(data))) == 1 and len(data) > 10


def test_roll_by_size_and_reads_across_segments(open_log):
    log = open_log(segment_bytes=1000, index_interval_bytes=64)
    fill(log, 60, per_batch=3)
    assert len(log.segments) > 5
    assert all(s.size <= 1000 for s in log.segments)
    assert [r[0] for r in all_records(log)] == list(range(180))
    assert all(v == value_for(o) for o, v, _ in all_records(log))
    check_consistent(log)


def test_roll_by_age_of_record_timestamps(open_log):
    log = open_log(segment_ms=100)
    for ts in (1_000_000, 1_000_050, 1_000_100):
        log.append(records.build_batch([b"a"], timestamp=ts), leader_epoch=1)
    assert len(log.segments) == 1
    log.append(records.build_batch([b"b"], timestamp=1_000_101), leader_epoch=1)
    assert [s.base_offset for s in log.segments] == [0, 3]


def test_roll_by_age_of_segment_without_timestamps(tmp_path):
    from kraft.log import LogConfig, SegmentedLog

    now = [1_000_000]
    log = SegmentedLog.open(str(tmp_path / "aged"), LogConfig(segment_ms=100), clock_ms=lambda: now[0])
    try:
        log.append(records.build_batch([b"a"], timestamp=-1), leader_epoch=1)
        now[0] += 100
        log.append(records.build_batch([b"b"], timestamp=-1), leader_epoch=1)
        assert len(log.segments) == 1
        now[0] += 1
        log.append(records.build_batch([b"c"], timestamp=-1), leader_epoch=1)
        assert [s.base_offset for s in log.segments] == [0, 2]
    finally:
        log.close()


def test_truncate_within_and_across_segments(open_log):
    log = open_log(segment_bytes=1500, index_interval_bytes=100)
    for epoch in (1, 2, 3, 4):
        fill(log, 10, per_batch=3, epoch=epoch)
    assert log.epoch_cache.entries() == [(1, 0), (2, 30), (3, 60), (4, 90)]
    n_before = len(log.segments)
    assert log.truncate_to(75) == 75
    assert log.epoch_cache.entries() == [(1, 0), (2, 30), (3, 60)]
    assert len(log.segments) < n_before
    assert [r[0] for r in all_records(log)] == list(range(75))
    check_consistent(log)
    assert log.truncate_to(31) == 30  # inside a batch: the whole batch goes
    assert log.epoch_cache.entries() == [(1, 0)]
    fill(log, 5, per_batch=3, epoch=5)
    assert log.epoch_cache.entries() == [(1, 0), (5, 30)]
    assert all(v == value_for(o) for o, v, _ in all_records(log))
    check_consistent(log)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(30, 1)


def test_truncate_to_segment_base_and_to_zero(open_log):
    log = open_log(segment_bytes=600)
    fill(log, 20)
    base = log.segments[2].base_offset
    log.truncate_to(base)
    assert log.end_offset == base and log.segments[-1].base_offset == base and log.segments[-1].size == 0
    log.truncate_to(0)
    assert log.end_offset == 0 and log.epoch_cache.entries() == []
    fill(log, 2)
    check_consistent(log)


def test_truncate_beyond_end_trims_an_epoch_assigned_at_the_end(open_log):
    log = open_log()
    fill(log, 2)
    log.assign_epoch_start(7)
    assert log.epoch_cache.latest_epoch == 7
    assert log.truncate_to(log.end_offset + 5) == log.end_offset
    assert log.epoch_cache.entries() == [(1, 0)]


def test_truncate_below_start_is_refused(open_log):
    log = open_log(segment_bytes=600)
    fill(log, 20)
    log.delete_below(30)
    with pytest.raises(OffsetOutOfRangeError):
        log.truncate_to(29)


def test_delete_below_removes_whole_segments_only(open_log):
    log = open_log(segment_bytes=600)
    for epoch in (1, 2):
        fill(log, 15, epoch=epoch)
    bases = [s.base_offset for s in log.segments]
    cut = bases[3] + 2
    deleted = log.delete_below(cut)
    assert deleted == 3 and log.start_offset == cut
    assert [s.base_offset for s in log.segments] == bases[3:]
    assert log.epoch_cache.earliest_entry()[1] == cut
    assert all_records(log)[0][0] == cut
    with pytest.raises(OffsetOutOfRangeError):
        log.read(cut - 1, 100)
    check_consistent(log)


def test_delete_below_end_offset_rolls_and_deletes_everything(open_log):
    log = open_log()
    fill(log, 5)
    end = log.end_offset
    assert log.delete_below(end) == 1
    assert (log.start_offset, log.end_offset, log.size_bytes) == (end, end, 0)
    assert [s.base_offset for s in log.segments] == [end]
    fill(log, 1)
    assert all_records(log)[0][0] == end
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_below(log.end_offset + 1)


def test_truncate_fully_and_start_at(open_log):
    log = open_log(segment_bytes=600)
    fill(log, 10)
    log.truncate_fully_and_start_at(1000)
    assert (log.start_offset, log.end_offset, log.flushed_offset) == (1000, 1000, 1000)
    assert sorted(os.listdir(log.directory)) == [
        "00000000000000001000.index", "00000000000000001000.log",
        "00000000000000001000.timeindex", "leader-epoch-checkpoint"]
    fill(log, 2, epoch=9)
    assert log.epoch_cache.entries() == [(9, 1000)]


def test_reopen_restores_offsets_epochs_and_start(open_log, tmp_path):
    log = open_log(segment_bytes=700)
    for epoch in (1, 4):
        fill(log, 12, epoch=epoch)
    log.delete_below(log.segments[2].base_offset + 1)
    state = (log.start_offset, log.end_offset, log.epoch_cache.entries(), all_records(log))
    log.close()
    again = open_log(tmp_path / "log", segment_bytes=700, log_start_offset=state[0])
    assert (again.start_offset, again.end_offset, again.epoch_cache.entries(), all_records(again)) == state
    assert again.flushed_offset == again.end_offset
    assert again.recovery.truncated_bytes == 0 and again.recovery.indexes_rebuilt == []


def test_reopen_with_recovery_point_scans_only_the_tail(open_log, tmp_path):
    log = open_log(segment_bytes=700)
    fill(log, 30)
    n, end = len(log.segments), log.end_offset
    log.close()
    again = open_log(tmp_path / "log", recovery_point=end, segment_bytes=700)
    assert again.recovery.scanned_segments == 1 and again.end_offset == end
    assert [r[0] for r in all_records(again)] == list(range(end))  # loads the other indexes lazily
    assert len(again.segments) == n
    check_consistent(again)


def test_empty_segment_scan_helper():
    assert len(empty_scan()) == 0


def test_follower_append_can_drop_a_partial_trailing_batch(open_log):
    log = open_log()
    data = bytes(follower_batch(0, 2, 1) + follower_batch(2, 3, 1))
    with pytest.raises(CorruptRecordError):
        log.append(data[:-5], assign_offsets=False)
    info = log.append(data[:-5], assign_offsets=False, ignore_partial_tail=True)
    assert (info.first_offset, info.last_offset, log.end_offset) == (0, 1, 2)
    assert log.append(data[len(follower_batch(0, 2, 1)) : -5], assign_offsets=False,
                      ignore_partial_tail=True) is None
    assert log.end_offset == 2


def test_truncation_is_durable_when_it_returns(open_log, monkeypatch):
    from kraft.log import files

    log = open_log(append_linger_ms=3_600_000)
    fill(log, 6)
    synced = []
    real = files.fdatasync
    monkeypatch.setattr(files, "fdatasync", lambda fd, what: (synced.append(what), real(fd, what)))
    log.truncate_to(10)
    assert synced == [log.segments[-1].path]


def test_write_epoch_checkpoint_writes_a_new_epoch_once_and_the_flush_then_skips_it(tmp_path, monkeypatch):
    """A new leader's epoch can be written from any thread ahead of the flush; the flush
    does not write the same checkpoint again, and a later epoch is written again."""
    from kraft.log import LogConfig as _Cfg
    from kraft.log import SegmentedLog as _Log
    from kraft.log.checkpoint import LeaderEpochCheckpointFile

    log = _Log.open(str(tmp_path / "p"), _Cfg(background_flush=False))
    try:
        log.assign_epoch_start(4)
        writes = []
        real = log.epoch_cache.write
        monkeypatch.setattr(log.epoch_cache, "write", lambda entries=None: writes.append(1) or real(entries))
        assert log.write_epoch_checkpoint() is True
        path = str(tmp_path / "p" / "leader-epoch-checkpoint")
        assert [tuple(e) for e in LeaderEpochCheckpointFile(path).read()] == [(4, 0)]
        assert log.write_epoch_checkpoint() is False
        log.flush()
        assert len(writes) == 1
        log.assign_epoch_start(5)
        log.flush()
        assert len(writes) == 2
        assert [tuple(e) for e in LeaderEpochCheckpointFile(path).read()] == [(5, 0)]  # epoch 4 held nothing
    finally:
        log.close()


def test_file_delete_delay_renames_at_once_and_unlinks_later(open_log, tmp_path):
    """file.delete.delay.ms: removed segments leave the log (and the reads) at once as
    ``*.deleted`` files, which go once the delay has passed, or at the next open."""
    log = open_log(segment_bytes=600, file_delete_delay_ms=300)
    fill(log, 30)
    bases = [s.base_offset for s in log.segments]
    open(os.path.join(log.directory, f"{bases[0]:020d}.txnindex"), "wb").close()  # goes with its segment
    assert log.delete_below(bases[2]) == 2
    names = sorted(os.listdir(log.directory))
    gone = [f"{b:020d}.{kind}" for b in bases[:2] for kind in ("log", "index", "timeindex")]
    assert not set(gone) & set(names)
    assert set(n + ".deleted" for n in gone) | {f"{bases[0]:020d}.txnindex.deleted"} <= set(names)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(bases[0], 100)
    assert log.unlink_retired() == 0  # not yet
    time.sleep(0.35)
    assert log.unlink_retired() == 2
    assert not [n for n in os.listdir(log.directory) if n.endswith(".deleted")]
    # files still waiting when the log closes are removed when it opens again
    assert log.delete_below(bases[3]) == 1
    log.close()
    assert any(n.endswith(".deleted") for n in os.listdir(log.directory))
    again = open_log(directory=log.directory, segment_bytes=600)
    assert not [n for n in os.listdir(again.directory) if n.endswith(".deleted")]
    assert again.segments[0].base_offset == bases[3]


def test_without_a_delay_removed_segments_are_unlinked_at_once(open_log):
    log = open_log(segment_bytes=600)
    fill(log, 20)
    log.delete_below(log.segments[2].base_offset)
    assert not [n for n in os.listdir(log.directory) if n.endswith(".deleted")]
