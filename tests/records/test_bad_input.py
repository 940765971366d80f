"""Bad input: every malformed batch is a CorruptRecordError (UnsupportedCodecError for codec
ids 5-7) from every entry point, never another exception, a crash, a hang or an allocation
sized by an untrusted field. Runs against both implementations; the native one is also
fuzzed in a subprocess by test_fuzz_native.py."""

import struct
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.errors import CorruptRecordError, UnsupportedCodecError
from kraft.records import decode_control_record

from _codec_helpers import (
    HEADER_SIZE, TYPED_ERRORS, hyp, patch, raw_batch, raw_record, time_limit,
    zigzag_varint,
)


def good_batch(codec):
    return codec.build_batch([b"alpha", None, b"gamma" * 30], keys=[b"k", None, b""],
                             headers=[[("h", b"v")], None, [("x", None), ("y", b"")]],
                             timestamps=[10, 5, 20], base_offset=100)


def read_all(codec, buf):
    """Drive every reading entry point; returns normally or raises."""
    b = codec.RecordBatch(buf)
    b.is_valid()
    list(b)
    b.values()
    d = b.decode()
    [d.headers(i) for i in range(len(d))]


def assert_corrupt_everywhere(codec, buf, error=CorruptRecordError):
    """Every way of reading ``buf`` as one batch fails with ``error``."""
    with time_limit(30):
        with pytest.raises(error):
            read_all(codec, buf)
        try:
            batch = codec.RecordBatch(buf)
        except error:
            return
        for read in (list, lambda b: b.values(), lambda b: b.decode()):
            with pytest.raises(error):
                read(batch)


def one_record(body: bytes, count: int = 1) -> bytes:
    return raw_batch(zigzag_varint(len(body)) + body, count)


# --- framing --------------------------------------------------------------------------------


def test_every_truncation(codec):
    raw = good_batch(codec)
    for cut in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            codec.RecordBatch(raw[:cut])
        assert list(codec.iter_batches(raw[:cut])) == []
        assert codec.scan_batches(raw[:cut]).error == ("partial" if cut else None)


@pytest.mark.parametrize("magic", [0, 1, 3, 127, -128, -1])
def test_wrong_magic(codec, magic):
    with pytest.raises(CorruptRecordError):
        codec.RecordBatch(patch(good_batch(codec), "magic", magic))


def test_bad_crc(codec):
    raw = bytearray(good_batch(codec))
    raw[40] ^= 0x04
    b = codec.RecordBatch(bytes(raw))
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError):
        b.validate()
    with pytest.raises(CorruptRecordError):
        list(codec.iter_batches(bytes(raw), validate=True))
    assert codec.scan_batches(bytes(raw)).error.startswith("CRC mismatch")


@pytest.mark.parametrize("delta", [1, 2, 1000, 2**20])
def test_length_past_the_buffer(codec, delta):
    raw = good_batch(codec)
    bad = patch(raw, "length", len(raw) - 12 + delta)
    with pytest.raises(CorruptRecordError):
        codec.RecordBatch(bad)
    assert list(codec.iter_batches(bad)) == []  # looks like a torn tail
    assert codec.scan_batches(bad).error == "partial"
    with pytest.raises(CorruptRecordError):
        codec.assign_offsets(bytearray(bad), 0, 0)


def test_largest_safe_length(codec):
    # 2**31 - 13 is the largest Length for which Length + 12 still fits an int32.
    bad = patch(good_batch(codec), "length", 2**31 - 13)
    with pytest.raises(CorruptRecordError):
        codec.RecordBatch(bad)
    assert codec.scan_batches(bad).error == "partial"


@pytest.mark.parametrize("length", [-(2**31), -1, 0, 48])
def test_length_below_the_minimum(codec, length):
    bad = patch(good_batch(codec), "length", length)
    with pytest.raises(CorruptRecordError):
        codec.RecordBatch(bad)
    with pytest.raises(CorruptRecordError):
        list(codec.iter_batches(bad))
    assert codec.scan_batches(bad).error.startswith("invalid batch length")


@pytest.mark.parametrize("count", [-1, -(2**31)])
def test_negative_record_count(codec, count):
    with pytest.raises(CorruptRecordError):
        codec.RecordBatch(patch(good_batch(codec), "records_count", count))


@pytest.mark.parametrize("count", [4, 100, 2**31 - 1])
def test_record_count_larger_than_the_records(codec, count):
    assert_corrupt_everywhere(codec, patch(good_batch(codec), "records_count", count))


def test_huge_record_count_allocates_nothing_big(codec):
    bad = patch(good_batch(codec), "records_count", 2**31 - 1)
    tracemalloc.start()
    try:
        for read in (list, lambda b: b.values(), lambda b: b.decode()):
            with pytest.raises(CorruptRecordError):
                read(codec.RecordBatch(bad))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("count", [0, 1, 2])
def test_record_count_smaller_than_the_records(codec, count):
    assert_corrupt_everywhere(codec, patch(good_batch(codec), "records_count", count))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_reserved_codec_ids(codec, codec_id):
    raw = good_batch(codec)
    attrs = struct.unpack_from(">h", raw, 21)[0]
    assert_corrupt_everywhere(codec, patch(raw, "attributes", attrs | codec_id), UnsupportedCodecError)


# --- records -------------------------------------------------------------------------------------
#
# Record body: attributes, ts delta, offset delta, key length [key], value length [value],
# header count [headers]; the helpers build the rest of the batch around it.

