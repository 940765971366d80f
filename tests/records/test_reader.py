"""RecordBatch reader: header properties, lazy record iteration, ``values()``, ``decode()``
and DecodedBatch, LogAppendTime, and readers over every kind of buffer. Batches are written
with the independent writer in _codec_helpers where the exact bytes matter."""

import mmap
import struct

import crc32c as crc32c_pkg
import numpy as np
import pytest

from kraft.errors import CorruptRecordError
from kraft.records import Compression, DecodedBatch, compression

from _codec_helpers import HEADER_SIZE, patch, raw_batch, raw_record

CODECS = [c for c in Compression if compression.available(c)]


def sample_records():
    return [
        (0, 0, None, b"first", ()),
        (1, -3, b"key", None, (("h1", b"v1"), ("h2", None))),
        (2, 250, b"", b"", ()),
        (3, 2**33, b"k" * 300, b"v" * 5000, (("x" * 130, b"y" * 200),)),
    ]


def sample_batch(**kwargs) -> bytes:
    records = b"".join(raw_record(*r) for r in sample_records())
    defaults = dict(base_offset=1000, epoch=7, base_timestamp=10_000, max_timestamp=10_000 + 2**33)
    defaults.update(kwargs)
    return raw_batch(records, 4, **defaults)


# --- header ---------------------------------------------------------------------------------


def test_every_header_property(codec):
    raw = raw_batch(raw_record(0, 0, None, b"v") + raw_record(5, 0, None, b"w"), 2,
                    base_offset=2**40 + 3, epoch=-2**31, attributes=0x7F & ~0x07,
                    last_offset_delta=5, base_timestamp=-12, max_timestamp=2**50,
                    producer_id=2**63 - 1, producer_epoch=-32768, base_sequence=2**31 - 1)
    b = codec.RecordBatch(raw)
    assert b.position == 0
    assert b.base_offset == 2**40 + 3
    assert b.length == len(raw) - 12
    assert b.size == len(raw)
    assert b.partition_leader_epoch == -2**31
    assert b.magic == 2
    assert b.crc == crc32c_pkg.crc32c(raw[21:])
    assert b.attributes == 0x78
    assert b.compression == 0
    assert b.timestamp_type == 1
    assert b.is_transactional is True
    assert b.is_control is True
    assert b.has_delete_horizon is True
    assert b.last_offset_delta == 5
    assert b.last_offset == 2**40 + 8
    assert b.next_offset == 2**40 + 9
    assert b.base_timestamp == -12
    assert b.max_timestamp == 2**50
    assert b.producer_id == 2**63 - 1
    assert b.producer_epoch == -32768
    assert b.base_sequence == 2**31 - 1
    assert b.records_count == 2
    assert b.tobytes() == raw
    assert b.compute_crc() == b.crc
    assert b.is_valid()
    b.validate()
    assert "base_offset=1099511627779" in repr(b)


def test_plain_flags_clear(codec):
    b = codec.RecordBatch(codec.build_batch([b"x"], timestamp=0))
    assert (b.timestamp_type, b.is_transactional, b.is_control, b.has_delete_horizon,
            b.compression) == (0, False, False, False, 0)


def test_batch_at_a_position_inside_a_larger_buffer(codec):
    raw = sample_batch()
    buf = b"\xee" * 13 + raw + b"\xdd" * 40
    b = codec.RecordBatch(buf, 13)
    assert b.position == 13
    assert b.tobytes() == raw
    assert b.is_valid()
    assert [r.value for r in b] == [r[3] for r in sample_records()]


def test_crc_mismatch_detected_by_validate(codec):
    raw = bytearray(sample_batch())
    raw[-1] ^= 0x01
    b = codec.RecordBatch(bytes(raw))
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError):
        b.validate()


def test_fields_outside_the_crc_can_change_without_invalidating(codec):
    raw = sample_batch()
    for field, value in (("base_offset", 99), ("partition_leader_epoch", 12345)):
        assert codec.RecordBatch(patch(raw, field, value, recrc=False)).is_valid()
    assert not codec.RecordBatch(patch(raw, "max_timestamp", 1, recrc=False)).is_valid()


# --- records ----------------------------------------------------------------------------------


