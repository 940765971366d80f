"""RecordBatch v2 builder: golden bytes from the spec, header fields, attributes,
timestamps, keys/headers/nulls, incremental vs whole-batch, max_bytes, control batches,
codecs and argument errors. Runs against both implementations (``codec`` fixture)."""

import gzip
import struct
import time

import crc32c as crc32c_pkg
import lz4.frame
import numpy as np
import pytest

from kraft.errors import UnsupportedCodecError
from kraft.records import Compression, ControlType, LeaderChangeMessage, compression
from kraft.records import decode_control_key, decode_control_record, encode_control_value

from _codec_helpers import HEADER_SIZE, header, raw_batch, raw_record

CODECS = [c for c in Compression if compression.available(c)]

# --- golden bytes ------------------------------------------------------------------------
#
# Two records, base offset 5, leader epoch 3, CreateTime, no producer:
#   record 0: ts 1000, key null, value b"hi", no headers
#   record 1: ts 1003, key b"k", value b"v", headers [("a", b"b")]
GOLDEN_RECORD_0 = bytes([
    0x10,                    # length 8 (zig-zag 16)
    0x00,                    # attributes
    0x00,                    # timestamp delta 0
    0x00,                    # offset delta 0
    0x01,                    # key length -1 (null)
    0x04, 0x68, 0x69,        # value length 2, "hi"
    0x00,                    # 0 headers
])
GOLDEN_RECORD_1 = bytes([
    0x18,                    # length 12
    0x00,                    # attributes
    0x06,                    # timestamp delta 3
    0x02,                    # offset delta 1
    0x02, 0x6B,              # key length 1, "k"
    0x02, 0x76,              # value length 1, "v"
    0x02,                    # 1 header
    0x02, 0x61,              # header key length 1, "a"
    0x02, 0x62,              # header value length 1, "b"
])
GOLDEN_HEADER_BEFORE_CRC = bytes.fromhex(
    "0000000000000005"       # BaseOffset 5
    "00000047"               # Length 71 = 61 + 22 - 12
    "00000003"               # PartitionLeaderEpoch 3
    "02"                     # Magic 2
)
GOLDEN_HEADER_AFTER_CRC = bytes.fromhex(
    "0000"                   # Attributes: none, CreateTime, not transactional, not control
    "00000001"               # LastOffsetDelta 1
    "00000000000003e8"       # BaseTimestamp 1000
    "00000000000003eb"       # MaxTimestamp 1003
    "ffffffffffffffff"       # ProducerId -1
    "ffff"                   # ProducerEpoch -1
    "ffffffff"               # BaseSequence -1
    "00000002"               # RecordsCount 2
)


def golden_batch() -> bytes:
    covered = GOLDEN_HEADER_AFTER_CRC + GOLDEN_RECORD_0 + GOLDEN_RECORD_1
    return GOLDEN_HEADER_BEFORE_CRC + struct.pack(">I", crc32c_pkg.crc32c(covered)) + covered


GOLDEN_ARGS = dict(values=[b"hi", b"v"], keys=[None, b"k"], headers=[None, [("a", b"b")]],
                   timestamps=[1000, 1003])


def test_golden_batch_from_the_spec(codec):
    assert len(golden_batch()) == 83
    assert codec.build_batch(**GOLDEN_ARGS, base_offset=5, partition_leader_epoch=3) == golden_batch()


def test_golden_batch_incrementally(codec):
    b = codec.RecordBatchBuilder(base_offset=5, partition_leader_epoch=3)
    assert b.append(b"hi", timestamp=1000) == 0
    assert b.append(b"v", key=b"k", headers=[("a", b"b")], timestamp=1003) == 1
    assert len(b) == 2
    assert b.size_in_bytes() == 83
    assert b.build() == golden_batch()
    assert b.build() == golden_batch()  # build() does not consume the builder


