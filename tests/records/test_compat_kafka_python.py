"""Byte compatibility with kafka-python's RecordBatch v2 classes, both ways.

Our batches decode in ``kafka.record.default_records.DefaultRecordBatch`` and
``kafka.record.memory_records.MemoryRecords`` with equal fields and a valid CRC; batches
built by ``DefaultRecordBatchBuilder`` and ``MemoryRecordsBuilder`` (every codec) decode in
ours and pass ``validate()``; where kafka-python's output is deterministic (no codec,
snappy, zstd) the bytes are identical to ours for the same logical batch.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.records import Compression, compression

kafka_records = pytest.importorskip("kafka.record.default_records",
                                    reason="kafka-python is not installed")
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder  # noqa: E402

from _codec_helpers import hyp, implementations  # noqa: E402

KBuilder = kafka_records.DefaultRecordBatchBuilder
KBatch = kafka_records.DefaultRecordBatch
CODECS = [c for c in Compression if compression.available(c)]
# kafka-python's own gzip (level, mtime) and lz4 (frame flags) choices differ from ours.
DETERMINISTIC = [c for c in (Compression.NONE, Compression.SNAPPY, Compression.ZSTD) if c in CODECS]


def logical_batch(n=60):
    """values, keys, headers, timestamps: compressible, with nulls, headers, time going back."""
    values = [None if i % 17 == 5 else (b"value-%d " % i) * (1 + i % 9) for i in range(n)]
    keys = [None if i % 4 == 0 else b"key-%d" % (i % 7) for i in range(n)]
    headers = [[("trace", b"%d" % i), ("empty", None)] if i % 3 == 0 else [] for i in range(n)]
    timestamps = [1_700_000_000_000 + (i * 37) % 23 - 11 for i in range(n)]
    return values, keys, headers, timestamps


def kafka_python_build(values, keys, headers, timestamps, codec_id, **producer):
    b = KBuilder(magic=2, compression_type=codec_id, is_transactional=producer.get("transactional", False),
                 producer_id=producer.get("producer_id", -1),
                 producer_epoch=producer.get("producer_epoch", -1),
                 base_sequence=producer.get("base_sequence", -1), batch_size=1 << 24)
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


# --- ours -> kafka-python ---------------------------------------------------------------------


@pytest.mark.parametrize("codec_id", CODECS)
def test_our_batch_decodes_in_kafka_python(codec, codec_id):
    values, keys, headers, ts = logical_batch()
    raw = codec.build_batch(values, keys, headers, ts, base_offset=1000, partition_leader_epoch=3,
                            compression=codec_id, producer_id=77, producer_epoch=2,
                            base_sequence=500)
    theirs = KBatch(raw)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec_id
    assert (theirs.base_offset, theirs.leader_epoch, theirs.records_count, theirs.last_offset) == (
        1000, 3, 60, 1059)
    assert (theirs.first_timestamp, theirs.max_timestamp) == (ts[0], max(ts))
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (77, 2, 500)
    assert their_records(theirs) == expected_records(values, keys, headers, ts, 1000)


def test_our_flags_are_understood_by_kafka_python(codec):
    raw = codec.build_batch([b"a", b"b"], timestamps=[5, 9], log_append_time=True,
                            transactional=True, producer_id=1, producer_epoch=0, base_sequence=0)
    theirs = KBatch(raw)
    assert theirs.validate_crc()
    assert theirs.timestamp_type == 1 and theirs.is_transactional and not theirs.is_control_batch
    assert [r.timestamp for r in theirs] == [9, 9]  # LogAppendTime: every record gets MaxTimestamp


def test_our_control_batch_in_kafka_python(codec):
    raw = codec.build_control_batch(2, b"\x00\x00\x00\x00\x00\x01\x01\x01\x00", timestamp=1)
    theirs = KBatch(raw)
    assert theirs.validate_crc() and theirs.is_control_batch
    assert [(r.key, r.value) for r in theirs] == [(b"\x00\x00\x00\x02",
                                                   b"\x00\x00\x00\x00\x00\x01\x01\x01\x00")]


def test_our_batches_through_kafka_python_memory_records(codec):
    parts = [codec.build_batch([b"m%d" % i] * (i + 1), timestamp=i, base_offset=i * 10,
                               compression=CODECS[i % len(CODECS)]) for i in range(6)]
    records = MemoryRecords(b"".join(parts))
    seen = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        seen.append((batch.base_offset, [r.value for r in batch]))
    assert seen == [(i * 10, [b"m%d" % i] * (i + 1)) for i in range(6)]


# --- kafka-python -> ours -----------------------------------------------------------------


@pytest.mark.parametrize("codec_id", CODECS)
def test_kafka_python_batch_decodes_in_ours(codec, codec_id):
    values, keys, headers, ts = logical_batch()
    raw = kafka_python_build(values, keys, headers, ts, codec_id, transactional=True,
                             producer_id=5, producer_epoch=1, base_sequence=10)
    batch = codec.RecordBatch(raw)
    batch.validate()
    assert batch.compression == codec_id  # they compressed it (it got smaller)
    assert batch.is_transactional and (batch.producer_id, batch.base_sequence) == (5, 10)
    assert our_records(batch) == expected_records(values, keys, headers, ts)
    assert batch.values() == values
    d = batch.decode()
    assert [d.key(i) for i in range(len(d))] == keys
    assert d.timestamps.tolist() == ts
    assert codec.scan_batches(raw).error is None


@pytest.mark.parametrize("codec_id", CODECS)
def test_kafka_python_memory_records_builder_decodes_in_ours(codec, codec_id):
    b = MemoryRecordsBuilder(magic=2, compression_type=codec_id, batch_size=1 << 20, offset=0)
    for i in range(40):
        assert b.append(1000 + i, b"k%d" % i, b"payload %d " % i * 10, [("n", b"%d" % i)]) is not None
    b.close()
    raw = bytes(b.buffer())
    [batch] = list(codec.iter_batches(raw, validate=True))
    assert [(r.offset, r.timestamp, r.key, r.headers) for r in batch] == [
        (i, 1000 + i, b"k%d" % i, (("n", b"%d" % i),)) for i in range(40)]
    assert batch.values() == [b"payload %d " % i * 10 for i in range(40)]


@pytest.mark.parametrize("codec_id", DETERMINISTIC)
def test_same_logical_batch_same_bytes(codec, codec_id):
    values, keys, headers, ts = logical_batch()
    theirs = kafka_python_build(values, keys, headers, ts, codec_id)
    # kafka-python writes PartitionLeaderEpoch 0 and BaseOffset 0 on produce
    ours = codec.build_batch(values, keys, headers, ts, partition_leader_epoch=0, compression=codec_id)
    assert ours == theirs


@pytest.mark.parametrize("codec_id", DETERMINISTIC)
def test_same_bytes_from_our_incremental_builder(codec, codec_id):
    values, keys, headers, ts = logical_batch(25)
    b = codec.RecordBatchBuilder(partition_leader_epoch=0, compression=codec_id)
    for i in range(25):
        b.append(values[i], key=keys[i], headers=headers[i], timestamp=ts[i])
    assert b.build() == kafka_python_build(values, keys, headers, ts, codec_id)


# --- property: any batch we build decodes the same in kafka-python -------------------------

record = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=10)),
    st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8))), max_size=2),
    st.integers(0, 2**41),
)


@hyp(60)
@given(st.lists(record, min_size=1, max_size=20), st.sampled_from(CODECS),
       st.integers(0, 2**62), st.integers(-1, 2**31 - 1))
def test_property_ours_to_kafka_python(codec, records, codec_id, base_offset, epoch):
    values, keys, headers, ts = (list(x) for x in zip(*records))
    raw = codec.build_batch(values, keys, headers, ts, base_offset=base_offset,
                            partition_leader_epoch=epoch, compression=codec_id)
    theirs = KBatch(raw)
    assert theirs.validate_crc()
    assert their_records(theirs) == expected_records(values, keys, headers, ts, base_offset)


@hyp(60)
@given(st.lists(record, min_size=1, max_size=20), st.sampled_from(CODECS))
def test_property_kafka_python_to_ours(records, codec_id):
    values, keys, headers, ts = (list(x) for x in zip(*records))
    raw = kafka_python_build(values, keys, headers, ts, codec_id)
    for impl in implementations():
        batch = impl.RecordBatch(raw)
        batch.validate()
        assert our_records(batch) == expected_records(values, keys, headers, ts)
