"""The aborted-transaction index (`.txnindex`, Kafka's TransactionIndex format): 34-byte
entries, a torn tail ignored and cut on the next append, truncation by marker offset, and
Kafka's collectAbortedTransactions range rule."""

from __future__ import annotations

import os
import struct

from kraft.log import txn_index
from kraft.log.txn_index import AbortedTxn


def test_entry_is_kafkas_34_byte_layout():
    data = txn_index.encode([AbortedTxn(7, 10, 20, 21)])
    assert len(data) == 34 == txn_index.ENTRY_SIZE
    assert data == struct.pack(">hqqqq", 0, 7, 10, 20, 21)
    assert txn_index.decode(data) == [AbortedTxn(7, 10, 20, 21)]


def test_file_named_for_its_segment_and_torn_tail_is_ignored_then_cut(tmp_path):
    d = str(tmp_path)
    txn_index.append(d, 100, AbortedTxn(1, 100, 105, 106))
    assert os.path.basename(txn_index.path(d, 100)) == "00000000000000000100.txnindex"
    with open(txn_index.path(d, 100), "ab") as f:
        f.write(b"\x00\x00\x00")  # a crash mid-entry
    assert txn_index.read(d, 100) == [AbortedTxn(1, 100, 105, 106)]
    txn_index.append(d, 100, AbortedTxn(2, 101, 107, 108))
    assert txn_index.read(d, 100) == [AbortedTxn(1, 100, 105, 106), AbortedTxn(2, 101, 107, 108)]
    assert os.path.getsize(txn_index.path(d, 100)) == 68


def test_truncate_from_drops_entries_whose_marker_is_at_or_after_the_offset(tmp_path):
    d = str(tmp_path)
    txn_index.append(d, 0, AbortedTxn(1, 0, 5, 6))
    txn_index.append(d, 0, AbortedTxn(2, 3, 9, 10))
    txn_index.append(d, 50, AbortedTxn(3, 50, 55, 56))
    txn_index.truncate_from(d, 9)
    assert txn_index.read(d, 0) == [AbortedTxn(1, 0, 5, 6)]
    assert txn_index.base_offsets(d) == [0]  # the emptied file is gone


def test_collect_returns_transactions_overlapping_the_range_across_segments(tmp_path):
    d = str(tmp_path)
    txn_index.append(d, 0, AbortedTxn(1, 0, 5, 6))      # ends before the fetch
    txn_index.append(d, 0, AbortedTxn(2, 3, 12, 13))    # spans the fetch start
    txn_index.append(d, 20, AbortedTxn(3, 18, 25, 26))  # begun in range, marker in a later segment
    txn_index.append(d, 20, AbortedTxn(4, 40, 45, 46))  # begins after the range
    got = txn_index.collect(d, txn_index.base_offsets(d), 10, 30)
    assert [(a.producer_id, a.first_offset) for a in got] == [(2, 3), (3, 18)]
