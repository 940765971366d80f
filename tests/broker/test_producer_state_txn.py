"""Transactional producer state (Kafka's ProducerAppendInfo with transactions): a
transactional batch opens the producer's transaction at its first offset, an end marker
closes it and reports it (aborted or committed), the last stable offset stays below the
oldest open transaction, and markers from a stale producer or coordinator epoch are refused."""

from __future__ import annotations

import os
from types import SimpleNamespace

from kraft.broker.producer_snapshots import load_producer_state, write_snapshot
from kraft.broker.producer_state import CompletedTxn, ProducerStateTable, producer_batches
from kraft.broker.producer_states import ProducerStates
from kraft.broker.write_txn_markers_handler import end_txn_marker_batch
from kraft.errors import ErrorCode
from kraft.log import txn_index
from kraft.log.config import LogConfig
from kraft.log.segmented_log import SegmentedLog
from kraft.records import build_batch, iter_batches

E = ErrorCode


def txn_batch(pid, epoch, seq, n=1, base_offset=0, transactional=True):
    return producer_batches(build_batch([b"v%d" % i for i in range(n)], base_offset=base_offset, producer_id=pid,
                                        producer_epoch=epoch, base_sequence=seq, transactional=transactional,
                                        timestamp=1000))


def marker(pid, epoch, committed, coord_epoch, offset):
    data = bytearray(end_txn_marker_batch(pid, epoch, committed, coord_epoch, 2000))
    data[0:8] = offset.to_bytes(8, "big")
    return data


def test_marker_batch_has_kafkas_layout():
    (b,) = list(iter_batches(bytes(marker(9, 3, True, 7, 0))))
    assert b.is_control and b.is_transactional and (b.producer_id, b.producer_epoch, b.base_sequence) == (9, 3, -1)
    (r,) = list(b)
    assert bytes(r.key) == b"\x00\x00\x00\x01" and bytes(r.value) == b"\x00\x00\x00\x00\x00\x07"
    (h,) = producer_batches(marker(9, 3, False, 7, 0))
    assert (h.control, h.marker, h.coordinator_epoch) == (True, 0, 7)


def test_transactional_batch_is_accepted_and_opens_a_transaction_at_its_first_offset():
    t = ProducerStateTable()
    h = txn_batch(1, 0, 0, n=3, base_offset=10)
    assert t.check_client_append(h).code == E.NONE
    t.apply(h)
    t.apply(txn_batch(1, 0, 3, n=2, base_offset=20))
    assert t.get(1).txn_first_offset == 10 and t.ongoing() == {1: 10}
    assert t.last_stable_offset(high_watermark=30) == 10


def test_lso_is_the_hw_without_open_transactions_and_never_above_it():
    t = ProducerStateTable()
    assert t.last_stable_offset(7) == 7
    t.apply(txn_batch(1, 0, 0, base_offset=12))
    assert t.last_stable_offset(5) == 5


def test_commit_and_abort_markers_close_transactions_and_report_them():
    t = ProducerStateTable()
    t.apply(txn_batch(1, 0, 0, base_offset=0))
    t.apply(txn_batch(2, 0, 0, base_offset=1))
    t.apply(txn_batch(1, 0, 1, base_offset=2))
    assert t.last_stable_offset(10) == 0
    assert t.apply(producer_batches(marker(1, 0, True, 5, 3))) == [CompletedTxn(1, 0, 3, False, 1)]
    assert t.last_stable_offset(10) == 1  # producer 2 still open
    assert t.apply(producer_batches(marker(2, 0, False, 5, 4))) == [CompletedTxn(2, 1, 4, True, 5)]
    assert t.last_stable_offset(10) == 10 and t.ongoing() == {}
    assert t.get(1).coordinator_epoch == 5
    # a marker for a producer that wrote nothing here closes nothing
    assert t.apply(producer_batches(marker(3, 0, True, 5, 5))) == []


def test_markers_from_an_older_producer_or_coordinator_epoch_are_refused():
    t = ProducerStateTable()
    t.apply(txn_batch(1, 2, 0, base_offset=0))
    t.apply(producer_batches(marker(1, 2, True, 5, 1)))
    assert t.check_marker(1, 1, 5).code == E.INVALID_PRODUCER_EPOCH
    assert t.check_marker(1, 2, 4).code == E.TRANSACTION_COORDINATOR_FENCED
    assert t.check_marker(1, 2, 5).code == E.NONE and t.check_marker(1, 3, 6).code == E.NONE
    assert t.check_marker(99, 0, 0).code == E.NONE  # unknown producer: written anyway


def test_non_transactional_write_inside_a_transaction_is_invalid_txn_state():
    t = ProducerStateTable()
    t.apply(txn_batch(1, 0, 0, base_offset=0))
    assert t.check_client_append(txn_batch(1, 0, 1, transactional=False)).code == E.INVALID_TXN_STATE
    assert t.check_client_append(txn_batch(1, 0, 1)).code == E.NONE
    # sequences still apply to transactional batches
    assert t.check_client_append(txn_batch(1, 0, 5)).code == E.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_clients_may_not_write_control_batches():
    t = ProducerStateTable()
    assert t.check_client_append(producer_batches(marker(1, 0, True, 0, 0))).code == E.INVALID_RECORD


