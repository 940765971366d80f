"""Metadata record instances generated from the schemas, so every record type is tested.

``sample(cls, version)`` fills every field present at ``version`` with a value different from
its default (arrays get two elements, nested structs are filled recursively, so tagged fields
are really written); ``nulls=True`` puts None in every field that may be null at that version.
"""

from __future__ import annotations

import itertools
import uuid

from kraft.metadata.records import METADATA_RECORDS
from kraft.protocol.schema import Array, is_struct

_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1),
           "int64": (-2**63, 2**63 - 1), "uint16": (0, 65535)}


def all_records():
    """[(cls, version)] for every metadata record type at every version."""
    return [(cls, v) for key in sorted(METADATA_RECORDS) for cls in [METADATA_RECORDS[key]]
            for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]


def record_ids(records) -> list[str]:
    return [f"{cls.__name__}-v{v}" for cls, v in records]


def sample(cls, version: int, *, nulls: bool = False, seed: int = 1):
    return _fill(cls, version, itertools.count(seed), nulls)


def _fill(cls, version, counter, nulls):
    kwargs = {}
    for f in cls.FIELDS:
        if version not in f.versions:
            continue
        if nulls and version in f.nullable:
            kwargs[f.name] = None
            continue
        kwargs[f.name] = _value(f.type, f.default, version, counter, nulls)
    return cls(**kwargs)


def _value(t, default, version, counter, nulls):
    if isinstance(t, Array):
        return [_value(t.elem, None, version, counter, nulls) for _ in range(2)]
    if is_struct(t):
        return _fill(t, version, counter, nulls)
    n = next(counter)
    name = t.name
    if name in _RANGES:
        lo, hi = _RANGES[name]
        value = [hi - n, lo + n, n + 1, min(300 + n, hi - 1)][n % 4]
        return value if value != default else value + 1
    if name == "bool":
        return not default
    if name == "float64":
        return 1.5e7 + n
    if name == "uuid":
        return uuid.UUID(int=(n * 0x9E3779B97F4A7C15 + 1) % 2**128 or 1)
    if name == "string":
        return f"s{n}-é\n\"q\""  # non-ASCII and characters JSON must escape
    if name == "bytes":
        return bytes([n % 256, 1, 2, 255])
    raise AssertionError(name)