def test_golden_batch_crc_is_valid(codec):
    batch = codec.RecordBatch(golden_batch())
    assert batch.crc == crc32c_pkg.crc32c(golden_batch()[21:])
    assert batch.is_valid()


# --- header fields and attributes --------------------------------------------------------


def test_default_header_fields(codec):
    h = header(codec.build_batch([b"x"], timestamp=7))
    assert h == dict(base_offset=0, length=HEADER_SIZE + len(raw_record(0, 0, None, b"x")) - 12, partition_leader_epoch=-1,
                     magic=2, crc=h["crc"], attributes=0, last_offset_delta=0,
                     base_timestamp=7, max_timestamp=7, producer_id=-1, producer_epoch=-1,
                     base_sequence=-1, records_count=1)


def test_producer_fields_are_written(codec):
    h = header(codec.build_batch([b"x"] * 3, timestamp=1, base_offset=2**40,
                                 partition_leader_epoch=2**31 - 1, producer_id=2**62,
                                 producer_epoch=32767, base_sequence=12345))
    assert (h["base_offset"], h["partition_leader_epoch"], h["producer_id"], h["producer_epoch"],
            h["base_sequence"], h["records_count"], h["last_offset_delta"]) == (
        2**40, 2**31 - 1, 2**62, 32767, 12345, 3, 2)


@pytest.mark.parametrize(("flags", "bits"), [
    ({}, 0x00),
    ({"log_append_time": True}, 0x08),
    ({"transactional": True}, 0x10),
    ({"control": True}, 0x20),
    ({"transactional": True, "control": True, "log_append_time": True}, 0x38),
])
@pytest.mark.parametrize("codec_id", CODECS)
def test_attribute_bits(codec, flags, bits, codec_id):
    batch = codec.build_batch([b"x" * 50] * 3, timestamp=1, compression=codec_id, **flags)
    assert header(batch)["attributes"] == bits | codec_id
    rb = codec.RecordBatch(batch)
    assert rb.compression == codec_id
    assert rb.timestamp_type == (1 if bits & 0x08 else 0)
    assert rb.is_transactional == bool(bits & 0x10)
    assert rb.is_control == bool(bits & 0x20)
    assert not rb.has_delete_horizon
    rb.validate()


# --- timestamps ----------------------------------------------------------------------------


def test_base_timestamp_is_the_first_records_and_max_is_the_maximum(codec):
    ts = [500, 100, 900, 300]
    batch = codec.build_batch([b"a", b"b", b"c", b"d"], timestamps=ts)
    h = header(batch)
    assert (h["base_timestamp"], h["max_timestamp"]) == (500, 900)
    assert [r.timestamp for r in codec.RecordBatch(batch)] == ts


def test_negative_timestamp_deltas_are_zig_zag(codec):
    batch = codec.build_batch([b"a", b"b"], timestamps=[1000, 999])
    # second record: length, attributes, then timestamp delta -1 = zig-zag 0x01
    assert batch[HEADER_SIZE:] == raw_record(0, 0, None, b"a") + bytes.fromhex("0e 00 01 02 01 02 62 00")


def test_incremental_builder_timestamps_match_whole_batch(codec):
    ts = [10, -5, 2**40, 3]
    b = codec.RecordBatchBuilder()
    for i, t in enumerate(ts):
        b.append(b"%d" % i, timestamp=t)
    assert b.build() == codec.build_batch([b"%d" % i for i in range(4)], timestamps=ts)


def test_one_timestamp_stamps_every_record(codec):
    batch = codec.build_batch([b"a", b"b", b"c"], timestamp=1234)
    assert [r.timestamp for r in codec.RecordBatch(batch)] == [1234] * 3
    h = header(batch)
    assert h["base_timestamp"] == h["max_timestamp"] == 1234


def test_timestamps_override_timestamp(codec):
    batch = codec.build_batch([b"a", b"b"], timestamps=[5, 6], timestamp=99)
    assert [r.timestamp for r in codec.RecordBatch(batch)] == [5, 6]


