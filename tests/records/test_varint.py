"""Varints: Kafka's zig-zag varint/varlong and unsigned varint (ByteUtils.java).

Known vectors are Kafka's own, from ``clients/src/test/java/org/apache/kafka/common/utils/
ByteUtilsTest.java`` (testVarintSerde, testVarlongSerde, testUnsignedVarintSerde,
testInvalidVarint/testInvalidVarlong). Record fields that Kafka reads as 32-bit varints
(lengths, offset delta, header count) are checked through the record parser, since that is
where the 5-byte limit applies.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.errors import CorruptRecordError

from _codec_helpers import hyp, raw_batch, zigzag_varint

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# ByteUtilsTest.testVarintSerde and testVarlongSerde (the varint rows are a prefix of the
# varlong rows: zig-zag encoding is the same, only the decoder's length limit differs).
VARINT_VECTORS = [
    (0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
    (8191, "fe7f"), (-8192, "ff7f"), (8192, "808001"), (-8193, "818001"),
    (1048575, "feff7f"), (-1048576, "ffff7f"), (1048576, "80808001"), (-1048577, "81808001"),
    (134217727, "feffff7f"), (-134217728, "ffffff7f"), (134217728, "8080808001"),
    (-134217729, "8180808001"), (INT32_MAX, "feffffff0f"), (INT32_MIN, "ffffffff0f"),
]
VARLONG_ONLY_VECTORS = [
    (17179869183, "feffffff7f"), (-17179869184, "ffffffff7f"),
    (17179869184, "808080808001"), (-17179869185, "818080808001"),
    (2199023255551, "feffffffff7f"), (-2199023255552, "ffffffffff7f"),
    (2199023255552, "80808080808001"), (-2199023255553, "81808080808001"),
    (281474976710655, "feffffffffff7f"), (-281474976710656, "ffffffffffff7f"),
    (281474976710656, "8080808080808001"), (-281474976710657, "8180808080808001"),
    (36028797018963967, "feffffffffffff7f"), (-36028797018963968, "ffffffffffffff7f"),
    (36028797018963968, "808080808080808001"), (-36028797018963969, "818080808080808001"),
    (4611686018427387903, "feffffffffffffff7f"), (-4611686018427387904, "ffffffffffffffff7f"),
    (4611686018427387904, "80808080808080808001"), (-4611686018427387905, "81808080808080808001"),
    (INT64_MAX, "feffffffffffffffff01"), (INT64_MIN, "ffffffffffffffffff01"),
]
# ByteUtilsTest.testUnsignedVarintSerde; Java's negative ints are our uint32 values.
UNSIGNED_VECTORS = [
    (0, "00"), (2**32 - 1, "ffffffff0f"), (1, "01"), (63, "3f"), (2**32 - 64, "c0ffffff0f"),
    (64, "40"), (8191, "ff3f"), (2**32 - 8192, "80c0ffff0f"), (8192, "8040"),
    (2**32 - 8193, "ffbfffff0f"), (1048575, "ffff3f"), (1048576, "808040"),
    (INT32_MAX, "ffffffff07"), (2**31, "8080808008"),
]
ALL_SIGNED = VARINT_VECTORS + VARLONG_ONLY_VECTORS


@pytest.mark.parametrize(("value", "hexbytes"), ALL_SIGNED)
def test_varint_matches_kafka_vectors(codec, value, hexbytes):
    raw = bytes.fromhex(hexbytes)
    assert codec.encode_varint(value) == raw
    assert codec.size_of_varint(value) == len(raw)
    assert codec.decode_varint(raw) == (value, len(raw))
    assert codec.decode_varint(b"\xaa\xbb" + raw + b"\xcc", 2) == (value, 2 + len(raw))


@pytest.mark.parametrize(("value", "hexbytes"), UNSIGNED_VECTORS)
def test_unsigned_varint_matches_kafka_vectors(codec, value, hexbytes):
    raw = bytes.fromhex(hexbytes)
    assert codec.encode_unsigned_varint(value) == raw
    assert codec.decode_unsigned_varint(raw) == (value, len(raw))
    assert codec.decode_unsigned_varint(b"\x00" + raw, 1) == (value, 1 + len(raw))


@pytest.mark.parametrize(("value", "hexbytes"), ALL_SIGNED)
def test_truncated_varint_is_corrupt(codec, value, hexbytes):
    raw = bytes.fromhex(hexbytes)
    for cut in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            codec.decode_varint(raw[:cut])


@pytest.mark.parametrize(("value", "hexbytes"), UNSIGNED_VECTORS)
def test_truncated_unsigned_varint_is_corrupt(codec, value, hexbytes):
    raw = bytes.fromhex(hexbytes)
    for cut in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            codec.decode_unsigned_varint(raw[:cut])


def test_varlong_with_an_eleventh_byte_is_corrupt(codec):
    # ByteUtilsTest.testInvalidVarlong
    with pytest.raises(CorruptRecordError):
        codec.decode_varint(bytes([0xFF] * 10 + [0x01]))


def test_varlong_tenth_byte_may_carry_only_one_bit(codec):
    assert codec.decode_varint(bytes([0xFF] * 9 + [0x01])) == (INT64_MIN, 10)
    with pytest.raises(CorruptRecordError):
        codec.decode_varint(bytes([0xFF] * 9 + [0x02]))  # 65th bit set
    with pytest.raises(CorruptRecordError):
        codec.decode_varint(bytes([0x80] * 9 + [0x7F]))


def test_padded_but_terminated_varlong_is_accepted(codec):
    # Kafka's decoder accepts non-minimal encodings within the length limit; so do we.
    assert codec.decode_varint(b"\x80\x80\x80\x00") == (0, 4)


def test_unsigned_varint_longer_than_five_bytes_is_corrupt(codec):
    with pytest.raises(CorruptRecordError):
        codec.decode_unsigned_varint(b"\xff\xff\xff\xff\xff\x01")
    with pytest.raises(CorruptRecordError):
        codec.decode_unsigned_varint(b"\x80\x80\x80\x80\x80\x00")


def test_unsigned_varint_beyond_32_bits_is_corrupt(codec):
    # Kafka silently drops these high bits; kraft refuses them (stricter, never ambiguous).
    with pytest.raises(CorruptRecordError):
        codec.decode_unsigned_varint(b"\xff\xff\xff\xff\x1f")
    assert codec.decode_unsigned_varint(b"\x80\x80\x80\x80\x00") == (0, 5)


@pytest.mark.parametrize("value", [INT64_MIN - 1, INT64_MAX + 1, 2**70])
def test_encode_varint_out_of_int64_range_raises_overflow(codec, value):
    with pytest.raises(OverflowError):
        codec.encode_varint(value)


@pytest.mark.parametrize("value", [-1, 2**32, 2**40])
def test_encode_unsigned_varint_out_of_uint32_range_raises_overflow(codec, value):
    with pytest.raises(OverflowError):
        codec.encode_unsigned_varint(value)


def test_decode_past_the_end_is_corrupt(codec):
    with pytest.raises(CorruptRecordError):
        codec.decode_varint(b"\x02", 1)
    with pytest.raises(CorruptRecordError):
        codec.decode_unsigned_varint(b"", 0)


@hyp(300)
@given(st.integers(INT64_MIN, INT64_MAX), st.binary(max_size=4), st.binary(max_size=4))
def test_varint_round_trip(codec, value, prefix, suffix):
    raw = codec.encode_varint(value)
    assert raw == zigzag_varint(value)
    assert len(raw) == codec.size_of_varint(value)
    assert codec.decode_varint(prefix + raw + suffix, len(prefix)) == (value, len(prefix) + len(raw))


@hyp(300)
@given(st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(codec, value):
    raw = codec.encode_unsigned_varint(value)
    assert len(raw) <= 5
    assert codec.decode_unsigned_varint(raw + b"\x07") == (value, len(raw))


# --- 32-bit varint fields inside a record ------------------------------------------------


def _one_record_batch(body: bytes) -> bytes:
    """A batch with one record whose body (after the length varint) is ``body``."""
    return raw_batch(zigzag_varint(len(body)) + body, 1)


def _record_with_key_length(key_length_varint: bytes, tail: bytes = b"") -> bytes:
    # attributes, ts delta 0, offset delta 0, key length, [tail], value null, 0 headers
    return _one_record_batch(b"\x00\x00\x00" + key_length_varint + tail + b"\x01\x00")


def test_record_key_length_over_five_bytes_is_corrupt(codec):
    # ByteUtilsTest.testInvalidVarint: a varint with one overflow byte.
    batch = _record_with_key_length(bytes.fromhex("ffffffffff01"))
    with pytest.raises(CorruptRecordError):
        list(codec.RecordBatch(batch))


def test_record_field_outside_int32_is_corrupt(codec):
    # zig-zag raw value 2**32 (5 bytes, but 33 bits) for the offset delta
    body = b"\x00\x00" + bytes.fromhex("8080808010") + b"\x01\x01\x00"
    with pytest.raises(CorruptRecordError):
        list(codec.RecordBatch(_one_record_batch(body)))


def test_record_field_padded_to_five_bytes_is_accepted(codec):
    # key length 1 written as a 5-byte (non-minimal) varint
    batch = _record_with_key_length(bytes.fromhex("8280808000"), b"k")
    [record] = codec.RecordBatch(batch)
    assert record.key == b"k"


@pytest.mark.parametrize("delta", [INT32_MIN, INT32_MAX])
def test_record_offset_delta_at_int32_bounds(codec, delta):
    body = b"\x00\x00" + zigzag_varint(delta) + b"\x01\x01\x00"
    [record] = codec.RecordBatch(raw_batch(zigzag_varint(len(body)) + body, 1, base_offset=2**40))
    assert record.offset == 2**40 + delta


def test_record_timestamp_delta_is_a_full_varlong(codec):
    delta = 2**40 + 5
    body = b"\x00" + zigzag_varint(delta) + b"\x00\x01\x01\x00"
    batch = raw_batch(zigzag_varint(len(body)) + body, 1, base_timestamp=-(2**40))
    [record] = codec.RecordBatch(batch)
    assert record.timestamp == 5
