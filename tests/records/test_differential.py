"""Differential tests: the native codec and the pure-Python reference must agree.

Hypothesis generates batches and both builders must write identical bytes, which both
readers must decode identically. Then the bytes are damaged (random bytes, bit flips,
truncations, inserted bytes, header fields and record bytes rewritten with the CRC fixed
so the record parser is reached) and both implementations must give identical results or
both raise the same typed error, never another exception type and never hang.
"""

import struct

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import kraft.records
from kraft.errors import CorruptRecordError
from kraft.records import Compression, compression

from _codec_helpers import (
    FIELD_AT, INT32_OVERFLOW_LENGTHS, TYPED_ERRORS, assign_summary, fix_crc, hyp, outcome,
    read_everything, scan_summary, time_limit,
)

pytestmark = pytest.mark.usefixtures("native")  # skipped under KRAFT_NO_EXTENSIONS

NATIVE = None if kraft.records.IMPLEMENTATION != "native" else kraft.records.implementation("native")
PURE = kraft.records.implementation("python")
CODECS = [c for c in Compression if compression.available(c)]
GUARD_SECONDS = 30

header_st = st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16)))
# Full int64 timestamps: deltas may wrap, as Java's long arithmetic does.
record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=64)),
    st.one_of(st.none(), st.binary(max_size=16)),
    st.one_of(st.none(), st.lists(header_st, max_size=3)),
    st.integers(-(2**63), 2**63 - 1),
)
batch_args_st = st.fixed_dictionaries({
    "base_offset": st.integers(0, 2**63 - 1),
    "partition_leader_epoch": st.integers(-1, 2**31 - 1),
    "compression": st.sampled_from(CODECS),
    "producer_id": st.integers(-1, 2**62),
    "producer_epoch": st.integers(-1, 2**15 - 1),
    "base_sequence": st.integers(-1, 2**31 - 1),
    "transactional": st.booleans(),
    "control": st.booleans(),
    "log_append_time": st.booleans(),
})


def build_with(codec, records, args):
    values, keys, headers, timestamps = (list(x) for x in zip(*records))
    return codec.build_batch(values, keys, headers, timestamps, **args)


def build_incrementally(codec, records, args):
    args = dict(args)
    b = codec.RecordBatchBuilder(compression=args.pop("compression"), **args)
    for value, key, headers, ts in records:
        b.append(value, key=key, headers=headers, timestamp=ts)
    return b.build()


def assert_same_reading(buf):
    with time_limit(GUARD_SECONDS):
        native = read_everything(NATIVE, buf)
        pure = read_everything(PURE, buf)
        assert native == pure
        assert outcome(lambda: scan_summary(NATIVE, buf)) == outcome(lambda: scan_summary(PURE, buf))
        assert assign_summary(NATIVE, buf) == assign_summary(PURE, buf)


# --- well-formed batches --------------------------------------------------------------------


@hyp(150)
@given(st.lists(record_st, min_size=1, max_size=12), batch_args_st)
def test_builders_write_identical_bytes(records, args):
    native = build_with(NATIVE, records, args)
    assert build_with(PURE, records, args) == native
    assert build_incrementally(NATIVE, records, args) == native
    assert build_incrementally(PURE, records, args) == native


@hyp(100)
@given(st.lists(st.lists(record_st, min_size=1, max_size=6), min_size=1, max_size=4), batch_args_st)
def test_readers_decode_identically(batches, args):
    buf = b"".join(build_with(NATIVE, records, args) for records in batches)
    native = read_everything(NATIVE, buf)
    assert native == read_everything(PURE, buf)
    seen, end = native
    assert end == ("ok", None)
    assert all(describe[1] for describe in seen)  # every CRC valid
    flat = [r for describe in seen for r in describe[4][1]]
    expected_values = [v for records in batches for v, _, _, _ in records]
    assert [r[3] for r in flat] == expected_values
    assert scan_summary(NATIVE, buf) == scan_summary(PURE, buf)


def test_control_batches_identical():
    for ctype in range(7):
        assert NATIVE.build_control_batch(ctype, b"\x00\x00v", timestamp=3, base_offset=9,
                                          partition_leader_epoch=2) == \
            PURE.build_control_batch(ctype, b"\x00\x00v", timestamp=3, base_offset=9,
                                     partition_leader_epoch=2)


def test_max_bytes_identical():
    for limit in (0, 61, 70, 100, 500):
        results = []
        for impl in (NATIVE, PURE):
            b = impl.RecordBatchBuilder(max_bytes=limit)
            results.append(([b.append(b"x" * (i * 7 % 40), timestamp=i) for i in range(30)],
                            b.size_in_bytes(), b.build()))
        assert results[0] == results[1]


# --- damaged batches -------------------------------------------------------------------------

valid_buffer_st = st.builds(
    lambda batches, args: b"".join(build_with(NATIVE, r, args) for r in batches),
    st.lists(st.lists(record_st, min_size=1, max_size=5), min_size=1, max_size=3),
    batch_args_st,
)


@hyp(300)
@given(st.binary(max_size=300))
def test_random_bytes(buf):
    assert_same_reading(buf)


@hyp(200)
@given(st.binary(min_size=12, max_size=300), st.integers(49, 400))
def test_random_bytes_behind_a_plausible_header(body, length):
    """Length/magic fixed so the parsers get past the framing checks."""
    buf = bytearray(body.ljust(61, b"\x00"))
    struct.pack_into(">ib", buf, 8, min(length, len(buf) - 12), 2)
    struct.pack_into(">b", buf, 16, 2)
    assert_same_reading(fix_crc(bytes(buf)))