def test_default_timestamp_is_now_in_milliseconds(codec):
    before = time.time_ns() // 1_000_000
    batch = codec.build_batch([b"a"])
    b = codec.RecordBatchBuilder()
    b.append(b"a")
    incremental = b.build()
    after = time.time_ns() // 1_000_000
    for raw in (batch, incremental):
        assert before <= header(raw)["base_timestamp"] <= after


def test_log_append_time_keeps_the_records_timestamps_in_the_header(codec):
    batch = codec.build_batch([b"a", b"b"], timestamps=[10, 20], log_append_time=True)
    h = header(batch)
    assert (h["attributes"] & 0x08, h["base_timestamp"], h["max_timestamp"]) == (0x08, 10, 20)


# --- keys, values, headers ---------------------------------------------------------------


def test_null_key_and_null_value(codec):
    batch = codec.build_batch([None, b""], keys=[None, b""], timestamp=0)
    assert batch[HEADER_SIZE:] == raw_record(0, 0, None, None) + raw_record(1, 0, b"", b"")
    records = list(codec.RecordBatch(batch))
    assert [(r.key, r.value) for r in records] == [(None, None), (b"", b"")]


def test_headers_encoding(codec):
    hdrs = [("", b""), ("é", None), ("key", b"\x00\xff"), (b"raw", b"v")]
    batch = codec.build_batch([b"v"], headers=[hdrs], timestamp=0)
    assert batch[HEADER_SIZE:] == raw_record(0, 0, None, b"v", hdrs)
    [record] = codec.RecordBatch(batch)
    assert record.headers == (("", b""), ("é", None), ("key", b"\x00\xff"), ("raw", b"v"))


def test_empty_header_list_equals_none(codec):
    assert codec.build_batch([b"v"], headers=[[]], timestamp=0) == codec.build_batch(
        [b"v"], headers=[None], timestamp=0) == codec.build_batch([b"v"], timestamp=0)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview,
                                  lambda b: np.frombuffer(b, dtype=np.uint8)])
def test_value_and_key_buffer_types(codec, kind):
    expected = codec.build_batch([b"value"], keys=[b"key"], timestamp=1)
    assert codec.build_batch([kind(b"value")], keys=[kind(b"key")], timestamp=1) == expected
    b = codec.RecordBatchBuilder()
    b.append(kind(b"value"), key=kind(b"key"), timestamp=1)
    assert b.build() == expected


def test_large_values_use_multi_byte_lengths(codec):
    values = [b"x" * 200, b"y" * 70_000, b"z" * (1 << 20)]
    batch = codec.build_batch(values, timestamp=0)
    assert batch[HEADER_SIZE:] == b"".join(raw_record(i, 0, None, v) for i, v in enumerate(values))
    assert codec.RecordBatch(batch).values() == values


@pytest.mark.parametrize("case", ["no_keys", "keys", "headers", "timestamps", "all"])
def test_builder_and_build_batch_are_byte_identical(codec, case):
    n = 20
    values = [b"v%d" % i * (i % 5) if i % 7 else None for i in range(n)]
    keys = [b"k%d" % i if i % 3 else None for i in range(n)] if case in ("keys", "all") else None
    headers = ([[("h", b"%d" % i)] * (i % 3) for i in range(n)]
               if case in ("headers", "all") else None)
    timestamps = [1000 + (i * 37) % 11 - 5 for i in range(n)] if case in ("timestamps", "all") else None
    whole = codec.build_batch(values, keys, headers, timestamps, timestamp=77, base_offset=9,
                              partition_leader_epoch=4)
    b = codec.RecordBatchBuilder(base_offset=9, partition_leader_epoch=4)
    for i in range(n):
        b.append(values[i], key=None if keys is None else keys[i],
                 headers=None if headers is None else headers[i],
                 timestamp=77 if timestamps is None else timestamps[i])
    assert b.build() == whole
    assert b.size_in_bytes() == len(whole)


