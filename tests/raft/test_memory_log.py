"""InMemoryLog keeps the log port's contract (kraft/raft/log_port.py): Kafka's epoch-cache
answers, crash drops only the unflushed suffix, corrupt appends change nothing, no
truncation below the high watermark, snapshots and prefix deletion."""

import pytest

from kraft.errors import CorruptRecordError, InvalidRecordError
from kraft.raft import OffsetAndEpoch
from kraft.records import build_batch
from kraft.testing import InMemoryLog


def log_with(*epochs_and_counts) -> InMemoryLog:
    log = InMemoryLog()
    for epoch, count in epochs_and_counts:
        log.append_as_leader(build_batch([b"x"] * count, timestamp=0), epoch)
    return log


def test_end_offset_for_epoch_follows_leader_epoch_file_cache():
    log = log_with((1, 2), (3, 3), (5, 1))  # epoch 1: 0-1, epoch 3: 2-4, epoch 5: 5
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(6, 5)  # latest epoch: log end
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(5, 3)  # unknown epoch: floor epoch
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)  # below the first epoch
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(6, 5)  # above all: (end, last epoch)
    assert log.last_fetched_epoch() == 5


def test_crash_drops_exactly_the_unflushed_suffix():
    log = log_with((1, 2), (1, 2))
    log.flush(2)
    log.append_as_leader(build_batch([b"y"], timestamp=0), 2)
    log.crash()
    assert log.end_offset() == 2 and log.last_fetched_epoch() == 1


def test_follower_append_rejects_corrupt_or_misplaced_data_without_change():
    log = log_with((1, 1))
    good = build_batch([b"a"], base_offset=1, partition_leader_epoch=1, timestamp=0)
    bad = bytearray(good)
    bad[-2] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bytes(bad))
    with pytest.raises(InvalidRecordError):
        log.append_as_follower(build_batch([b"a"], base_offset=5, partition_leader_epoch=1, timestamp=0))
    assert log.end_offset() == 1
    assert log.append_as_follower(good + good[:10]) == (1, 1)  # trailing partial batch ignored


def test_truncation_below_the_high_watermark_raises():
    log = log_with((1, 3))
    log.flush(3)
    log.update_high_watermark(2)
    with pytest.raises(RuntimeError):
        log.truncate_to(1)
    log.truncate_to(2)  # whole batch 0-2 holds offset 2, so it goes
    assert log.end_offset() == 0 or log.end_offset() == 2


def test_read_returns_whole_batches_and_at_least_one():
    log = log_with((1, 1), (1, 1), (1, 1))
    one = log.read(0, 1)
    assert one and len(one) < len(log.read(0, 10**6))
    assert log.read(3, 100) == b""


def snapshot_bytes(epoch: int, values=(b"state",)) -> bytes:
    """A well-formed snapshot: SnapshotHeader, one data batch, SnapshotFooter (offsets from 0)."""
    from kraft.records import SnapshotFooterRecord, SnapshotHeaderRecord, build_control_record_batch

    return (build_control_record_batch(SnapshotHeaderRecord(0), base_offset=0, partition_leader_epoch=epoch, timestamp=0)
            + build_batch(list(values), base_offset=1, partition_leader_epoch=epoch, timestamp=0)
            + build_control_record_batch(SnapshotFooterRecord(), base_offset=1 + len(values),
                                         partition_leader_epoch=epoch, timestamp=0))


def test_snapshot_then_delete_prefix_moves_log_start_and_cuts_epoch_cache():
    log = log_with((1, 2), (2, 2), (2, 2))
    log.flush(6)
    log.update_high_watermark(6)
    w = log.create_snapshot(OffsetAndEpoch(4, 2))
    w.append(snapshot_bytes(2))
    w.freeze()
    assert log.delete_before_snapshot(OffsetAndEpoch(4, 2))
    assert log.start_offset() == 4 and log.earliest_snapshot_id() == OffsetAndEpoch(4, 2)
    assert log.epoch_cache() == [(2, 4)]
    assert log.read_snapshot(OffsetAndEpoch(4, 2)).read(0, 1 << 20) == snapshot_bytes(2)


def test_a_snapshot_without_header_and_footer_is_refused_at_freeze():
    log = log_with((1, 2))
    log.flush(2)
    log.update_high_watermark(2)
    w = log.create_snapshot(OffsetAndEpoch(2, 1))
    w.append(b"snapshot-bytes")
    with pytest.raises(CorruptRecordError):
        w.freeze()
    assert log.latest_snapshot_id() is None


def test_truncate_to_latest_snapshot_only_when_the_snapshot_is_ahead():
    log = log_with((1, 2))
    log.flush(2)
    w = log.create_snapshot(OffsetAndEpoch(10, 3))
    w.append(snapshot_bytes(3))
    w.freeze()
    assert log.truncate_to_latest_snapshot()
    assert (log.start_offset(), log.end_offset(), log.last_fetched_epoch()) == (10, 10, 3)
    # Kafka compares with the log's own latest epoch (0 for an empty log): it truncates again,
    # harmlessly. Once the log holds the snapshot's epoch and ends at or past it, it does not.
    assert log.truncate_to_latest_snapshot()
    log.append_as_leader(build_batch([b"x"], timestamp=0), 3)
    assert not log.truncate_to_latest_snapshot()


def test_unfrozen_snapshot_is_lost_in_a_crash():
    log = log_with((1, 1))
    w = log.create_snapshot(OffsetAndEpoch(1, 1))
    w.append(b"partial")
    log.crash()
    with pytest.raises(RuntimeError):
        w.freeze()
    assert log.latest_snapshot_id() is None
