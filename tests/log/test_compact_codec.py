"""The native compaction primitives (``kraft._native._compact``) against their pure-Python twin
(``kraft.log._pure_compact``): the same key hashes, record scan, map answers and rewritten
records for any records block (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from _log_helpers import NO_EXTENSIONS
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft import records
from kraft.log import _pure_compact as pure
from kraft.log import compact_codec

native = pytest.importorskip("kraft._native._compact") if not NO_EXTENSIONS else None
pytestmark = pytest.mark.skipif(NO_EXTENSIONS, reason="compares the native module with the pure one")


def test_the_native_module_is_the_one_in_use():
    assert compact_codec.IMPLEMENTATION == "native"


keys = st.one_of(st.none(), st.binary(max_size=40))
values = st.one_of(st.none(), st.binary(max_size=60))
rows = st.lists(st.tuples(keys, values, st.integers(-10**6, 10**6)), min_size=1, max_size=30)


def _block(batch: bytes) -> bytes:
    return batch[61:]


@settings(max_examples=150, deadline=None)
@given(rows, st.integers(0, 10**12), st.integers(0, 10**12))
def test_scan_and_rebuild_agree(rs, base_offset, base_ts):
    batch = records.build_batch([v for _, v, _ in rs], keys=[k for k, _, _ in rs],
                                timestamps=[base_ts + d for _, _, d in rs], base_offset=base_offset)
    block = _block(batch)
    a = native.scan_records(block, len(rs), base_offset, base_ts)
    b = pure.scan_records(block, len(rs), base_offset, base_ts)
    for x, y in zip(a, b):
        assert np.array_equal(x, y)
    offsets, _, _, ts, flags, _, _ = a
    assert list(offsets) == [base_offset + i for i in range(len(rs))]
    assert list(flags & 1) == [k is not None for k, _, _ in rs]
    assert list(flags & 2) == [2 if v is not None else 0 for _, v, _ in rs]
    keep = np.arange(0, len(rs), 2, dtype=np.int64)
    new_base = base_ts - 5
    got = native.rebuild_records(block, a[5], a[6], ts, keep, new_base)
    assert got == pure.rebuild_records(block, a[5], a[6], ts, keep, new_base)
    again = native.scan_records(got, len(keep), base_offset, new_base)
    assert list(again[3]) == [int(ts[i]) for i in keep]  # same timestamps, new base
    assert list(again[0]) == [int(offsets[i]) for i in keep]  # same offsets


@given(st.binary(max_size=100))
def test_key_hash_agrees(key):
    assert native.key_hash(key) == pure.key_hash(key)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 10**9)), max_size=200), st.integers(1, 40))
def test_offset_maps_agree_including_when_full(puts, entries):
    n = native.OffsetMap(24 * entries)
    p = pure.OffsetMap(24 * entries)
    ks = [native.key_hash(str(k).encode()) for k, _ in puts]
    h1 = np.array([k[0] for k in ks], np.uint64)
    h2 = np.array([k[1] for k in ks], np.uint64)
    offs = np.array([o for _, o in puts], np.int64)
    flags = np.ones(len(puts), np.uint8)
    assert n.put_many(h1, h2, offs, flags) == p.put_many(h1, h2, offs, flags)
    assert n.size == p.size <= n.capacity and n.latest_offset == p.latest_offset
    assert np.array_equal(n.get_many(h1, h2, flags), p.get_many(h1, h2, flags))


def test_malformed_blocks_raise_in_both():
    batch = records.build_batch([b"v"] * 3, keys=[b"k"] * 3, timestamp=1)
    block = _block(batch)[:-3]
    for impl in (native, pure):
        with pytest.raises(ValueError):
            impl.scan_records(block, 3, 0, 0)
