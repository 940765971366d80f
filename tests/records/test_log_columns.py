"""``log_columns``: the native column builder and its pure twin give the same buffers, and
those buffers hold exactly the records that were written (nulls, headers, codecs, append
time, offset ranges); damage inside a CRC-valid batch is an error naming the batch."""

from __future__ import annotations

import random

import numpy as np
import pytest

import kraft.records
from kraft.errors import CorruptRecordError
from kraft.records import Compression

IMPLS = [kraft.records.implementation("python"), kraft.records.implementation("native")]


def _segment(seed=7, batches=12):
    rng = random.Random(seed)
    buf, expected, positions, base = bytearray(), [], [], 100
    for b in range(batches):
        n = rng.randint(1, 9)
        keys = [None if rng.random() < 0.2 else bytes(rng.randrange(256) for _ in range(rng.randint(0, 5)))
                for _ in range(n)]
        values = [None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 40)) for _ in range(n)]
        headers = [tuple((f"h{j}é", None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 4)))
                         for j in range(rng.choice([0, 0, 1, 3]))) for _ in range(n)]
        codec = [Compression.NONE, Compression.GZIP, Compression.NONE][b % 3]
        append_time = b % 4 == 3
        batch = kraft.records.build_batch(values, keys=keys, headers=headers, base_offset=base,
                                          timestamp=5000 + b, compression=codec, partition_leader_epoch=b,
                                          producer_id=40 + b, producer_epoch=0, base_sequence=0,
                                          log_append_time=append_time)
        positions.append(len(buf))
        buf += batch
        rb = kraft.records.RecordBatch(bytes(batch), 0)
        for i, r in enumerate(rb):
            expected.append((r.offset, r.timestamp, int(append_time), b, 40 + b, int(codec), keys[i], values[i],
                             headers[i]))
        base += n
    return bytes(buf), np.array(positions, np.int64), expected


def _binary(valid, offsets, data, i):
    if not (valid[i >> 3] >> (i & 7)) & 1:
        return None
    return bytes(data[offsets[i]:offsets[i + 1]])


def rows(cols):
    (offsets, ts, ts_types, epochs, producers, codecs, kv, ko, kd, vv, vo, vd, ho, hko, hkd, hvv, hvo, hvd) = cols
    out = []
    for i in range(len(offsets)):
        headers = tuple((bytes(hkd[hko[j]:hko[j + 1]]).decode(), _binary(hvv, hvo, hvd, j))
                        for j in range(ho[i], ho[i + 1]))
        out.append((int(offsets[i]), int(ts[i]), int(ts_types[i]), int(epochs[i]), int(producers[i]),
                    int(codecs[i]), _binary(kv, ko, kd, i), _binary(vv, vo, vd, i), headers))
    return out


@pytest.mark.parametrize("impl", IMPLS, ids=["python", "native"])
def test_columns_hold_every_record_as_written(impl):
    buf, positions, expected = _segment()
    assert rows(impl.log_columns(buf, positions, 0, 1 << 62)) == expected


@pytest.mark.parametrize("impl", IMPLS, ids=["python", "native"])
def test_offset_range_keeps_only_the_records_inside_it(impl):
    buf, positions, expected = _segment()
    lo, hi = expected[5][0], expected[-7][0]
    assert rows(impl.log_columns(buf, positions, lo, hi)) == [e for e in expected if lo <= e[0] < hi]
    empty = impl.log_columns(buf, positions, 0, 0)
    assert len(empty[0]) == 0 and list(empty[7]) == [0] and list(empty[12]) == [0]


def test_native_and_pure_buffers_are_identical_on_random_segments():
    for seed in range(20):
        buf, positions, _ = _segment(seed, batches=8)
        a, b = (impl.log_columns(buf, positions, 0, 1 << 62) for impl in IMPLS)
        for x, y in zip(a, b):
            assert x.dtype == y.dtype and np.array_equal(x, y), seed


@pytest.mark.parametrize("impl", IMPLS, ids=["python", "native"])
def test_a_bad_record_inside_a_valid_batch_names_the_batch(impl):
    good = kraft.records.build_batch([b"a", b"b"])
    bad = bytearray(kraft.records.build_batch([b"xyz"], base_offset=2))
    bad[61] = 0x7F  # the record's length varint now runs past the block (CRC is not re-checked here)
    buf = good + bytes(bad)
    with pytest.raises(CorruptRecordError, match=f"position {len(good)}"):
        impl.log_columns(buf, np.array([0, len(good)], np.int64), 0, 1 << 62)
