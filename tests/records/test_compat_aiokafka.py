"""Byte compatibility with aiokafka's RecordBatch v2 classes, both ways: its Cython codec
(``aiokafka.record._crecords``) and its pure-Python one (``aiokafka.record.default_records``).

Our batches decode in theirs with equal fields and a valid CRC; their batches (every codec,
keys, headers, timestamps, transactional) decode in ours and pass ``validate()``; for no
codec, snappy and zstd the bytes are identical to ours for the same logical batch.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.records import Compression, compression

aiokafka_py = pytest.importorskip("aiokafka.record.default_records", reason="aiokafka is not installed")
from aiokafka.record import memory_records as aiokafka_memory  # noqa: E402

from _codec_helpers import hyp, implementations  # noqa: E402

try:
    from aiokafka.record import _crecords as aiokafka_c
except ImportError:  # pragma: no cover - wheels ship the extension
    aiokafka_c = None

FLAVOURS = ["cython", "python"]
CODECS = [c for c in Compression if compression.available(c)]
DETERMINISTIC = [c for c in (Compression.NONE, Compression.SNAPPY, Compression.ZSTD) if c in CODECS]


def classes(flavour):
    if flavour == "cython":
        if aiokafka_c is None:
            pytest.skip("aiokafka's Cython extension is not built")
        return (aiokafka_c.DefaultRecordBatchBuilder, aiokafka_c.DefaultRecordBatch,
                aiokafka_memory._MemoryRecordsCython)
    return (aiokafka_py._DefaultRecordBatchBuilderPy, aiokafka_py._DefaultRecordBatchPy,
            aiokafka_memory._MemoryRecordsPy)


def logical_batch(n=60):
    values = [None if i % 17 == 5 else (b"value-%d " % i) * (1 + i % 9) for i in range(n)]
    keys = [None if i % 4 == 0 else b"key-%d" % (i % 7) for i in range(n)]
    headers = [[("trace", b"%d" % i), ("empty", None)] if i % 3 == 0 else [] for i in range(n)]
    timestamps = [1_700_000_000_000 + (i * 37) % 23 - 11 for i in range(n)]
    return values, keys, headers, timestamps


def aiokafka_build(flavour, values, keys, headers, timestamps, codec_id, transactional=False,
                   producer_id=-1, producer_epoch=-1, base_sequence=-1):
    builder_cls = classes(flavour)[0]
    b = builder_cls(2, codec_id, int(transactional), producer_id, producer_epoch, base_sequence, 1 << 24)
    for i, v in enumerate(values):
        assert b.append(i, timestamps[i], keys[i], v, headers[i]) is not None
    return bytes(b.build())


def their_records(batch):
    return [(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in batch]


def our_records(batch):
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]


def expected_records(values, keys, headers, timestamps, base_offset=0):
    return [(base_offset + i, timestamps[i], keys[i], values[i], tuple(headers[i]))
            for i in range(len(values))]


# --- ours -> aiokafka -----------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("codec_id", CODECS)
def test_our_batch_decodes_in_aiokafka(codec, flavour, codec_id):
    batch_cls = classes(flavour)[1]
    values, keys, headers, ts = logical_batch()
    raw = codec.build_batch(values, keys, headers, ts, base_offset=1000, partition_leader_epoch=3,
                            compression=codec_id, producer_id=77, producer_epoch=2, base_sequence=500)
    theirs = batch_cls(raw)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec_id
    assert (theirs.base_offset, theirs.next_offset, theirs.last_offset_delta) == (1000, 1060, 59)
    assert (theirs.first_timestamp, theirs.max_timestamp) == (ts[0], max(ts))
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (77, 2, 500)
    assert their_records(theirs) == expected_records(values, keys, headers, ts, 1000)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_our_flags_are_understood_by_aiokafka(codec, flavour):
    batch_cls = classes(flavour)[1]
    raw = codec.build_batch([b"a", b"b"], timestamps=[5, 9], log_append_time=True,
                            transactional=True, producer_id=1, producer_epoch=0, base_sequence=0)
    theirs = batch_cls(raw)
    assert theirs.validate_crc()
    assert theirs.timestamp_type == 1 and theirs.is_transactional and not theirs.is_control_batch
    assert [r.timestamp for r in theirs] == [9, 9]
    ctrl = batch_cls(codec.build_control_batch(3, b"\x00\x00" + bytes(8) + b"\x00", timestamp=1))
    assert ctrl.validate_crc() and ctrl.is_control_batch


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_our_batches_through_aiokafka_memory_records(codec, flavour):
    memory_cls = classes(flavour)[2]
    parts = [codec.build_batch([b"m%d" % i] * (i + 1), timestamp=i, base_offset=i * 10,
                               compression=CODECS[i % len(CODECS)]) for i in range(6)]
    records = memory_cls(b"".join(parts))
    seen = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        seen.append((batch.base_offset, [r.value for r in batch]))
    assert seen == [(i * 10, [b"m%d" % i] * (i + 1)) for i in range(6)]


# --- aiokafka -> ours ---------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("codec_id", CODECS)
def test_aiokafka_batch_decodes_in_ours(codec, flavour, codec_id):
    values, keys, headers, ts = logical_batch()
    raw = aiokafka_build(flavour, values, keys, headers, ts, codec_id, transactional=True,
                         producer_id=5, producer_epoch=1, base_sequence=10)
    batch = codec.RecordBatch(raw)
    batch.validate()
    assert batch.compression == codec_id
    assert batch.is_transactional and (batch.producer_id, batch.base_sequence) == (5, 10)
    assert our_records(batch) == expected_records(values, keys, headers, ts)
    assert batch.values() == values
    d = batch.decode()
    assert d.timestamps.tolist() == ts
    assert [d.headers(i) for i in range(len(d))] == [tuple(h) for h in headers]
    assert codec.scan_batches(raw).error is None


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("codec_id", DETERMINISTIC)
def test_same_logical_batch_same_bytes(codec, flavour, codec_id):
    values, keys, headers, ts = logical_batch()
    theirs = aiokafka_build(flavour, values, keys, headers, ts, codec_id)
    assert codec.build_batch(values, keys, headers, ts, compression=codec_id) == theirs
    b = codec.RecordBatchBuilder(compression=codec_id)
    for i in range(len(values)):
        b.append(values[i], key=keys[i], headers=headers[i], timestamp=ts[i])
    assert b.build() == theirs


def test_aiokafka_cython_and_python_agree_with_us_on_a_large_batch(codec):
    values = [bytes([i % 251]) * 100 for i in range(1000)]
    ts = [1000] * 1000
    ours = codec.build_batch(values, timestamp=1000)
    for flavour in FLAVOURS:
        assert aiokafka_build(flavour, values, [None] * 1000, [[]] * 1000, ts, 0) == ours


# --- properties ------------------------------------------------------------------------------------

record = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=10)),
    st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8))), max_size=2),
    st.integers(0, 2**41),
)


@hyp(60)
@given(st.lists(record, min_size=1, max_size=20), st.sampled_from(CODECS),
       st.integers(0, 2**62), st.sampled_from(FLAVOURS))
def test_property_ours_to_aiokafka(codec, records, codec_id, base_offset, flavour):
    values, keys, headers, ts = (list(x) for x in zip(*records))
    raw = codec.build_batch(values, keys, headers, ts, base_offset=base_offset, compression=codec_id)
    theirs = classes(flavour)[1](raw)
    assert theirs.validate_crc()
    assert their_records(theirs) == expected_records(values, keys, headers, ts, base_offset)


@hyp(60)
@given(st.lists(record, min_size=1, max_size=20), st.sampled_from(CODECS), st.sampled_from(FLAVOURS))
def test_property_aiokafka_to_ours(records, codec_id, flavour):
    values, keys, headers, ts = (list(x) for x in zip(*records))
    raw = aiokafka_build(flavour, values, keys, headers, ts, codec_id)
    for impl in implementations():
        batch = impl.RecordBatch(raw)
        batch.validate()
        assert our_records(batch) == expected_records(values, keys, headers, ts)
