"""The schema DSL and codec on their own, with test-only structs (not registered as APIs)."""

import uuid

import pytest

from kraft.errors import ProtocolError
from kraft.protocol.codec import plan
from kraft.protocol.message import DECODE_FAILURES, as_view
from kraft.protocol.schema import (BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16,
                                   UINT32, UUID, UVARINT, VARINT, Array, Field, Struct, Versions)


class Inner(Struct):
    FIELDS = (Field("x", INT32, default=-1), Field("late", INT16, "2+", tag=0))


class AllTypes(Struct):
    FIELDS = (
        Field("i8", INT8), Field("i16", INT16), Field("i32", INT32), Field("i64", INT64),
        Field("u16", UINT16), Field("u32", UINT32), Field("uv", UVARINT), Field("sv", VARINT),
        Field("f64", FLOAT64), Field("b", BOOL), Field("id", UUID),
        Field("s", STRING), Field("ns", STRING, nullable="0+", default=None),
        Field("raw", BYTES), Field("nraw", BYTES, nullable="0+"), Field("recs", RECORDS, nullable="0+"),
        Field("ints", Array(INT64)), Field("names", Array(STRING)), Field("ids", Array(UUID)),
        Field("inner", Inner), Field("inners", Array(Inner), nullable="1+"),
        Field("t5", INT32, "1+", tag=5), Field("t1", STRING, "1+", tag=1, default="d"),
    )


def roundtrip(obj, version, flexible):
    p = plan(type(obj), version, flexible)
    out = bytearray()
    p.encode(obj, out)
    back, end = p.decode(as_view(bytes(out)), 0)
    assert end == len(out)
    return back, bytes(out)


def full():
    return AllTypes(
        i8=-128, i16=32767, i32=-2**31, i64=2**63 - 1, u16=65535, u32=2**32 - 1, uv=2**32 - 1, sv=-2**31,
        f64=-0.25, b=True, id=uuid.uuid4(), s="ünï", ns="x", raw=b"\x00\xff", nraw=None, recs=b"r" * 100,
        ints=[1, -1, 2**40], names=["a", ""], ids=[uuid.UUID(int=5)], inner=Inner(x=3, late=4),
        inners=[Inner(), Inner(x=9)], t5=55, t1="one")


@pytest.mark.parametrize("version,flexible", [(0, False), (0, True), (1, True), (2, True)])
def test_every_type_round_trips(version, flexible):
    obj = full()
    if not flexible or version < 2:
        obj.inner.late = 0
        for i in obj.inners:
            i.late = 0
    if version == 0:
        obj.t5, obj.t1 = 0, "d"
    back, _ = roundtrip(obj, version, flexible)
    assert back == obj


def test_tagged_in_a_non_flexible_version_is_a_schema_error():
    with pytest.raises(TypeError, match="tagged in non-flexible"):
        roundtrip(AllTypes(), 1, False)


def test_varint_encodings():
    class V(Struct):
        FIELDS = (Field("u", UVARINT), Field("s", VARINT))

    _, data = roundtrip(V(u=300, s=-1), 0, False)
    assert data == bytes.fromhex("ac02 01")  # 300 = 0b10_0101100; zig-zag(-1) = 1
    _, data = roundtrip(V(u=0, s=2**31 - 1), 0, False)
    assert data == bytes.fromhex("00 feffffff0f")


def test_tags_are_written_in_ascending_order_and_defaults_are_omitted():
    obj = AllTypes(t5=7, t1="z")
    _, data = roundtrip(obj, 1, True)
    # ... inners, then the tag section: 2 fields, tag 1 first even though declared last.
    assert data.endswith(bytes.fromhex("02 01 02 02 7a 05 04 00000007"))
    _, data = roundtrip(AllTypes(), 1, True)
    assert data.endswith(bytes.fromhex("ffffffff 00 01 00"))  # inner.x=-1, its tags, inners[], no tags


def test_unknown_tags_are_merged_in_order_with_known_ones():
    obj = AllTypes(t5=7)
    obj.unknown_tagged_fields = [(3, b"\xaa"), (9, b"")]
    back, data = roundtrip(obj, 1, True)
    assert data.endswith(bytes.fromhex("03 03 01 aa 05 04 00000007 09 00"))
    assert back.unknown_tagged_fields == [(3, b"\xaa"), (9, b"")] and back.t5 == 7


def test_a_known_tag_of_another_version_is_unknown_here():
    inner = Inner(x=1, late=6)
    p2, p1 = plan(Inner, 2, True), plan(Inner, 1, True)
    out = bytearray()
    p2.encode(inner, out)
    old, _ = p1.decode(as_view(bytes(out)), 0)
    assert old.late == 0 and old.unknown_tagged_fields == [(0, b"\x00\x06")]


def test_decoded_defaults_are_fresh_objects():
    a, _ = roundtrip(AllTypes(), 0, False)
    b, _ = roundtrip(AllTypes(), 0, False)
    a.ints.append(1)
    a.inner.x = 42
    assert b.ints == [] and b.inner.x == -1 and AllTypes().inner.x == -1


def test_struct_basics():
    a = Inner(x=1)
    assert a == Inner(x=1) and a != Inner(x=2) and a != object()
    assert repr(a) == "Inner(x=1, late=0)"
    assert Inner.new_default() == Inner()
    with pytest.raises(TypeError):
        Inner(y=1)
    with pytest.raises(AttributeError):
        a.y = 1  # slots: a typo cannot create a field
    assert AllTypes(recs=b"abc").to_dict()["recs"] == b"abc"
    assert "recs=<3 bytes>" in repr(AllTypes(recs=b"abc"))


def test_schema_mistakes_are_caught_when_the_class_is_defined():
    with pytest.raises(TypeError, match="duplicate field"):
        class A(Struct):
            FIELDS = (Field("a", INT8), Field("a", INT8))
    with pytest.raises(TypeError, match="tag"):
        class B(Struct):
            FIELDS = (Field("a", INT8, tag=0), Field("b", INT8, tag=0))
    with pytest.raises(TypeError, match="cannot be nullable"):
        Field("a", INT32, nullable="0+")
    with pytest.raises(TypeError, match="never nullable"):
        Field("a", STRING, default=None)
    with pytest.raises(TypeError):
        Field("BadName!", INT8)
    with pytest.raises(TypeError):
        Array(RECORDS)


def test_versions():
    assert 3 in Versions.parse("3+") and 2 not in Versions.parse("3+")
    assert [v in Versions.parse("1-2") for v in range(4)] == [False, True, True, False]
    assert 0 in Versions.parse("0") and 1 not in Versions.parse("0")
    assert Versions.parse("none").empty and 0 not in Versions.parse("none")
    assert [repr(Versions.parse(s)) for s in ("0+", "1-14", "3", "none")] == ["0+", "1-14", "3", "none"]


def test_truncated_struct_raises_low_level_errors_that_messages_convert():
    p = plan(AllTypes, 0, False)
    out = bytearray()
    p.encode(AllTypes(), out)
    for cut in range(len(out)):
        with pytest.raises(DECODE_FAILURES + (ProtocolError,)):
            p.decode(as_view(bytes(out[:cut])), 0)