# --- max_bytes ----------------------------------------------------------------------------


def test_max_bytes_rejects_the_record_that_would_overflow(codec):
    one = len(raw_record(0, 0, None, b"x" * 10))  # 13 bytes per record while deltas are small
    limit = HEADER_SIZE + 3 * one
    b = codec.RecordBatchBuilder(max_bytes=limit)
    assert [b.append(b"x" * 10, timestamp=0) for _ in range(3)] == [0, 1, 2]
    assert b.size_in_bytes() == limit
    assert b.append(b"x" * 10, timestamp=0) is None
    assert len(b) == 3
    assert b.size_in_bytes() == limit
    batch = b.build()
    assert len(batch) == limit
    assert codec.RecordBatch(batch).values() == [b"x" * 10] * 3


def test_max_bytes_rejected_record_leaves_room_for_a_smaller_one(codec):
    b = codec.RecordBatchBuilder(max_bytes=HEADER_SIZE + 20)
    assert b.append(b"a", timestamp=0) == 0            # 7 bytes
    assert b.append(b"b" * 50, timestamp=0) is None
    assert b.append(b"c", timestamp=0) == 1            # offset deltas stay dense
    assert [r.offset for r in codec.RecordBatch(b.build())] == [0, 1]


def test_max_bytes_always_accepts_the_first_record(codec):
    b = codec.RecordBatchBuilder(max_bytes=10)
    assert b.append(b"x" * 1000, timestamp=0) == 0
    assert b.append(b"", timestamp=0) is None
    assert codec.RecordBatch(b.build()).records_count == 1


def test_max_bytes_counts_uncompressed_size(codec):
    b = codec.RecordBatchBuilder(compression=Compression.GZIP, max_bytes=HEADER_SIZE + 2000)
    n = 0
    while b.append(b"\x00" * 100, timestamp=0) is not None:
        n += 1
    assert n == 2000 // len(raw_record(1, 0, None, b"\x00" * 100))
    assert len(b.build()) < HEADER_SIZE + 2000


# --- control batches -------------------------------------------------------------------------


@pytest.mark.parametrize("ctype", list(ControlType))
def test_control_batch_key_layout(codec, ctype):
    batch = codec.build_control_batch(ctype, b"\x00\x00payload", timestamp=5, base_offset=3,
                                      partition_leader_epoch=8)
    h = header(batch)
    assert h["attributes"] == 0x20
    assert (h["base_offset"], h["partition_leader_epoch"], h["records_count"]) == (3, 8, 1)
    assert batch[HEADER_SIZE:] == raw_record(0, 0, struct.pack(">hh", 0, ctype), b"\x00\x00payload")
    [record] = codec.RecordBatch(batch)
    assert decode_control_key(record.key) == ctype


def test_control_record_batch_holds_the_encoded_message(codec):
    import kraft.records

    msg = LeaderChangeMessage(leader_id=1, voters=(1, 2, 3), granting_voters=(1, 2))
    batch = kraft.records.build_control_record_batch(msg, base_offset=10, partition_leader_epoch=2,
                                                    timestamp=99)
    expected = codec.build_control_batch(ControlType.LEADER_CHANGE, encode_control_value(msg),
                                         base_offset=10, partition_leader_epoch=2, timestamp=99)
    assert batch == expected
    [record] = codec.RecordBatch(batch)
    assert decode_control_record(record.key, record.value) == msg


# --- compression ------------------------------------------------------------------------------


