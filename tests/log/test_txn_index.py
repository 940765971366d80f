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


def test_compaction_swap_keeps_the_aborted_transactions_of_the_replaced_segments(tmp_path):
    from _compaction_helpers import append_keyed, open_compact_log

    from kraft.log.cleaner import clean_log
    from kraft.log.compact_codec import OffsetMap

    log = open_compact_log(tmp_path / "c-0", segment_bytes=1024)
    append_keyed(log, [(b"k%d" % (i % 5), b"v" * 40) for i in range(120)])
    assert len(log.segments) >= 4
    bases = [s.base_offset for s in log.segments]
    d = log.directory
    txn_index.append(d, bases[0], AbortedTxn(1, 1, 3, 4))
    txn_index.append(d, bases[1], AbortedTxn(2, bases[1], bases[1] + 2, bases[1] + 3))
    # Groups up to 1 MiB: the small segments are cleaned into one.
    clean_log(log, 0, bases[-1], OffsetMap(1 << 20), now_ms=10_000, delete_retention_ms=1_000,
              segment_bytes=1 << 20)
    kept = [s.base_offset for s in log.segments]
    assert kept != bases  # segments were merged
    entries = [e for b in txn_index.base_offsets(d) for e in txn_index.read(d, b)]
    assert [e.producer_id for e in entries] == [1, 2]
    assert set(txn_index.base_offsets(d)) <= set(kept)  # no index left behind for a replaced segment
    log.close()


def test_retention_and_delete_records_take_a_segments_index_with_it(tmp_path):
    from _compaction_helpers import append_keyed, open_compact_log

    log = open_compact_log(tmp_path / "r-0", segment_bytes=1024)
    append_keyed(log, [(b"k%d" % i, b"v" * 40) for i in range(60)])
    bases = [s.base_offset for s in log.segments]
    for b in bases[:3]:
        txn_index.append(log.directory, b, AbortedTxn(1, b, b + 1, b + 2))
    log.delete_below(bases[2])  # DeleteRecords / retention: segments wholly below go
    assert txn_index.base_offsets(log.directory) == [bases[2]]
    log.close()