def test_an_abort_with_an_epoch_bump_restarts_sequences():
    t = ProducerStateTable()
    t.apply(txn_batch(1, 0, 0, n=2, base_offset=0))
    t.apply(producer_batches(marker(1, 1, False, 0, 2)))  # the coordinator bumped the epoch on abort
    assert t.get(1).epoch == 1 and t.get(1).last_seq == -1
    assert t.check_client_append(txn_batch(1, 1, 0, base_offset=3)).code == E.NONE


# --- producer state over a real log: index on append, rebuild on load, truncation ------------


def _append(states, plog, data):
    data = bytearray(data)
    plog.log.append(data, assign_offsets=True, leader_epoch=0)
    states.on_appended(plog, data)
    plog.high_watermark = plog.log.end_offset


def _txn(pid, seq, n=2):
    return build_batch([b"x"] * n, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


def test_abort_is_indexed_rebuilt_on_load_and_dropped_by_truncation(tmp_path):
    log = SegmentedLog.open(str(tmp_path / "t-0"), LogConfig())
    plog = SimpleNamespace(topic="t", partition=0, log=log, high_watermark=0)
    states = ProducerStates()
    _append(states, plog, _txn(1, 0))                     # 0-1
    _append(states, plog, _txn(2, 0))                     # 2-3
    write_snapshot(log.directory, states.table(plog))     # snapshot at 4: both open
    _append(states, plog, marker(1, 0, False, 0, 0))      # 4: ABORT 1
    _append(states, plog, _txn(3, 0))                     # 5-6
    assert txn_index.read(log.directory, 0) == [txn_index.AbortedTxn(1, 0, 4, 2)]
    assert states.last_stable_offset(plog) == 2
    assert [(a.producer_id, a.first_offset) for a in states.aborted_transactions(plog, 0, 7)] == [(1, 0)]

    # Lost index (crash): the load from the snapshot at 4 replays the marker and rebuilds it.
    os.unlink(txn_index.path(log.directory, 0))
    table = load_producer_state(log)
    assert txn_index.read(log.directory, 0) == [txn_index.AbortedTxn(1, 0, 4, 2)]
    assert table.ongoing() == {2: 2, 3: 5} and table.last_stable_offset(7) == 2
    # A stale entry past the snapshot (left by a crash) is not duplicated by the rebuild.
    load_producer_state(log)
    assert len(txn_index.read(log.directory, 0)) == 1

    # A truncation below the marker: the entry goes, producer 1's transaction is open again.
    log.truncate_to(4)
    plog.high_watermark = 4
    states.on_truncated(plog)
    assert txn_index.read(log.directory, 0) == []
    assert states.table(plog).ongoing() == {1: 0, 2: 2} and states.last_stable_offset(plog) == 0
    log.close()


def test_lso_stays_below_an_ended_transaction_until_the_hw_covers_its_marker():
    """Kafka's unreplicatedTxns: a marker a leader change could still lose must not let a
    read_committed consumer past the transaction."""
    t = ProducerStateTable()
    t.apply(txn_batch(1, 0, 0, n=2, base_offset=0))   # 0-1
    t.apply(producer_batches(marker(1, 0, True, 0, 2)))  # 2: COMMIT, not replicated yet
    assert t.last_stable_offset(high_watermark=2) == 0
    assert t.last_stable_offset(high_watermark=3) == 3  # the marker is below the HW
    assert t.last_stable_offset(high_watermark=3) == 3


def test_coordinator_writes_are_checked_for_epoch_only_as_kafkas_coordinator_origin():
    """The group coordinator writes a producer's transactional offsets as that producer's batch
    at sequence 0, every time (Kafka's AppendOrigin.COORDINATOR): neither a duplicate nor out of
    order, but a stale epoch is still refused. A client's batch is checked in full."""
    t = ProducerStateTable()
    first = txn_batch(5, 2, 0, base_offset=0)
    assert t.check_client_append(first, coordinator=True).code == E.NONE
    t.apply(first)
    again = txn_batch(5, 2, 0, base_offset=1)
    v = t.check_client_append(again, coordinator=True)
    assert v.code == E.NONE and v.duplicate is None  # appended, not answered as the first one
    assert t.check_client_append(again).duplicate is not None  # a client's retry would be a duplicate
    t.apply(again)
    assert t.check_client_append(txn_batch(5, 2, 7, base_offset=2)).code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert t.check_client_append(txn_batch(5, 2, 7, base_offset=2), coordinator=True).code == E.NONE
    assert t.check_client_append(txn_batch(5, 1, 0, base_offset=2), coordinator=True).code == E.INVALID_PRODUCER_EPOCH
    assert t.ongoing() == {5: 0}