@pytest.mark.parametrize(("name", "body"), [
    ("negative key length", b"\x00\x00\x00\x03\x01\x00"),
    ("very negative key length", b"\x00\x00\x00" + zigzag_varint(-(2**31)) + b"\x01\x00"),
    ("key past the record", b"\x00\x00\x00\x10abc\x01\x00"),
    ("negative value length", b"\x00\x00\x00\x01\x05\x00"),
    ("value past the record", b"\x00\x00\x00\x01\x7fxyz\x00"),
    ("negative header count", b"\x00\x00\x00\x01\x01\x03"),
    ("huge header count", b"\x00\x00\x00\x01\x01" + zigzag_varint(2**31 - 1)),
    ("negative header key length", b"\x00\x00\x00\x01\x01\x02\x01\x01"),
    ("header key past the record", b"\x00\x00\x00\x01\x01\x02\x20ab\x01"),
    ("negative header value length", b"\x00\x00\x00\x01\x01\x02\x02a\x03"),
    ("header value past the record", b"\x00\x00\x00\x01\x01\x02\x02a\x20b"),
    ("header key not UTF-8", b"\x00\x00\x00\x01\x01\x02\x02\xff\x01"),
    ("over-long key length varint", b"\x00\x00\x00" + b"\xff" * 5 + b"\x01\x01\x00"),
    ("over-long offset delta varint", b"\x00\x00" + b"\x80" * 5 + b"\x00\x01\x01\x00"),
    ("over-long timestamp varint", b"\x00" + b"\xff" * 10 + b"\x01\x00\x01\x01\x00"),
    ("truncated varint at the end", b"\x00\x00\x00\x01\x01\x80"),
    ("fields shorter than the record", b"\x00\x00\x00\x01\x01\x00\x00\x00"),
    ("only attributes", b"\x00"),
])
def test_malformed_record(codec, name, body):
    assert_corrupt_everywhere(codec, one_record(body))


@pytest.mark.parametrize("length", [-1, -100, 0, 5, 1000, 2**31 - 1])
def test_bad_record_length(codec, length):
    body = b"\x00\x00\x00\x01\x02v\x00"
    assert_corrupt_everywhere(codec, raw_batch(zigzag_varint(length) + body, 1))


def test_over_long_record_length_varint(codec):
    assert_corrupt_everywhere(codec, raw_batch(b"\x8e\x80\x80\x80\x80\x00" + b"\x00" * 7, 1))


def test_trailing_bytes_after_the_last_record(codec):
    records = raw_record(0, 0, None, b"v")
    assert_corrupt_everywhere(codec, raw_batch(records + b"\x00", 1))
    assert_corrupt_everywhere(codec, raw_batch(records + records, 1))


def test_valid_records_still_read_before_a_bad_one(codec):
    bad = raw_batch(raw_record(0, 0, None, b"ok") + b"\x0e\x00\x00\x02\x09", 2)
    it = iter(codec.RecordBatch(bad))
    assert next(it).value == b"ok"
    with pytest.raises(CorruptRecordError):
        next(it)


# --- offsets and timestamps past int64 ----------------------------------------------------------------


def _overflowing_batches():
    offsets = raw_batch(raw_record(0, 0, None, b"a") + raw_record(1, 0, None, b"b"), 2,
                        base_offset=2**63 - 1)
    stamps = raw_batch(raw_record(0, 0, None, b"a") + raw_record(1, 2**40, None, b"b"), 2,
                       base_timestamp=2**63 - 1)
    return offsets, stamps


def test_int64_overflow_is_a_result_or_typed_error(codec):
    # Regression: pure decode()/scan_batches raised OverflowError here (fixed in a9e37c0).
    for buf in _overflowing_batches():
        try:
            read_all(codec, buf)
            codec.scan_batches(buf)
        except TYPED_ERRORS:
            pass


def test_int64_sums_wrap_like_java(codec):
    # Kafka computes baseOffset + offsetDelta and baseTimestamp + timestampDelta as Java longs.
    offsets, stamps = _overflowing_batches()
    assert [r.offset for r in codec.RecordBatch(offsets)] == [2**63 - 1, -(2**63)]
    assert codec.RecordBatch(offsets).decode().offsets.tolist() == [2**63 - 1, -(2**63)]
    assert [r.timestamp for r in codec.RecordBatch(stamps)] == [2**63 - 1, -(2**63) + 2**40 - 1]


# --- random input ----------------------------------------------------------------------------------


@hyp(300)
@given(st.binary(max_size=400))
def test_random_bytes_only_typed_errors(codec, data):
    with time_limit(30):
        for call in (lambda: read_all(codec, data),
                     lambda: list(codec.iter_batches(data, validate=True)),
                     lambda: [read_all(codec, b.tobytes()) for b in codec.iter_batches(data)],
                     lambda: codec.scan_batches(data),
                     lambda: codec.assign_offsets(bytearray(data), 0, 0),
                     lambda: codec.decode_varint(data),
                     lambda: codec.decode_unsigned_varint(data)):
            try:
                call()
            except TYPED_ERRORS:
                pass


@hyp(300)
@given(st.binary(max_size=300), st.integers(0, 200))
def test_random_records_behind_a_valid_header(codec, records, count):
    buf = raw_batch(records, count)
    with time_limit(30):
        try:
            read_all(codec, buf)
        except TYPED_ERRORS:
            pass


@hyp(300)
@given(st.binary(max_size=4).map(lambda k: k.ljust(4, b"\x00")), st.binary(max_size=80))
def test_random_control_values_only_typed_errors(key, value):
    try:
        decode_control_record(key, value)
    except CorruptRecordError:
        pass


def test_header_sized_buffers_of_every_length(codec):
    for n in range(HEADER_SIZE + 2):
        data = bytes(n)
        with pytest.raises(CorruptRecordError):
            codec.RecordBatch(data)
        if n < 12:
            assert list(codec.iter_batches(data)) == []
        else:  # Length 0 is below the minimum
            with pytest.raises(CorruptRecordError):
                list(codec.iter_batches(data))
