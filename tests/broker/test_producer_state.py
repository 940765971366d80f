"""Idempotent-producer state (Kafka's ProducerStateManager rules) and its `.snapshot` files:
sequence, epoch and duplicate decisions; snapshot round trip in Kafka's byte layout; recovery
from the last snapshot plus the log after it, and after a truncation."""

from __future__ import annotations

import os
import struct

import pytest

from kraft.broker.producer_snapshots import (CorruptSnapshotError, decode_snapshot, encode_snapshot,
                                             load_producer_state, snapshot_offsets, snapshot_path, write_snapshot)
from kraft.broker.producer_state import INT32_MAX, ProducerStateTable, producer_batches
from kraft.errors import ErrorCode
from kraft.log.config import LogConfig
from kraft.log.segmented_log import SegmentedLog
from kraft.records import build_batch, crc32c

E = ErrorCode


def batch(pid, epoch, seq, n=1, base_offset=0):
    return build_batch([b"v%d" % i for i in range(n)], base_offset=base_offset, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, timestamp=1000 + seq)


def headers(pid, epoch, seq, n=1, base_offset=0):
    return producer_batches(batch(pid, epoch, seq, n, base_offset))


def appended(table, pid, epoch, seq, n, base_offset):
    h = headers(pid, epoch, seq, n, base_offset)
    assert table.check_client_append(h).code == E.NONE and table.check_client_append(h).duplicate is None
    table.apply(h)


def test_header_parse_gives_first_and_last_sequence_and_offsets():
    (h,) = headers(7, 2, 10, n=3, base_offset=40)
    assert (h.producer_id, h.producer_epoch, h.first_sequence, h.last_sequence) == (7, 2, 10, 12)
    assert (h.base_offset, h.last_offset) == (40, 42)
    assert producer_batches(build_batch([b"x"])) == []  # non-idempotent batches are skipped


def test_in_order_batches_are_accepted_and_a_gap_is_out_of_order():
    t = ProducerStateTable()
    appended(t, 1, 0, 0, 3, 0)
    appended(t, 1, 0, 3, 2, 3)
    v = t.check_client_append(headers(1, 0, 6))
    assert v.code == E.OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.parametrize("which", range(5))
def test_a_retry_of_any_of_the_last_five_batches_is_answered_with_its_original_offsets(which):
    t = ProducerStateTable()
    offset = 0
    for i in range(6):
        appended(t, 1, 0, i * 2, 2, offset)
        offset += 2
    seq = (which + 1) * 2  # batches 1..5 are retained; batch 0 fell out of the window
    v = t.check_client_append(headers(1, 0, seq, 2))
    assert v.code == E.NONE and v.duplicate is not None
    assert (v.duplicate.first_offset, v.duplicate.last_offset) == (seq, seq + 1)


def test_a_retry_older_than_the_five_retained_batches_is_out_of_order_not_a_duplicate():
    t = ProducerStateTable()
    for i in range(6):
        appended(t, 1, 0, i, 1, i)
    v = t.check_client_append(headers(1, 0, 0))
    assert v.code == E.OUT_OF_ORDER_SEQUENCE_NUMBER and v.duplicate is None


def test_an_older_epoch_is_invalid_producer_epoch_and_a_new_epoch_must_start_at_zero():
    t = ProducerStateTable()
    appended(t, 1, 3, 0, 1, 0)
    assert t.check_client_append(headers(1, 2, 1)).code == E.INVALID_PRODUCER_EPOCH
    assert t.check_client_append(headers(1, 4, 5)).code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    appended(t, 1, 4, 0, 1, 1)
    assert t.get(1).epoch == 4 and t.get(1).last_seq == 0


def test_an_unknown_producer_may_start_at_any_sequence():
    t = ProducerStateTable()
    assert t.check_client_append(headers(9, 0, 77)).code == E.NONE