def test_iteration_yields_every_field(codec):
    records = list(codec.RecordBatch(sample_batch()))
    assert [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in records] == [
        (1000 + od, 10_000 + td, k, v, h) for od, td, k, v, h in sample_records()]
    assert all(r.attributes == 0 for r in records)
    assert codec.RecordBatch(sample_batch()).records() == records


def test_record_equality_and_repr(codec):
    [a] = codec.RecordBatch(codec.build_batch([b"v"], keys=[b"k"], timestamp=3))
    [b] = codec.RecordBatch(codec.build_batch([b"v"], keys=[b"k"], timestamp=3))
    assert a == b
    assert "value=b'v'" in repr(a)
    assert a == codec.Record(0, 3, b"k", b"v", ())


def test_offsets_come_from_the_stored_deltas(codec):
    # Kafka's reader does not require dense deltas (compaction leaves gaps).
    raw = raw_batch(raw_record(0, 0, None, b"a") + raw_record(7, 0, None, b"b"), 2,
                    base_offset=100, last_offset_delta=7)
    assert [r.offset for r in codec.RecordBatch(raw)] == [100, 107]
    assert codec.RecordBatch(raw).decode().offsets.tolist() == [100, 107]


def test_iteration_is_lazy(codec):
    good = raw_record(0, 0, None, b"ok")
    bad = b"\x0e\x00\x00\x02\x01\x7f"  # value length 63 runs past the record
    raw = raw_batch(good + bad, 2)
    b = codec.RecordBatch(raw)  # header only: no error yet
    it = iter(b)
    assert next(it).value == b"ok"
    with pytest.raises(CorruptRecordError):
        next(it)


def test_header_is_read_without_touching_a_compressed_block(codec):
    raw = raw_batch(b"not gzip at all", 3, attributes=Compression.GZIP)
    b = codec.RecordBatch(raw)
    assert (b.records_count, b.compression) == (3, Compression.GZIP)
    assert b.is_valid()
    with pytest.raises(CorruptRecordError):
        list(b)


def test_values(codec):
    assert codec.RecordBatch(sample_batch()).values() == [r[3] for r in sample_records()]


@pytest.mark.parametrize("codec_id", CODECS)
def test_values_led_by_picks_values_by_first_byte(codec, codec_id):
    leads = bytes(1 if b in (1, 0x90) else 0 for b in range(256))
    values = [b"\x01meta", None, b"", b"\x02x", b"\x90long", b"plain", b"\x01"]
    raw = codec.build_batch(values, compression=codec_id)
    picked, others = codec.RecordBatch(raw).values_led_by(leads)
    assert picked == [(0, b"\x01meta"), (4, b"\x90long"), (6, b"\x01")] and others == 4
    assert codec.RecordBatch(raw).values_led_by(bytes(256)) == ([], 7)
    with pytest.raises(ValueError):
        codec.RecordBatch(raw).values_led_by(b"\x01" * 255)


def test_values_led_by_refuses_bytes_after_the_last_record(codec):
    good = raw_record(0, 0, None, b"\x01v", ())
    with pytest.raises(CorruptRecordError):
        codec.RecordBatch(raw_batch(good + b"\x00\x00", 1)).values_led_by(bytes([1]) * 256)


@pytest.mark.parametrize("codec_id", CODECS)
def test_decode_arrays(codec, codec_id):
    keys = [None, b"key", b"", b"k" * 300]
    values = [b"first", None, b"", b"v" * 5000]
    headers = [None, [("h1", b"v1"), ("h2", None)], None, [("x" * 130, b"y" * 200)]]
    ts = [10, 7, 260, 2**33]
    raw = codec.build_batch(values, keys, headers, ts, base_offset=1000, compression=codec_id)
    d = codec.RecordBatch(raw).decode()
    assert isinstance(d, DecodedBatch)
    assert len(d) == 4
    for name in ("offsets", "timestamps", "key_positions", "key_lengths", "value_positions",
                 "value_lengths", "header_positions"):
        arr = getattr(d, name)
        assert arr.dtype == np.int64 and arr.shape == (4,), name
    assert d.offsets.tolist() == [1000, 1001, 1002, 1003]
    assert d.timestamps.tolist() == ts
    assert d.key_lengths.tolist() == [-1, 3, 0, 300]
    assert d.value_lengths.tolist() == [5, -1, 0, 5000]
    assert [d.key(i) for i in range(4)] == keys
    assert [d.value(i) for i in range(4)] == values
    assert d.values() == values
    assert [d.headers(i) for i in range(4)] == [(), (("h1", b"v1"), ("h2", None)), (),
                                                 (("x" * 130, b"y" * 200),)]
    data = bytes(d.data)
    for i in range(4):
        if values[i] is not None:
            p = int(d.value_positions[i])
            assert data[p : p + len(values[i])] == values[i]


