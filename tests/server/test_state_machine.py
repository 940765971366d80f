"""CommittedRecordsListener's digest: equal on nodes that committed the same batches, and
different when any part of a batch differs (a record's bytes, its offsets, its epoch)."""

from __future__ import annotations

import pytest

from kraft import records
from kraft.server.state_machine import CommittedRecordsListener


def batches(values_per_batch, epoch=1, first=0):
    out = []
    for values in values_per_batch:
        buf = bytearray(records.build_batch(values))
        records.assign_offsets(buf, first, epoch)
        out.append(records.RecordBatch(bytes(buf)))
        first += len(values)
    return out


def digest_of(bs):
    lst = CommittedRecordsListener()
    lst.handle_commit(bs)
    return lst.digest, lst.records, lst.next_offset


BASE = [[b"a" * 40, b"b"], [b"c" * 300], [b"d", b"e", b"f"]]


def test_same_batches_same_digest_in_any_split():
    bs = batches(BASE)  # built once: build_batch stamps the wall clock, which the digest covers
    whole = CommittedRecordsListener()
    whole.handle_commit(bs)
    split = CommittedRecordsListener()
    split.handle_commit(bs[:1])
    split.handle_commit(bs[1:])
    assert whole.digest == split.digest and whole.records == split.records == 6 and whole.next_offset == 6


@pytest.mark.parametrize("change", ["one value byte", "value length", "epoch", "record count"])
def test_any_difference_changes_the_digest(change):
    other = [list(v) for v in BASE]
    epoch = 1
    if change == "one value byte":
        other[1][0] = b"c" * 299 + b"C"
    elif change == "value length":
        other[1][0] = b"c" * 301
    elif change == "epoch":
        epoch = 2
    else:
        other[2] = [b"d", b"e"]
    assert digest_of(batches(other, epoch))[0] != digest_of(batches(BASE))[0]


def test_a_gap_stops_the_listener():
    lst = CommittedRecordsListener()
    bs = batches(BASE)
    with pytest.raises(RuntimeError, match="commit gap"):
        lst.handle_commit([bs[0], bs[2]])
