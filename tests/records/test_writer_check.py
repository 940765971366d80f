"""check_writer_batches: the one native pass a leader makes over a writer's batches before
appending them as they arrived. Both implementations, and the same answer from both on
mutated input."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.records import Compression, build_batch, build_control_record_batch, crc32c
from kraft.records.control import SnapshotFooterRecord

OK, CORRUPT, INVALID_RECORD, TOO_LARGE, NO_KEY, BAD_TIMESTAMP = 0, 1, 2, 3, 4, 5
BIG = 1 << 30


def check(codec, data, max_bytes=BIG, max_records=1 << 20, allow_control=False, allow_null=False):
    return codec.check_writer_batches(bytearray(data), max_bytes, max_records, allow_control, allow_null)


def _recrc(batch: bytearray) -> bytearray:
    batch[17:21] = struct.pack(">I", crc32c(bytes(batch[21:])))
    return batch


def test_valid_batches_count_every_record(codec):
    data = codec.build_batch([b"a", b"b"]) + codec.build_batch([b"c"], headers=[[("h", b"v")]])
    assert check(codec, data) == (OK, 3, False, len(data), None)


def test_a_trailing_partial_batch_is_left_out(codec):
    one = codec.build_batch([b"a"])
    outcome, records, _, whole_end, _ = check(codec, one + one[:30])
    assert (outcome, records, whole_end) == (OK, 1, len(one))


def test_compressed_batches_are_reported_not_walked(codec):
    data = codec.build_batch([b"x"] * 5, compression=Compression.GZIP)
    assert check(codec, data)[:3] == (OK, 5, True)


@pytest.mark.parametrize("case, outcome", [
    ("crc", CORRUPT), ("magic", CORRUPT), ("control", CORRUPT), ("null value", INVALID_RECORD),
    ("count", INVALID_RECORD), ("offset delta", INVALID_RECORD), ("size limit", TOO_LARGE),
    ("record limit", TOO_LARGE), ("record length", CORRUPT), ("leftover", CORRUPT),
])
def test_each_defect_gets_its_outcome(codec, case, outcome):
    b = bytearray(codec.build_batch([b"a", b"bb"]))
    kw = {}
    if case == "crc":
        b[-1] ^= 1
    elif case == "magic":
        b[16] = 1
    elif case == "control":
        b = bytearray(build_control_record_batch(SnapshotFooterRecord()))
    elif case == "null value":
        b = bytearray(codec.build_batch([None]))
    elif case == "count":
        b[57:61] = struct.pack(">i", 3)
        _recrc(b)
    elif case == "offset delta":
        b = bytearray(codec.build_batch([b"a", b"bb"]))
        b[61 + 3] = 4  # first record's offset delta varint: zig-zag 2 = 1, not 0
        _recrc(b)
    elif case == "size limit":
        kw["max_bytes"] = len(b) - 1
    elif case == "record limit":
        kw["max_records"] = 1
    elif case == "record length":
        b[61] = 0x7E  # first record claims 63 bytes
        _recrc(b)
    elif case == "leftover":
        b += b"\x00"
        b[8:12] = struct.pack(">i", len(b) - 12)
        _recrc(b)
    got = check(codec, b, **kw)
    assert got[0] == outcome, got
    assert got[4]  # says why


def test_control_batches_pass_when_allowed(codec):
    b = build_control_record_batch(SnapshotFooterRecord())
    assert check(codec, b, allow_control=True)[0] == OK


def test_null_values_pass_when_allowed(codec):
    assert check(codec, codec.build_batch([None, b"a"]), allow_null=True)[:2] == (OK, 2)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_native_and_pure_agree_on_mutated_batches(native, pure, data):
    base = bytearray(native.build_batch([b"k%d" % i for i in range(data.draw(st.integers(1, 5)))],
                                        headers=None) + native.build_batch([b"z"]))
    rng = random.Random(data.draw(st.integers(0, 1 << 30)))
    for _ in range(data.draw(st.integers(1, 4))):
        base[rng.randrange(len(base))] = rng.randrange(256)
    if data.draw(st.booleans()):
        # keep CRCs valid so the record walker sees the damage
        pos = 0
        while pos + 61 <= len(base):
            size = struct.unpack_from(">i", base, pos + 8)[0] + 12
            if size < 61 or pos + size > len(base):
                break
            base[pos + 17:pos + 21] = struct.pack(">I", crc32c(bytes(base[pos + 21:pos + size])))
            pos += size
    allow_null = data.draw(st.booleans())
    rules = (data.draw(st.booleans()), data.draw(st.integers(-(1 << 63), 1 << 62)), (1 << 63) - 1)
    a = native.check_writer_batches(bytearray(base), BIG, 1 << 20, False, allow_null, *rules)
    b = pure.check_writer_batches(bytearray(base), BIG, 1 << 20, False, allow_null, *rules)
    assert a[:4] == b[:4]


def test_topic_record_rules_keys_and_timestamps(codec):
    """A compacted topic's records need keys; CreateTime stamps lie within the bounds (-1 passes);
    a malformed record after a rule break is still CORRUPT (the rules come last)."""
    b = codec.build_batch([b"a", b"b"], keys=[b"k", None], timestamps=[1000, 2000])
    assert codec.check_writer_batches(bytearray(b), BIG, 99, False, True, True)[0] == NO_KEY
    assert codec.check_writer_batches(bytearray(b), BIG, 99, False, True, False)[0] == OK
    assert codec.check_writer_batches(bytearray(b), BIG, 99, False, True, False, 1500, 5000)[0] == BAD_TIMESTAMP
    assert codec.check_writer_batches(bytearray(b), BIG, 99, False, True, False, 0, 1999)[0] == BAD_TIMESTAMP
    assert codec.check_writer_batches(bytearray(b), BIG, 99, False, True, False, 1000, 2000)[:2] == (OK, 2)
    none = codec.build_batch([b"a"], timestamps=[-1])
    assert codec.check_writer_batches(bytearray(none), BIG, 99, False, True, False, 0, 10)[0] == OK
    broken = bytearray(b)
    broken[-1] = 0x7F  # the last record's header count: 63 headers that are not there
    _recrc(broken)
    assert codec.check_writer_batches(broken, BIG, 99, False, True, True)[0] == CORRUPT