def test_decode_of_an_empty_batch(codec):
    raw = raw_batch(b"", 0, last_offset_delta=0)
    b = codec.RecordBatch(raw)
    assert list(b) == []
    assert b.values() == []
    d = b.decode()
    assert len(d) == 0 and d.values() == []


@pytest.mark.parametrize("codec_id", CODECS)
def test_log_append_time_gives_every_record_the_max_timestamp(codec, codec_id):
    raw = codec.build_batch([b"a", b"b", b"c"], timestamps=[5, 1, 3], log_append_time=True,
                            compression=codec_id)
    raw = patch(raw, "max_timestamp", 999_999)  # the broker stamps the batch
    b = codec.RecordBatch(raw)
    assert b.timestamp_type == 1
    assert [r.timestamp for r in b] == [999_999] * 3
    assert b.decode().timestamps.tolist() == [999_999] * 3


def test_create_time_uses_base_plus_delta(codec):
    raw = patch(codec.build_batch([b"a", b"b"], timestamps=[5, 1]), "max_timestamp", 999_999)
    assert [r.timestamp for r in codec.RecordBatch(raw)] == [5, 1]


@pytest.mark.parametrize("codec_id", CODECS)
def test_every_codec_reads_back(codec, codec_id):
    values = [b"%05d" % i * 30 for i in range(500)]
    raw = codec.build_batch(values, keys=[b"k%d" % i for i in range(500)],
                            timestamps=list(range(500)), compression=codec_id)
    b = codec.RecordBatch(raw)
    b.validate()
    assert b.values() == values
    assert [r.key for r in b] == [b"k%d" % i for i in range(500)]
    assert b.decode().values() == values


# --- buffer kinds ----------------------------------------------------------------------------------


def _read(codec, buf):
    b = codec.RecordBatch(buf)
    d = b.decode()
    return ([(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in b], b.values(),
            d.values(), [d.headers(i) for i in range(len(d))], b.is_valid(), b.tobytes())


@pytest.mark.parametrize("kind", ["bytearray", "memoryview", "memoryview_slice", "numpy", "mmap"])
def test_reader_over_buffer_kinds(codec, kind, tmp_path):
    raw = sample_batch()
    expected = _read(codec, raw)
    if kind == "mmap":
        path = tmp_path / "segment"
        path.write_bytes(raw)
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            assert _read(codec, m) == expected
            batches = list(codec.iter_batches(m, validate=True))
            assert [b.base_offset for b in batches] == [1000]
            del batches
        return
    buf = {
        "bytearray": bytearray(raw),
        "memoryview": memoryview(raw),
        "memoryview_slice": memoryview(b"\x00" * 8 + raw)[8:],
        "numpy": np.frombuffer(raw, dtype=np.uint8),
    }[kind]
    assert _read(codec, buf) == expected


def test_values_are_independent_of_a_mutable_buffer(codec):
    buf = bytearray(sample_batch())
    b = codec.RecordBatch(buf)
    values = b.values()
    records = list(b)
    del b
    buf[HEADER_SIZE:] = b"\x00" * (len(buf) - HEADER_SIZE)
    assert values == [r[3] for r in sample_records()]
    assert [r.value for r in records] == values


def test_header_struct_round_trip_of_helper():
    # Guard for the helper itself: the independent writer produces what the spec says.
    raw = raw_batch(b"", 0, base_offset=1, epoch=2, last_offset_delta=0)
    assert struct.unpack_from(">qiib", raw) == (1, HEADER_SIZE - 12, 2, 2)
