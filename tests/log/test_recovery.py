"""Crash recovery at open (TESTING.md "Storage faults", Kafka's LogLoaderTest): a damaged
tail recovers to the last valid batch with identical records; damage before the tail is an
error; missing or corrupt indexes are rebuilt; bad epoch checkpoints fail clearly."""

from __future__ import annotations

import os
import random

import pytest
from _log_helpers import all_records, batch_for

from kraft import records
from kraft.errors import LogCorruptionError, StateFileError
from kraft.log import LogConfig, SegmentedLog


def make_log(path, batches=12, per_batch=4, segment_bytes=1 << 30, epochs=(1, 2, 3)):
    log = SegmentedLog.open(str(path), LogConfig(segment_bytes=segment_bytes, index_interval_bytes=100))
    for i in range(batches):
        log.append(batch_for(log.end_offset, per_batch), leader_epoch=epochs[i * len(epochs) // batches])
    state = all_records(log), log.epoch_cache.entries()
    log.close()
    return state


def tail_file(path):
    return os.path.join(path, sorted(n for n in os.listdir(path) if n.endswith(".log"))[-1])


def last_batch_position(seg_path):
    data = open(seg_path, "rb").read()
    scan = records.scan_batches(data)
    return int(scan.positions[-1]), len(data)


def reopen(path, **config):
    return SegmentedLog.open(str(path), LogConfig(index_interval_bytes=100, **config))


def expect_recovered_to_before_last_batch(path, full, epochs):
    log = reopen(path)
    try:
        recs = all_records(log)
        last_batch_first = full[-4][0]  # 4 records per batch
        assert recs == full[:-4]
        assert log.end_offset == last_batch_first == log.flushed_offset
        assert log.recovery.truncated_bytes > 0
        assert log.epoch_cache.entries() == [e for e in epochs if e[1] < log.end_offset]
        # the recovered log takes appends again, at the right offset
        log.append(batch_for(log.end_offset, 2), leader_epoch=3)
        assert all_records(log)[-2][0] == last_batch_first
    finally:
        log.close()
    return log


@pytest.mark.parametrize("keep", [1, 11, 12, 40, -1])
def test_torn_tail_recovers_to_last_complete_batch(tmp_path, keep):
    full, epochs = make_log(tmp_path)
    seg = tail_file(tmp_path)
    pos, size = last_batch_position(seg)
    os.truncate(seg, pos + (keep if keep >= 0 else size - pos - 1))
    log = expect_recovered_to_before_last_batch(tmp_path, full, epochs)
    assert log.recovery.truncation_reason == "partial"


@pytest.mark.parametrize("garbage", [
    b"\x00" * 100, bytes(range(256)), b"\xff" * 61, b"x",
    None,  # a copy of an earlier, valid batch: offsets go backwards
])
def test_appended_garbage_is_truncated(tmp_path, garbage):
    full, epochs = make_log(tmp_path)
    seg = tail_file(tmp_path)
    size = os.path.getsize(seg)
    if garbage is None:
        garbage = open(seg, "rb").read()[: batch_size(seg)]
    with open(seg, "ab") as f:
        f.write(garbage)
    log = reopen(tmp_path)
    try:
        assert all_records(log) == full and log.end_offset == full[-1][0] + 1
        assert log.recovery.truncated_bytes == len(garbage)
        assert os.path.getsize(seg) == size
        assert log.epoch_cache.entries() == epochs
    finally:
        log.close()


def batch_size(seg):
    return int(records.scan_batches(open(seg, "rb").read()).sizes[0])


def flip_positions(seg):
    """Bit positions inside the last batch worth flipping: every header field that a check
    covers, and a spread of bytes under the CRC."""
    pos, size = last_batch_position(seg)
    n = size - pos
    # 0: the high byte of BaseOffset, outside the CRC (a flip there once made the offset leap
    # 2**61 ahead and the node refuse to start). A raised PartitionLeaderEpoch is not damage
    # the log can see; the node drops it against quorum-state (MetadataLog.drop_epochs_above).
    picks = [0, 7, 8, 11, 16, 17, 20, 21, 23, 27, 35, 43, 51, 53, 57, 60, n // 2, n - 1]
    return [(pos + p) * 8 + bit for p in picks for bit in (0, 5)]


@pytest.mark.parametrize("which", range(36))
def test_flipped_bit_in_last_batch_recovers_to_previous_batch(tmp_path, which):
    full, epochs = make_log(tmp_path)
    seg = tail_file(tmp_path)
    bit = flip_positions(seg)[which]
    data = bytearray(open(seg, "rb").read())
    data[bit // 8] ^= 1 << (bit % 8)
    open(seg, "wb").write(bytes(data))
    expect_recovered_to_before_last_batch(tmp_path, full, epochs)


def test_random_damage_to_the_tail_never_resurrects_or_alters_records(tmp_path):
    rng = random.Random(7)
    full, _ = make_log(tmp_path, batches=20)
    seg = tail_file(tmp_path)
    pristine = open(seg, "rb").read()
    for _ in range(30):
        data = bytearray(pristine[: rng.randrange(len(pristine) + 1)])
        for _ in range(rng.randrange(4)):
            if data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        data += bytes(rng.randrange(256) for _ in range(rng.randrange(80)))
        open(seg, "wb").write(bytes(data))
        log = reopen(tmp_path)
        try:
            recs = all_records(log)
            assert recs == full[: len(recs)]  # a prefix, byte-identical
            assert log.end_offset == len(recs)
        finally:
            log.close()


def test_corruption_before_the_tail_segment_is_an_error(tmp_path):
    make_log(tmp_path, batches=30, segment_bytes=1000)
    logs = sorted(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    assert len(logs) > 3
    victim = tmp_path / logs[1]
    data = bytearray(victim.read_bytes())
    data[len(data) - 5] ^= 0x10
    victim.write_bytes(bytes(data))
    before = {n: (tmp_path / n).read_bytes() for n in logs}
    with pytest.raises(LogCorruptionError) as info:
        reopen(tmp_path)
    assert logs[1] in str(info.value)
    assert {n: (tmp_path / n).read_bytes() for n in logs} == before  # nothing dropped


def test_torn_non_tail_segment_is_an_error(tmp_path):
    make_log(tmp_path, batches=30, segment_bytes=1000)
    logs = sorted(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    os.truncate(tmp_path / logs[0], os.path.getsize(tmp_path / logs[0]) - 3)
    with pytest.raises(LogCorruptionError):
        reopen(tmp_path)


@pytest.mark.parametrize("damage", ["delete", "truncate", "garbage", "zero-entry"])
def test_missing_or_corrupt_index_is_rebuilt(tmp_path, damage):
    full, _ = make_log(tmp_path, batches=40, segment_bytes=1500)
    first_index = tmp_path / "00000000000000000000.index"
    good = first_index.read_bytes()
    assert len(good) >= 16
    if damage == "delete":
        first_index.unlink()
    elif damage == "truncate":
        first_index.write_bytes(good[:-3])
    elif damage == "garbage":
        first_index.write_bytes(good[:8] + b"\x7f" * 8 + good[16:])
    else:
        first_index.write_bytes(good + bytes(8))
    end = full[-1][0] + 1
    log = reopen(tmp_path)  # scans everything: every index is rebuilt from its scan
    try:
        assert all_records(log) == full
    finally:
        log.close()
    assert first_index.read_bytes() == good
    # and with a recovery point the damaged index is caught lazily by its sanity check
    if damage != "zero-entry":
        first_index.write_bytes(good[:8] + b"\x7f" * 8 + good[16:])
        log = reopen(tmp_path)
        log.close()
        first_index.write_bytes(good[:8] + b"\x7f" * 8 + good[16:])
        lazily = SegmentedLog.open(str(tmp_path), LogConfig(index_interval_bytes=100), recovery_point=end)
        try:
            assert lazily.recovery.scanned_segments == 1
            assert all_records(lazily) == full
            assert 0 in lazily.recovery.indexes_rebuilt
        finally:
            lazily.close()
        assert first_index.read_bytes() == good


def test_orphan_index_files_and_temp_checkpoint_are_removed(tmp_path):
    make_log(tmp_path)
    (tmp_path / "00000000000000000999.index").write_bytes(b"")
    (tmp_path / "leader-epoch-checkpoint.tmp").write_text("junk")
    log = reopen(tmp_path)
    log.close()
    assert sorted(log.recovery.removed_files) == ["00000000000000000999.index", "leader-epoch-checkpoint.tmp"]


def test_malformed_epoch_checkpoint_fails_clearly(tmp_path):
    make_log(tmp_path)
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n1 0\n")
    with pytest.raises(StateFileError) as info:
        reopen(tmp_path)
    assert "leader-epoch-checkpoint" in str(info.value)


def test_stale_or_missing_epoch_checkpoint_is_rebuilt_from_the_scan(tmp_path):
    full, epochs = make_log(tmp_path)
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n1 0\n9 3\n")
    log = reopen(tmp_path)
    log.close()
    assert log.epoch_cache.entries() == epochs
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == \
        "0\n3\n" + "".join(f"{e} {s}\n" for e, s in epochs)
    (tmp_path / "leader-epoch-checkpoint").unlink()
    log = SegmentedLog.open(str(tmp_path), recovery_point=full[-1][0])
    log.close()
    assert log.epoch_cache.entries() == epochs


def test_log_start_offset_beyond_the_data_empties_the_log(tmp_path):
    make_log(tmp_path)
    log = SegmentedLog.open(str(tmp_path), log_start_offset=500)
    try:
        assert (log.start_offset, log.end_offset) == (500, 500)
        assert all_records(log) == []
    finally:
        log.close()


def test_a_corrupt_middle_segment_is_refused_in_one_sentence_naming_file_offset_and_remedy(tmp_path):
    """Before: "...: CRC mismatch at position N at position N of S; this segment ..." (the
    position twice, no offset, no remedy)."""
    full, _ = make_log(tmp_path, batches=30, segment_bytes=1000)
    logs = sorted(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    victim = tmp_path / logs[1]
    data = bytearray(victim.read_bytes())
    data[len(data) - 5] ^= 0x10  # inside the last batch of the second segment
    victim.write_bytes(bytes(data))
    with pytest.raises(LogCorruptionError) as info:
        reopen(tmp_path)
    msg = str(info.value)
    assert msg.count("position") == 0 and msg.count("byte ") == 1, msg
    assert msg.startswith(f"{victim}: CRC mismatch in the batch expected at offset ")
    offset = int(msg.split("expected at offset ")[1].split()[0])
    starts = [r[0] for r in full][::4]  # first offset of each 4-record batch
    assert offset in starts and offset > int(logs[1].split(".")[0])
    assert "\n" not in msg and "restore this log directory" in msg
