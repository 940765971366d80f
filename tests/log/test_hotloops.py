"""The native hot loops (``kraft._native._log``) and their pure twin give identical results
on the same inputs, and both match straightforward reference computations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft import records
from kraft.log import IMPLEMENTATION, hotloops
from kraft.log import _pure_log as pure

from _log_helpers import NO_EXTENSIONS, batch_for

try:
    native = hotloops.implementation("native")
except ImportError:  # pragma: no cover - only when run with KRAFT_NO_EXTENSIONS and no build
    native = None

IMPLS = [pure] + ([native] if native is not None else [])
needs_native = pytest.mark.skipif(native is None, reason="native extension not built")


def test_selected_implementation_matches_environment():
    assert IMPLEMENTATION == ("python" if NO_EXTENSIONS else "native")


def _segment(counts, size=30):
    data, offset = b"", 0
    for c in counts:
        data += batch_for(offset, c, size)
        offset += c
    return data


segments = st.lists(st.integers(1, 5), min_size=0, max_size=12).map(_segment)


@needs_native
@settings(max_examples=200, deadline=None)
@given(segments, st.integers(-1, 40), st.integers(0, 50))
def test_find_batch_same_in_both(data, target, cut):
    buf = data[: max(0, len(data) - cut)]
    assert native.find_batch(buf, 0, target) == pure.find_batch(buf, 0, target)


@settings(max_examples=100, deadline=None)
@given(segments, st.integers(0, 40))
def test_find_batch_returns_first_batch_reaching_target(data, target):
    for impl in IMPLS:
        status, pos = impl.find_batch(data, 0, target)
        batches = list(records.iter_batches(data))
        expect = next((b for b in batches if b.last_offset >= target), None)
        if expect is None:
            assert (status, pos) == (impl.NOT_FOUND, len(data))
        else:
            assert (status, pos) == (impl.FOUND, expect.position)


def test_find_batch_reports_impossible_length():
    bad = bytearray(batch_for(0, 1))
    bad[8:12] = (5).to_bytes(4, "big")
    for impl in IMPLS:
        assert impl.find_batch(bytes(bad), 0, 0) == (impl.CORRUPT, 0)


@needs_native
@settings(max_examples=200, deadline=None)
@given(segments, st.integers(0, 600), st.integers(0, 50))
def test_whole_batches_same_in_both(data, limit, cut):
    buf = data[: max(0, len(data) - cut)]
    assert native.whole_batches(buf, 0, limit) == pure.whole_batches(buf, 0, limit)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-1000, 1000), unique=True, max_size=40).map(sorted), st.integers(-1100, 1100))
def test_floor_index_is_bisect(keys, target):
    for dtype in (np.int32, np.int64):
        arr = np.array(keys + [0] * 3, dtype)  # spare capacity past n must be ignored
        expect = max((i for i, k in enumerate(keys) if k <= target), default=-1)
        for impl in IMPLS:
            assert impl.floor_index(arr, len(keys), target) == expect


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 50), st.integers(-3, 5000)), max_size=20), st.integers(0, 6000))
def test_check_offset_index_same_in_both(entries, log_size):
    rel = np.array([e[0] for e in entries], np.int32)
    pos = np.array([e[1] for e in entries], np.int32)
    results = {impl.check_offset_index(rel, pos, len(rel), log_size) for impl in IMPLS}
    assert len(results) == 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 50), st.integers(-3, 60)), max_size=20), st.integers(0, 60))
def test_check_time_index_same_in_both(entries, max_rel):
    ts = np.array([e[0] for e in entries], np.int64)
    rel = np.array([e[1] for e in entries], np.int32)
    results = {impl.check_time_index(ts, rel, len(ts), max_rel) for impl in IMPLS}
    assert len(results) == 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(-1, 100), st.integers(1, 4)), max_size=30),
       st.integers(0, 5000), st.integers(0, 3))
def test_index_builder_same_in_both_and_in_pieces(batches, interval, split):
    sizes = np.array([b[0] for b in batches], np.int64)
    positions = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if batches else np.empty(0, np.int64)
    last = np.cumsum([b[2] for b in batches]).astype(np.int64) + 99 if batches else np.empty(0, np.int64)
    ts = np.array([b[1] for b in batches], np.int64)
    outs = []
    for impl in IMPLS:
        whole = impl.IndexBuilder(100, interval).add(positions, last, ts, sizes)
        b = impl.IndexBuilder(100, interval)
        k = min(split, len(batches))
        parts = [b.add(positions[:k], last[:k], ts[:k], sizes[:k]),
                 b.add(positions[k:], last[k:], ts[k:], sizes[k:])]
        pieced = [np.concatenate([p[i] for p in parts]) for i in range(4)]
        assert all(np.array_equal(x, y) for x, y in zip(whole, pieced))
        outs.append([x.tolist() for x in whole])
    assert all(o == outs[0] for o in outs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3), st.integers(-1, 4)), max_size=12),
       st.integers(-1, 3), st.integers(-1, 4))
def test_order_violation_same_in_both_and_correct(rows, expected_first, previous_epoch):
    base, last, epochs, offset = [], [], [], 0
    for gap, count, epoch in rows:
        offset += gap if gap < 3 else 0
        base.append(offset)
        last.append(offset + count - 1)
        epochs.append(epoch)
        offset += count
    args = (np.array(base, np.int64), np.array(last, np.int64), np.array(epochs, np.int32),
            expected_first, previous_epoch)
    results = {impl.order_violation(*args) for impl in IMPLS}
    assert len(results) == 1
    i, kind = results.pop()
    expect, epoch = expected_first, previous_epoch
    for j in range(len(base)):  # the reference: first broken rule, offsets before epochs
        if (j > 0 or expected_first >= 0) and base[j] != expect:
            assert (i, kind) == (j, 1)
            break
        if epochs[j] < epoch:
            assert (i, kind) == (j, 2)
            break
        epoch, expect = epochs[j], last[j] + 1
    else:
        assert (i, kind) == (-1, 0)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.integers(-1, 100), st.integers(1, 4)), max_size=30),
       st.integers(0, 5000))
def test_index_builder_one_batch_at_a_time_is_add(batches, interval):
    """``add_one`` (an append of one batch, no arrays) leaves the builder where ``add`` of the
    same batches does and yields the same entries, in both implementations."""
    sizes = [b[0] for b in batches]
    positions = [sum(sizes[:i]) for i in range(len(batches))]
    last = [99 + sum(b[2] for b in batches[: i + 1]) for i in range(len(batches))]
    ts = [b[1] for b in batches]
    for impl in IMPLS:
        whole = impl.IndexBuilder(100, interval).add(*(np.array(x, np.int64) for x in (positions, last, ts, sizes)))
        one = impl.IndexBuilder(100, interval)
        rel, pos, tts, trel = [], [], [], []
        for p, lo, t, s in zip(positions, last, ts, sizes):
            entry = one.add_one(p, lo, t, s)
            if entry is not None:
                rel.append(entry[0])
                pos.append(entry[1])
                if entry[2] is not None:
                    tts.append(entry[2])
                    trel.append(entry[3])
        assert [rel, pos, tts, trel] == [x.tolist() for x in whole]
        ref = impl.IndexBuilder(100, interval)
        ref.add(*(np.array(x, np.int64) for x in (positions, last, ts, sizes)))
        assert ((one.bytes_since_entry, one.max_timestamp, one.offset_of_max_timestamp, one.last_time_entry)
                == (ref.bytes_since_entry, ref.max_timestamp, ref.offset_of_max_timestamp, ref.last_time_entry))