@hyp(200)
@given(valid_buffer_st, st.data())
def test_bit_flips(buf, data):
    buf = bytearray(buf)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] ^= 1 << data.draw(st.integers(0, 7))
    if data.draw(st.booleans()):
        buf = bytearray(fix_crc(bytes(buf)))
    assert_same_reading(bytes(buf))


@hyp(120)
@given(valid_buffer_st, st.data())
def test_truncations(buf, data):
    cut = data.draw(st.integers(0, len(buf)))
    assert_same_reading(buf[:cut])
    assert_same_reading(fix_crc(buf[:cut]) if cut >= 61 else buf[:cut])


@hyp(150)
@given(valid_buffer_st, st.data())
def test_inserted_bytes(buf, data):
    pos = data.draw(st.integers(0, len(buf)))
    extra = data.draw(st.binary(min_size=1, max_size=8))
    mutated = buf[:pos] + extra + buf[pos:]
    assert_same_reading(mutated)
    assert_same_reading(fix_crc(mutated))


INT32_EDGES = [0, 1, -1, 2, 6, 7, 48, 49, 60, 61, 62, 127, 128, 2**15, 2**31 - 13, -(2**31),
               *INT32_OVERFLOW_LENGTHS]
INT64 = st.integers(-(2**63), 2**63 - 1)
field_value_st = {
    "length": st.one_of(st.sampled_from(INT32_EDGES), st.integers(-(2**31), 2**31 - 1)),
    "records_count": st.one_of(st.sampled_from(INT32_EDGES), st.integers(-(2**31), 2**31 - 1)),
    "last_offset_delta": st.one_of(st.sampled_from(INT32_EDGES), st.integers(-(2**31), 2**31 - 1)),
    "magic": st.integers(-128, 127),
    "attributes": st.integers(-(2**15), 2**15 - 1),
    "partition_leader_epoch": st.integers(-(2**31), 2**31 - 1),
    "base_offset": st.one_of(st.sampled_from([2**63 - 1, -(2**63)]), INT64),
    "base_timestamp": st.one_of(st.sampled_from([2**63 - 1, -(2**63)]), INT64),
    "max_timestamp": INT64,
}


@hyp(250)
@given(valid_buffer_st, st.sampled_from(sorted(field_value_st)), st.data())
def test_header_fields_rewritten_with_crc_fixed(buf, field, data):
    value = data.draw(field_value_st[field])
    fmt, off = FIELD_AT[field]
    mutated = bytearray(buf)
    struct.pack_into(fmt, mutated, off, value)
    assert_same_reading(fix_crc(bytes(mutated)))


@hyp(250)
@given(valid_buffer_st, st.data())
def test_record_bytes_rewritten_with_crc_fixed(buf, data):
    """Overwrite bytes inside the first batch's records block (varints, lengths, counts) and
    fix the CRC, so the record parser of both implementations sees the damage."""
    (length,) = struct.unpack_from(">i", buf, 8)
    end = length + 12
    assume(end > 61)
    mutated = bytearray(buf)
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(61, end - 1))
        chunk = data.draw(st.binary(min_size=1, max_size=5))
        mutated[pos : pos + len(chunk)] = chunk[: end - pos]
    assert_same_reading(fix_crc(bytes(mutated[: len(buf)])))


def test_every_error_is_typed():
    """A guard for the guard: outcome() lets untyped exceptions through."""
    with pytest.raises(ZeroDivisionError):
        outcome(lambda: 1 / 0)
    assert outcome(lambda: (_ for _ in ()).throw(CorruptRecordError("x"))) == ("error", "CorruptRecordError")
    assert CorruptRecordError in TYPED_ERRORS


# --- regressions: disagreements found by this file, fixed in a9e37c0 -----------------------------
#
# int64 sums wrap in both like Kafka's Java longs (baseOffset + offsetDelta, baseTimestamp +
# timestampDelta); pure used unbounded ints and raised OverflowError/struct.error.


def test_int64_offsets_past_the_maximum_agree():
    raw = PURE.build_batch([b"a", b"b"], timestamp=1, base_offset=2**63 - 1)
    assert_same_reading(raw)


def test_int64_timestamps_past_the_maximum_agree():
    raw = PURE.build_batch([b"a", b"b"], timestamps=[0, 2**40])
    raw = fix_crc(struct.pack(">q", 2**63 - 1).join([raw[:27], raw[35:]]))
    assert_same_reading(raw)


def test_int64_timestamp_delta_wraps_in_both_builders():
    args = ([b"a", b"b"],)
    kwargs = dict(timestamps=[2**63 - 1, -(2**63)])
    raw = NATIVE.build_batch(*args, **kwargs)
    assert raw == PURE.build_batch(*args, **kwargs)
    for impl in (NATIVE, PURE):
        assert [r.timestamp for r in impl.RecordBatch(raw)] == [2**63 - 1, -(2**63)]


def test_positions_outside_the_buffer_agree():
    # pure used to read buf[-1] for position -1 and to scan "past" the end of the buffer.
    raw = PURE.build_batch([b"a"], timestamp=1)
    for call in (lambda c: c.decode_varint(b"\x00", -1),
                 lambda c: scan_summary_at(c, raw, len(raw) + 5),
                 lambda c: scan_summary_at(c, raw, -1)):
        assert outcome(lambda: call(NATIVE)) == outcome(lambda: call(PURE))


def scan_summary_at(codec, buf, position):
    s = codec.scan_batches(buf, position)
    return s.valid_end, s.error, len(s)
