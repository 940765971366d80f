"""Contract of the Raft log port (kraft/raft/log_port.py), run against both implementations:
``InMemoryLog`` (the simulator's) and ``MetadataLog`` (the server's, over kraft.log files).
The expected answers are Kafka's (ReplicatedLog / KafkaMetadataLog / LeaderEpochFileCache);
an implementation that differs from them, or from the other implementation, is a bug."""

from __future__ import annotations

import pytest

from kraft.errors import CorruptRecordError, InvalidRecordError
from kraft.types import OffsetAndEpoch
from kraft.records import iter_batches

from log_port_helpers import IMPLS, batch, close_log, lead, oe, open_log, read_all, summary, write_snapshot

REJECTED = (CorruptRecordError, InvalidRecordError)


@pytest.fixture(params=IMPLS)
def log(request, tmp_path):
    lg = open_log(request.param, tmp_path)
    yield lg
    close_log(lg)


@pytest.fixture
def make(tmp_path):
    """make(impl) -> a fresh log; for tests parametrized over the implementation themselves."""
    made = []

    def factory(impl):
        made.append(open_log(impl, tmp_path / impl))
        return made[-1]
    yield factory
    for lg in made:
        close_log(lg)


def _three_epochs(log):
    """Epoch 1 at offsets 0-4, epoch 3 at 5-9, epoch 6 at 10-14 (two batches each)."""
    for epoch in (1, 3, 6):
        log.append_as_leader(batch(2, epoch), epoch)
        log.append_as_leader(batch(3, epoch), epoch)


# --- offsets and appends -------------------------------------------------------------------------


def test_a_new_log_is_empty(log):
    assert (log.start_offset(), log.end_offset(), log.flushed_offset(), log.last_fetched_epoch()) == (0, 0, 0, 0)
    assert log.read(0, 1000) == b""
    assert log.latest_snapshot_id() is None and log.earliest_snapshot_id() is None
    assert oe(log.end_offset_for_epoch(0)) == (0, 0)


def test_append_as_leader_assigns_consecutive_offsets_and_stamps_the_epoch(log):
    assert log.append_as_leader(batch(3, -1, base=77), 2) == (0, 2)
    assert log.append_as_leader(batch(1, 0, base=5) + batch(4, 9, base=0), 2) == (3, 7)
    assert log.end_offset() == 8 and log.last_fetched_epoch() == 2
    assert [b[:3] for b in read_all(log)] == [(0, 2, 2), (3, 3, 2), (4, 7, 2)]
    assert log.append_as_leader(batch(2, 2), 5) == (8, 9)
    assert log.last_fetched_epoch() == 5


def test_append_as_leader_below_the_latest_epoch_is_rejected_and_changes_nothing(log):
    lead(log, 3)
    before = summary(log)
    with pytest.raises(REJECTED):
        log.append_as_leader(batch(1, 2), 2)
    assert summary(log) == before


def test_append_as_follower_keeps_the_leaders_offsets_and_epochs(log):
    data = batch(2, 1, base=0) + batch(3, 4, base=2)
    assert log.append_as_follower(data) == (0, 4)
    assert log.append_as_follower(batch(1, 4, base=5)) == (5, 5)
    assert [b[:3] for b in read_all(log)] == [(0, 1, 1), (2, 4, 4), (5, 5, 4)]
    assert log.last_fetched_epoch() == 4
    assert log.append_as_follower(b"") == (-1, -1)


def _corrupt_crc(data: bytes) -> bytes:
    buf = bytearray(data)
    buf[-1] ^= 0xFF  # inside the records: covered by the CRC
    return bytes(buf)


FOLLOWER_REJECTS = {
    "corrupt crc": lambda: _corrupt_crc(batch(2, 2, base=3)),
    "valid then corrupt": lambda: batch(1, 2, base=3) + _corrupt_crc(batch(1, 2, base=4)),
    "gap at the start": lambda: batch(2, 2, base=5),
    "overlapping start": lambda: batch(2, 2, base=1),
    "gap inside": lambda: batch(2, 2, base=3) + batch(2, 2, base=6),
    "epoch below the log's": lambda: batch(2, 1, base=3),
    "epoch going down inside": lambda: batch(2, 4, base=3) + batch(2, 3, base=5),
    "negative epoch": lambda: batch(2, -1, base=3),
    "garbage": lambda: b"\x00" * 61 + b"\xff" * 20,
    "bad magic": lambda: batch(2, 2, base=3)[:16] + b"\x01" + batch(2, 2, base=3)[17:],
}