def _independent_decompress(codec_id: int, data: bytes) -> bytes:
    if codec_id == Compression.GZIP:
        return gzip.decompress(data)
    if codec_id == Compression.LZ4:
        return lz4.frame.decompress(data)
    if codec_id == Compression.ZSTD:
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if codec_id == Compression.SNAPPY:
        import snappy

        assert data[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)  # xerial, as Java writes
        pos, out = 16, []
        while pos < len(data):
            (n,) = struct.unpack_from(">i", data, pos)
            out.append(snappy.decompress(data[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        return b"".join(out)
    raise AssertionError(codec_id)


@pytest.mark.parametrize("codec_id", [c for c in CODECS if c != Compression.NONE])
def test_compressed_batch_wraps_the_uncompressed_records(codec, codec_id):
    values = [b"record %d " % i * 20 for i in range(300)]
    kwargs = dict(keys=[b"k"] * 300, timestamps=list(range(300)), base_offset=1, partition_leader_epoch=2)
    plain = codec.build_batch(values, **kwargs)
    packed = codec.build_batch(values, compression=codec_id, **kwargs)
    assert len(packed) < len(plain)
    assert _independent_decompress(codec_id, packed[HEADER_SIZE:]) == plain[HEADER_SIZE:]
    hp, hc = header(plain), header(packed)
    for name in ("base_offset", "partition_leader_epoch", "last_offset_delta", "base_timestamp",
                 "max_timestamp", "records_count", "producer_id"):
        assert hp[name] == hc[name], name
    assert hc["length"] == len(packed) - 12
    assert hc["attributes"] == codec_id
    assert hc["crc"] == crc32c_pkg.crc32c(packed[21:])
    b = codec.RecordBatchBuilder(compression=codec_id, base_offset=1, partition_leader_epoch=2)
    for i, v in enumerate(values):
        b.append(v, key=b"k", timestamp=i)
    incremental = b.build()
    assert _independent_decompress(codec_id, incremental[HEADER_SIZE:]) == plain[HEADER_SIZE:]


def test_uncompressed_block_is_bit_exact_with_the_independent_writer(codec):
    values = [b"a" * i for i in range(0, 300, 7)]
    batch = codec.build_batch(values, timestamp=3, base_offset=11, partition_leader_epoch=1)
    records = b"".join(raw_record(i, 0, None, v) for i, v in enumerate(values))
    assert batch == raw_batch(records, len(values), base_offset=11, epoch=1, base_timestamp=3,
                              max_timestamp=3)


# --- errors ---------------------------------------------------------------------------------------


def test_no_records_is_an_error(codec):
    with pytest.raises(ValueError):
        codec.build_batch([])
    with pytest.raises(ValueError):
        codec.RecordBatchBuilder().build()


@pytest.mark.parametrize("arg", ["keys", "headers", "timestamps"])
def test_mismatched_parallel_lists(codec, arg):
    with pytest.raises(ValueError):
        codec.build_batch([b"a", b"b"], **{arg: [None] if arg != "timestamps" else [1]}, timestamp=1)


@pytest.mark.parametrize("codec_id", [5, 6, 7, -1, 8])
def test_unknown_codec(codec, codec_id):
    with pytest.raises(UnsupportedCodecError):
        codec.build_batch([b"a"], compression=codec_id, timestamp=1)
    with pytest.raises(UnsupportedCodecError):
        codec.RecordBatchBuilder(compression=codec_id)


def test_header_key_none_is_a_type_error(codec):
    with pytest.raises(TypeError):
        codec.build_batch([b"a"], headers=[[(None, b"v")]], timestamp=1)


def test_unencodable_header_key(codec):
    with pytest.raises(UnicodeEncodeError):
        codec.build_batch([b"a"], headers=[[("\ud800", b"v")]], timestamp=1)


def test_str_value_is_a_type_error(codec):
    with pytest.raises(TypeError):
        codec.build_batch(["text"], timestamp=1)


def test_int_value_is_a_type_error(codec):
    # Regression: the pure builder used to encode an int n as n zero bytes (bytes(n)).
    with pytest.raises(TypeError):
        codec.build_batch([3], timestamp=1)


def test_float_timestamp_is_a_type_error(codec):
    # Regression: the native builder used to truncate a float timestamp (1.5 -> 1).
    with pytest.raises(TypeError):
        codec.build_batch([b"a"], timestamp=1.5)