def test_sequences_wrap_at_int32_max():
    t = ProducerStateTable()
    appended(t, 1, 0, INT32_MAX, 1, 0)
    assert t.check_client_append(headers(1, 0, 0)).code == E.NONE
    assert t.check_client_append(headers(1, 0, 1)).code == E.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_two_batches_of_one_producer_in_one_request_must_continue_each_other():
    t = ProducerStateTable()
    appended(t, 1, 0, 0, 1, 0)
    good = producer_batches(batch(1, 0, 1, 2) + batch(1, 0, 3, 1, base_offset=2))
    bad = producer_batches(batch(1, 0, 1, 2) + batch(1, 0, 4, 1, base_offset=2))
    assert t.check_client_append(good).code == E.NONE
    assert t.check_client_append(bad).code == E.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_snapshot_round_trip_keeps_each_producers_last_batch_in_kafkas_layout():
    t = ProducerStateTable()
    appended(t, 5, 1, 0, 3, 0)
    appended(t, 5, 1, 3, 2, 3)
    appended(t, 2, 0, 0, 1, 5)
    data = encode_snapshot(t)
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count, len(data)) == (1, 2, 10 + 2 * 46)
    assert crc == crc32c(data[6:])
    pid, epoch, last_seq, last_offset, delta, _ts, coord, txn = struct.unpack_from(">qhiqiqiq", data, 10)
    assert (pid, epoch, last_seq, last_offset, delta, coord, txn) == (2, 0, 0, 5, 0, -1, -1)
    back = decode_snapshot(data, t.end_offset)
    assert back.get(5).epoch == 1 and list(back.get(5).batches) == [t.get(5).batches[-1]]
    assert back.check_client_append(headers(5, 1, 3, 2)).duplicate is not None  # the last batch is still a dup
    assert back.check_client_append(headers(5, 1, 5)).code == E.NONE


def test_a_flipped_byte_makes_the_snapshot_corrupt():
    t = ProducerStateTable()
    appended(t, 5, 1, 0, 3, 0)
    data = bytearray(encode_snapshot(t))
    data[20] ^= 1
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data), 3)


def _log(tmp_path):
    return SegmentedLog.open(str(tmp_path / "t-0"), LogConfig())


def _append(seg_log, pid, epoch, seq, n):
    seg_log.append(bytearray(batch(pid, epoch, seq, n)), assign_offsets=True, leader_epoch=0)


def test_recovery_loads_the_last_snapshot_then_replays_the_log_after_it(tmp_path):
    seg_log = _log(tmp_path)
    t = ProducerStateTable()
    for seq in (0, 2):
        _append(seg_log, 1, 0, seq, 2)
    t.apply(producer_batches(seg_log.read(0, 1 << 20)), seg_log.end_offset)
    write_snapshot(seg_log.directory, t)
    _append(seg_log, 1, 0, 4, 2)
    _append(seg_log, 3, 0, 0, 1)
    assert snapshot_offsets(seg_log.directory) == [4]
    got = load_producer_state(seg_log)
    assert got.end_offset == seg_log.end_offset == 7
    assert got.get(1).last_seq == 5 and got.get(1).last_offset == 5 and got.get(3).last_offset == 6
    seg_log.close()


def test_recovery_without_a_snapshot_rebuilds_everything_from_the_log(tmp_path):
    seg_log = _log(tmp_path)
    for seq in range(0, 12, 2):
        _append(seg_log, 1, 0, seq, 2)
    got = load_producer_state(seg_log)
    assert got.get(1).last_seq == 11 and len(got.get(1).batches) == 5
    seg_log.close()


def test_after_a_truncation_newer_snapshots_go_and_state_is_rebuilt_below_the_new_end(tmp_path):
    seg_log = _log(tmp_path)
    for seq in range(0, 6, 2):
        _append(seg_log, 1, 0, seq, 2)
    t = ProducerStateTable()
    t.apply(producer_batches(seg_log.read(0, 1 << 20)), seg_log.end_offset)
    write_snapshot(seg_log.directory, t)  # 00..06.snapshot
    assert seg_log.truncate_to(4) == 4
    got = load_producer_state(seg_log)
    assert snapshot_offsets(seg_log.directory) == []
    assert got.get(1).last_seq == 3 and got.end_offset == 4
    seg_log.close()


def test_a_corrupt_latest_snapshot_is_removed_and_the_older_one_used(tmp_path):
    seg_log = _log(tmp_path)
    t = ProducerStateTable()
    _append(seg_log, 1, 0, 0, 2)
    t.apply(producer_batches(seg_log.read(0, 1 << 20)), seg_log.end_offset)
    write_snapshot(seg_log.directory, t)
    _append(seg_log, 1, 0, 2, 2)
    with open(snapshot_path(seg_log.directory, 4), "wb") as f:
        f.write(b"\x00\x01garbage")
    got = load_producer_state(seg_log)
    assert not os.path.exists(snapshot_path(seg_log.directory, 4))
    assert got.get(1).last_seq == 3
    seg_log.close()