@pytest.mark.parametrize("make_data", FOLLOWER_REJECTS.values(), ids=list(FOLLOWER_REJECTS))
def test_append_as_follower_rejects_bad_data_and_leaves_the_log_unchanged(log, make_data):
    log.append_as_follower(batch(3, 2, base=0))
    log.flush(3)
    before = summary(log), log.flushed_offset()
    with pytest.raises(REJECTED):
        log.append_as_follower(make_data())
    assert (summary(log), log.flushed_offset()) == before
    assert log.append_as_follower(batch(1, 2, base=3)) == (3, 3)  # and it still appends


@pytest.mark.parametrize("cut", [1, 12, 61, 70])
def test_append_as_follower_ignores_a_trailing_partial_batch(log, cut):
    whole = batch(2, 1, base=0)
    tail = batch(3, 1, base=2)
    assert log.append_as_follower(whole + tail[:len(tail) - cut]) == (0, 1)
    assert log.end_offset() == 2
    assert log.append_as_follower(tail) == (2, 4)


def test_append_as_follower_of_only_a_partial_batch_appends_nothing(log):
    assert log.append_as_follower(batch(3, 1)[:30]) == (-1, -1)
    assert (log.end_offset(), log.last_fetched_epoch()) == (0, 0)


# --- reads ---------------------------------------------------------------------------------------


def test_read_returns_whole_batches_from_the_one_holding_the_offset(log):
    for _ in range(4):
        lead(log, 1, n=5)  # batches at 0, 5, 10, 15
    size = len(batch(5, 1))
    for offset in (5, 7, 9):
        bases = [b.base_offset for b in iter_batches(log.read(offset, 10 * size))]
        assert bases[0] == 5 and bases == [5, 10, 15][:len(bases)]  # may stop at a segment's end
    assert log.read(20, 100) == b""


