"""Message instances generated from the schemas, so every new schema is tested automatically.

``sample(cls, version)`` fills every field that exists at ``version`` with a value different
from its default (arrays get two elements, nested structs are filled recursively, tagged fields
are therefore really written). ``nulls=True`` instead puts None in every field that may be null
at that version. Values come from a counter so that no two fields share a value by accident.
"""

from __future__ import annotations

import itertools
import struct
import uuid

from hypothesis import strategies as st

from kraft.protocol.message import REQUESTS, RESPONSES
from kraft.protocol.schema import Array, Primitive, is_struct

_RANGES = {
    "int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1),
    "uint16": (0, 65535), "uint32": (0, 2**32 - 1), "uvarint": (0, 2**32 - 1), "varint": (-2**31, 2**31 - 1),
}


def all_messages():
    """[(cls, version)] for every registered request and response at every supported version."""
    out = []
    for registry in (REQUESTS, RESPONSES):
        for api_key in sorted(registry):
            cls = registry[api_key]
            out += [(cls, v) for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]
    return out


def message_ids(messages) -> list[str]:
    return [f"{cls.__name__}-v{version}" for cls, version in messages]


class _Values:
    def __init__(self, seed: int):
        self.counter = itertools.count(seed)

    def primitive(self, t: Primitive, default):
        n = next(self.counter)
        name = t.name
        if name in _RANGES:
            lo, hi = _RANGES[name]
            # Large magnitudes exercise every byte of the width (and multi-byte varints).
            value = [hi - n, lo + n, n + 1, min(300 + n, hi - 1)][n % 4]
            return value if value != default else value - 1 if value > lo else value + 1
        if name == "bool":
            return not default
        if name == "float64":
            return 1.5 + n
        if name == "uuid":
            return uuid.UUID(int=(n * 0x9E3779B97F4A7C15 + 1) % 2**128 or 1)
        if name == "string":
            return f"s{n}-é"  # non-ASCII: the length prefix counts bytes, not characters
        if name == "bytes":
            return bytes([n % 256, 1, 2, 3])
        if name == "records":
            return bytes(range(n % 7, n % 7 + 61))  # a RecordBatch header's worth of bytes
        raise AssertionError(name)


def sample(cls, version: int, *, nulls: bool = False, seed: int = 1, unknown_tags: bool = False):
    return _fill(cls, version, cls.is_flexible(version), _Values(seed), nulls, unknown_tags)


def _fill(cls, version: int, flexible: bool, values: _Values, nulls: bool, unknown_tags: bool):
    kwargs = {}
    for f in cls.FIELDS:
        if version not in f.versions:
            continue
        if nulls and version in f.nullable and f.default is not None:
            kwargs[f.name] = None
            continue
        kwargs[f.name] = _value(f.type, f.default, version, flexible, values, nulls, unknown_tags)
    obj = cls(**kwargs)
    if unknown_tags and flexible:
        # Tags far above any real one; kept on decode and written back in ascending order.
        obj.unknown_tagged_fields = [(900 + next(values.counter) % 50, b"\x01\x02"), (999, b"")]
        obj.unknown_tagged_fields.sort()
    return obj


def _value(t, default, version, flexible, values, nulls, unknown_tags):
    if isinstance(t, Array):
        return [_value(t.elem, None, version, flexible, values, nulls, unknown_tags) for _ in range(2)]
    if is_struct(t):
        return _fill(t, version, flexible, values, nulls, unknown_tags)
    return values.primitive(t, default)


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """``data`` with 1-4 damages: bytes set, inserted, deleted, the tail cut, extreme int32s
    planted (lengths and counts are where the danger is) or over-long varints inserted."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["set", "insert", "delete", "truncate", "int", "varint"]))
        pos = draw(st.integers(0, max(0, len(buf) - 1)))
        if kind == "set" and buf:
            buf[pos] = draw(st.integers(0, 255))
        elif kind == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and buf:
            del buf[pos:pos + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del buf[pos:]
        elif kind == "int" and len(buf) >= pos + 4:
            buf[pos:pos + 4] = struct.pack(">i", draw(st.sampled_from([-1, -2, -(2**31), 2**31 - 1, 2**24, 0])))
        elif kind == "varint":
            buf[pos:pos] = draw(st.sampled_from([b"\x80\x80\x80\x80\x80", b"\xff\xff\xff\xff\x7f", b"\x80"]))
    return bytes(buf)