def test_read_returns_at_least_one_batch_and_never_a_partial_one(log):
    lead(log, 1, n=5, batches=3)
    size = len(batch(5, 1))
    assert [b.base_offset for b in iter_batches(log.read(0, 1))] == [0]
    assert len(log.read(0, 1)) == size
    assert [b.base_offset for b in iter_batches(log.read(0, 2 * size + size // 2))] == [0, 5]
    assert len(log.read(0, 2 * size)) == 2 * size
    for max_bytes in range(1, 3 * size + 2, 7):
        data = log.read(5, max_bytes)
        assert sum(b.size for b in iter_batches(data)) == len(data)
        assert len(data) <= max(max_bytes, size)


# --- epochs -------------------------------------------------------------------------------------


EPOCH_ANSWERS = {  # Kafka LeaderEpochFileCache.endOffsetFor (epoch, offset) as OffsetAndEpoch(offset, epoch)
    6: (15, 6),  # the latest epoch: the log end offset
    3: (10, 3),
    4: (10, 3),  # between epochs: the greatest known epoch <= 4, ending where 6 starts
    5: (10, 3),
    1: (5, 1),
    2: (5, 1),
    0: (0, 0),  # below every epoch: the first epoch's start, with the requested epoch
    7: (15, 6),  # above every epoch: undefined -> (end offset, last fetched epoch)
    -1: (15, 6),  # undefined too
}


@pytest.mark.parametrize("epoch,expected", EPOCH_ANSWERS.items(), ids=[str(e) for e in EPOCH_ANSWERS])
def test_end_offset_for_epoch_matches_kafka(log, epoch, expected):
    _three_epochs(log)
    assert oe(log.end_offset_for_epoch(epoch)) == expected


def test_end_offset_for_epoch_after_truncation_forgets_the_removed_epochs(log):
    _three_epochs(log)
    log.truncate_to(7)  # inside epoch 3's second batch (5-9 -> keep 5-6)
    assert (log.end_offset(), log.last_fetched_epoch()) == (7, 3)
    assert oe(log.end_offset_for_epoch(3)) == (7, 3)
    assert oe(log.end_offset_for_epoch(6)) == (7, 3)  # undefined now
    log.truncate_to(5)
    assert (log.end_offset(), log.last_fetched_epoch()) == (5, 1)
    assert oe(log.end_offset_for_epoch(3)) == (5, 1)


def test_end_offset_for_epoch_uses_the_earliest_snapshot_below_the_first_epoch(log):
    _three_epochs(log)
    log.update_high_watermark(15)
    sid = write_snapshot(log, 10, 3)
    assert log.delete_before_snapshot(sid)
    assert log.start_offset() == 10
    # Epoch 5 is below every epoch left (6 at 10): the cache says (10, 5), which is the
    # snapshot's end offset with a greater epoch, so the snapshot's id is the answer.
    assert oe(log.end_offset_for_epoch(5)) == (10, 3)
    assert oe(log.end_offset_for_epoch(4)) == (10, 3)
    assert oe(log.end_offset_for_epoch(3)) == (10, 3)
    assert oe(log.end_offset_for_epoch(2)) == (10, 2)  # below the snapshot's epoch: not overridden
    assert oe(log.end_offset_for_epoch(6)) == (15, 6)


# --- truncation and the high watermark --------------------------------------------------------------


def test_truncate_to_below_the_high_watermark_raises_and_changes_nothing(log):
    _three_epochs(log)
    log.update_high_watermark(10)
    before = summary(log)
    with pytest.raises(RuntimeError):
        log.truncate_to(9)
    assert summary(log) == before
    log.update_high_watermark(4)  # the high watermark never moves back
    with pytest.raises(RuntimeError):
        log.truncate_to(9)
    log.truncate_to(10)
    assert log.end_offset() == 10


def test_high_watermark_past_the_end_is_refused(log):
    lead(log, 1)
    with pytest.raises(RuntimeError):
        log.update_high_watermark(4)
    log.update_high_watermark(3)


def test_truncate_to_removes_whole_batches_and_is_a_no_op_past_the_end(log):
    lead(log, 1, n=5, batches=3)
    log.truncate_to(20)
    assert log.end_offset() == 15
    log.truncate_to(12)  # inside the batch 10-14: the whole batch goes
    assert log.end_offset() == 10
    assert [b[:2] for b in read_all(log)] == [(0, 4), (5, 9)]
    assert log.append_as_follower(batch(2, 1, base=10)) == (10, 11)


def test_flushed_offset_follows_flush_and_truncation(log):
    lead(log, 1, n=5, batches=2)
    assert log.flushed_offset() <= log.end_offset()
    log.flush(10)
    assert log.flushed_offset() == 10
    log.truncate_to(5)
    assert log.flushed_offset() == 5
    lead(log, 2)
    log.flush(log.end_offset())
    assert log.flushed_offset() == 8


# --- snapshots ----------------------------------------------------------------------------------


def test_a_snapshot_is_visible_only_once_frozen(log):
    lead(log, 1, n=5, batches=2)
    log.update_high_watermark(10)
    sid = OffsetAndEpoch(5, 1)
    raw = log.create_snapshot(sid)
    raw.append(b"")
    assert log.read_snapshot(sid) is None and log.latest_snapshot_id() is None
    from kraft.raft.snapshot import SnapshotWriter
    w = SnapshotWriter(raw, -1, 0, lambda s: None)
    w.append([b"a", b"b"])
    size = raw.size_in_bytes()
    assert size > 0
    w.freeze()
    reader = log.read_snapshot(sid)
    assert reader is not None and reader.snapshot_id == sid
    assert reader.size_in_bytes() == raw.size_in_bytes() >= size
    data = reader.read(0, 1 << 20)
    assert len(data) == reader.size_in_bytes()
    assert reader.read(10, 7) == data[10:17]
    assert reader.read(len(data), 100) == b""
    assert [b.base_offset for b in iter_batches(data)][0] == 0  # offsets inside a snapshot start at 0
    assert log.create_snapshot(sid) is None  # already exists
    with pytest.raises((ValueError, RuntimeError)):
        raw.append(b"x")  # no appends after freeze


def test_latest_and_earliest_snapshot_ids(log):
    lead(log, 1, n=5)
    lead(log, 2, n=5)
    log.update_high_watermark(10)
    write_snapshot(log, 7, 2)
    write_snapshot(log, 3, 1)
    write_snapshot(log, 10, 2)
    assert log.earliest_snapshot_id() == OffsetAndEpoch(3, 1)
    assert log.latest_snapshot_id() == OffsetAndEpoch(10, 2)
    assert log.read_snapshot(OffsetAndEpoch(7, 1)) is None


def test_delete_before_snapshot_only_at_or_below_the_high_watermark(log):
    lead(log, 1, n=5, batches=4)  # 0..19
    write_snapshot(log, 10, 1)
    log.update_high_watermark(5)
    assert log.delete_before_snapshot(OffsetAndEpoch(10, 1)) is False  # past the high watermark
    assert log.start_offset() == 0
    assert log.delete_before_snapshot(OffsetAndEpoch(5, 1)) is False  # no such snapshot
    log.update_high_watermark(10)
    assert log.delete_before_snapshot(OffsetAndEpoch(10, 1)) is True
    assert (log.start_offset(), log.end_offset()) == (10, 20)
    assert [b[0] for b in read_all(log)] == [10, 15]
    assert log.delete_before_snapshot(OffsetAndEpoch(10, 1)) is False  # nothing left to delete


def test_delete_before_snapshot_forgets_older_snapshots(log):
    lead(log, 1, n=5, batches=4)
    log.update_high_watermark(20)
    for offset in (5, 10, 15):
        write_snapshot(log, offset, 1)
    assert log.delete_before_snapshot(OffsetAndEpoch(10, 1))
    assert log.earliest_snapshot_id() == OffsetAndEpoch(10, 1)
    assert log.read_snapshot(OffsetAndEpoch(5, 1)) is None
    assert log.read_snapshot(OffsetAndEpoch(15, 1)) is not None
    assert log.latest_snapshot_id() == OffsetAndEpoch(15, 1)


@pytest.mark.parametrize("impl", [
    "memory",
    "disk"])
def test_delete_before_snapshot_inside_a_batch_starts_the_log_at_the_snapshot(make, impl):
    log = make(impl)
    lead(log, 1, n=5, batches=2)
    log.update_high_watermark(10)
    write_snapshot(log, 7, 1)
    assert log.delete_before_snapshot(OffsetAndEpoch(7, 1))
    assert log.start_offset() == 7


def test_truncate_to_latest_snapshot_past_the_end_installs_it(log):
    lead(log, 1, n=5)
    write_snapshot(log, 3, 1)
    sid = write_snapshot(log, 40, 2)
    assert log.truncate_to_latest_snapshot() is True
    assert (log.start_offset(), log.end_offset(), log.last_fetched_epoch()) == (40, 40, 2)
    assert log.flushed_offset() == 40
    assert log.read(40, 100) == b""
    assert log.earliest_snapshot_id() == sid  # older snapshots went with the log
    assert oe(log.end_offset_for_epoch(2)) == (40, 2)
    assert log.append_as_follower(batch(2, 2, base=40)) == (40, 41)
    assert oe(log.end_offset_for_epoch(2)) == (42, 2)


def test_truncate_to_latest_snapshot_with_a_newer_epoch_installs_it_even_inside_the_log(log):
    lead(log, 1, n=5, batches=2)
    write_snapshot(log, 5, 3)
    assert log.truncate_to_latest_snapshot() is True
    assert (log.start_offset(), log.end_offset(), log.last_fetched_epoch()) == (5, 5, 3)


def test_truncate_to_latest_snapshot_inside_the_log_does_nothing(log):
    lead(log, 2, n=5, batches=2)
    log.update_high_watermark(10)
    write_snapshot(log, 5, 2)
    write_snapshot(log, 10, 2)
    before = summary(log)
    assert log.truncate_to_latest_snapshot() is False
    assert summary(log) == before


@pytest.mark.parametrize("impl", [
    "memory",
    "disk"])
def test_truncate_to_latest_snapshot_compares_with_the_logs_own_latest_epoch(make, impl):
    log = make(impl)
    lead(log, 1, n=5)
    write_snapshot(log, 20, 2)
    assert log.truncate_to_latest_snapshot() is True
    assert log.truncate_to_latest_snapshot() is True  # Kafka: an empty log's latest epoch counts as 0


def _freeze_outcome(log):
    lead(log, 1, n=5)
    log.update_high_watermark(5)
    raw = log.create_snapshot(OffsetAndEpoch(5, 1))
    raw.append(batch(2, 1))  # whole batches, but no SnapshotHeader first nor SnapshotFooter last
    try:
        raw.freeze()
        outcome = "frozen"
    except Exception as exc:  # noqa: BLE001 (the outcome is what is compared)
        outcome = type(exc).__name__
    return outcome, log.latest_snapshot_id()


def test_freezing_a_malformed_raw_snapshot_behaves_the_same_in_both(make):
    assert _freeze_outcome(make("memory")) == _freeze_outcome(make("disk"))
