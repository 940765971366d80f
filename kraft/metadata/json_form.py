"""Metadata records as JSON, the way ``kafka-dump-log --cluster-metadata-decoder`` prints them.

Kafka prints ``{"type":"TOPIC_RECORD","version":0,"data":{...}}`` where ``data`` comes from the
generated ``*JsonConverter.write``: fields in schema order, named in camelCase, only the fields
the version has; a tagged field only when it differs from its default; int8/16/32/64 as numbers,
uuids in base64url without padding, bytes in standard base64, float64 as Java's
``Double.toString``; unknown tagged fields are not printed. :func:`record_json` builds that
text byte for byte (Jackson's compact form and string escapes); :func:`record_to_json` gives
the same as plain Python values and :func:`record_from_json` reads either back. Used by
dump-log, the metadata shell and Spark; this module must not do I/O.
"""

from __future__ import annotations

import base64
import binascii
import math
from decimal import Decimal

from kraft.errors import MetadataParseError
from kraft.metadata.records import RECORDS_BY_TYPE_NAME, MetadataRecord
from kraft.metadata.serde import RecordAndVersion
from kraft.protocol.primitives import uuid_from_base64, uuid_to_base64
from kraft.protocol.schema import Array, Primitive


def camel_case(snake: str) -> str:
    """``topic_id`` -> ``topicId`` (Kafka's camelCaseName of ``TopicId``)."""
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def java_double_str(x: float) -> str:
    """Java's ``Double.toString``: plain decimal in [1e-3, 1e7), else ``d.dddE±n``; both with
    the shortest digits that round-trip (as Python's ``repr``)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    ax = abs(x)
    if 1e-3 <= ax < 1e7:
        text = repr(ax)
        if "e" in text:  # repr switches to exponents below 1e-4 only, but be safe
            text = f"{Decimal(text):f}"
        return sign + (text if "." in text else text + ".0")
    _, digits, exponent = Decimal(repr(ax)).as_tuple()
    sig = "".join(map(str, digits)).rstrip("0") or "0"
    sci_exponent = len(digits) + exponent - 1
    return f"{sign}{sig[0]}.{sig[1:] or '0'}E{sci_exponent}"


# --- record -> JSON --------------------------------------------------------------


def _value_to_json(t, value, version: int):
    if isinstance(t, Primitive):
        name = t.name
        if value is None:
            return None
        if name == "uuid":
            return uuid_to_base64(value)
        if name == "bytes":
            return base64.b64encode(bytes(value)).decode("ascii")
        return value
    if value is None:
        return None
    if isinstance(t, Array):
        return [_value_to_json(t.elem, v, version) for v in value]
    return _struct_to_json(value, version)


def _struct_to_json(obj, version: int) -> dict:
    data = {}
    for f in obj.FIELDS:
        if version not in f.versions:
            continue
        value = getattr(obj, f.name)
        if f.tag is not None and version in f.tagged and value == f.default_value():
            continue
        data[camel_case(f.name)] = _value_to_json(f.type, value, version)
    return data


def record_to_json(record: MetadataRecord, version: int | None = None) -> dict:
    """``{"type": ..., "version": ..., "data": {...}}`` as plain Python values."""
    if version is None:
        version = record.MAX_VERSION
    return {"type": record.TYPE_NAME, "version": version, "data": _struct_to_json(record, version)}


# Jackson escapes '"', '\\' and control characters; short forms for \b \t \n \f \r, else \u00XX
# with upper-case hex. Everything else (non-ASCII included) is written as is.
_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r", 0x22: '\\"', 0x5C: "\\\\"})


def _dump(value, out: list) -> None:
    if isinstance(value, str):
        out.append('"' + value.translate(_ESCAPES) + '"')
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, float):
        text = java_double_str(value)
        # Jackson quotes non-finite numbers (QUOTE_NON_NUMERIC_NUMBERS is on by default).
        out.append(text if math.isfinite(value) else f'"{text}"')
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for k, v in value.items():
            if not first:
                out.append(",")
            first = False
            _dump(k, out)
            out.append(":")
            _dump(v, out)
        out.append("}")
    else:
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _dump(v, out)
        out.append("]")


def message_json(obj, version: int) -> dict:
    """Any schema message or struct as Kafka's generated ``*JsonConverter.write`` gives it."""
    return _struct_to_json(obj, version)


def compact_json(value) -> str:
    """``value`` (dicts, lists, str, int, ...) as Jackson's compact text."""
    out: list[str] = []
    _dump(value, out)
    return "".join(out)


def record_json(record: MetadataRecord, version: int | None = None) -> str:
    """The line kafka-dump-log prints for this record's payload, e.g.
    ``{"type":"TOPIC_RECORD","version":0,"data":{"name":"foo","topicId":"..."}}``.
    Written by a per-(record type, version) plan of field writers (the same text as
    :func:`_reference_json`, without a dict per record: Spark's audit prints millions)."""
    if version is None:
        version = record.MAX_VERSION
    return ('{"type":"' + record.TYPE_NAME.translate(_ESCAPES) + '","version":' + str(version) + ',"data":'
            + _struct_writer(type(record), version)(record) + "}")


def _reference_json(record: MetadataRecord, version: int | None = None) -> str:
    """:func:`record_json` the plain way (``record_to_json`` then dump): the tests' reference."""
    out: list[str] = []
    _dump(record_to_json(record, version), out)
    return "".join(out)


_INTEGERS = frozenset(("int8", "int16", "int32", "int64", "uint16", "uint32", "uvarint", "varint"))
_WRITERS: dict = {}
#: uuid -> its quoted text; topic ids repeat in every partition record (bounded, then cleared).
_UUID_TEXT: dict = {}
_UUID_TEXT_LIMIT = 1 << 16


def _int_text(v) -> str:
    return "null" if v is None else str(v)


def _string_text(v) -> str:
    return "null" if v is None else '"' + v.translate(_ESCAPES) + '"'


def _bool_text(v) -> str:
    return "null" if v is None else ("true" if v else "false")


def _uuid_text(v) -> str:
    text = _UUID_TEXT.get(v)
    if text is None:
        if v is None:
            return "null"
        if len(_UUID_TEXT) >= _UUID_TEXT_LIMIT:
            _UUID_TEXT.clear()
        text = _UUID_TEXT[v] = '"' + uuid_to_base64(v) + '"'
    return text


def _int_array_text(v) -> str:
    return "null" if v is None else "[" + ",".join(map(str, v)) + "]"


def _value_writer(t, version: int):
    """``value -> JSON text`` for a field of type ``t`` at ``version``."""
    if isinstance(t, Primitive):
        if t.name in _INTEGERS:
            return _int_text
        if t.name == "string":
            return _string_text
        if t.name == "bool":
            return _bool_text
        if t.name == "uuid":
            return _uuid_text
    elif isinstance(t, Array):
        if isinstance(t.elem, Primitive) and t.elem.name in _INTEGERS:
            return _int_array_text
        elem = _value_writer(t.elem, version)
        return lambda v: "null" if v is None else "[" + ",".join(map(elem, v)) + "]"
    else:
        return _struct_writer(t, version)

    def generic(v, t=t):  # bytes, float64, records: rare in metadata, written the plain way
        out: list[str] = []
        _dump(_value_to_json(t, v, version), out)
        return "".join(out)
    return generic


def _struct_writer(cls, version: int):
    """``struct -> JSON object text``, built once per (class, version): the fields the
    version has, in schema order; a tagged field only when it differs from its default."""
    writer = _WRITERS.get((cls, version))
    if writer is not None:
        return writer
    plain, tagged = [], []
    for f in cls.FIELDS:
        if version not in f.versions:
            continue
        key = '"' + camel_case(f.name).translate(_ESCAPES) + '":'
        step = (key, f.name, _value_writer(f.type, version))
        if f.tag is not None and version in f.tagged:
            tagged.append(step + (f.default_value(),))  # compared only, never handed out
            plain.append(None)  # keeps schema order: filled per record
        else:
            plain.append(step)
    if not tagged:
        steps = tuple(plain)

        def writer(obj):
            if obj is None:
                return "null"
            return "{" + ",".join([key + write(getattr(obj, name)) for key, name, write in steps]) + "}"
    else:
        steps = tuple(plain)
        tags = iter(tagged)
        filled = tuple(s if s is not None else next(tags) for s in steps)

        def writer(obj):
            if obj is None:
                return "null"
            parts = []
            for step in filled:
                value = getattr(obj, step[1])
                if len(step) == 4 and value == step[3]:
                    continue
                parts.append(step[0] + step[2](value))
            return "{" + ",".join(parts) + "}"
    _WRITERS[(cls, version)] = writer
    return writer


# --- JSON -> record --------------------------------------------------------------


def _value_from_json(t, value, where: str):
    if value is None:
        return None
    if isinstance(t, Primitive):
        name = t.name
        if name == "uuid":
            return uuid_from_base64(value)
        if name == "bytes":
            return base64.b64decode(value, validate=True)
        if name == "float64":
            if isinstance(value, str):
                return float(value.replace("Infinity", "inf"))
            return float(value)
        if name == "string":
            if not isinstance(value, str):
                raise ValueError(f"{where}: expected a string")
            return value
        if name == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{where}: expected a boolean")
            return value
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{where}: expected an integer")
        return value
    if isinstance(t, Array):
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected an array")
        return [_value_from_json(t.elem, v, where) for v in value]
    return _struct_from_json(t, value, where)


def _struct_from_json(cls, data, where: str):
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object")
    obj = cls.new_default()
    for f in cls.FIELDS:
        key = camel_case(f.name)
        if key in data:
            setattr(obj, f.name, _value_from_json(f.type, data[key], f"{where}.{key}"))
    return obj


def record_from_json(doc: dict) -> RecordAndVersion:
    """The record and version of a ``{"type", "version", "data"}`` object (absent fields take
    their defaults). Raises :class:`MetadataParseError` for anything else."""
    try:
        cls = RECORDS_BY_TYPE_NAME.get(doc["type"])
        if cls is None:
            raise ValueError(f"unknown record type {doc['type']!r}")
        version = doc["version"]
        if not cls.supports(version):
            raise ValueError(f"unsupported version {version} of {cls.__name__}")
        record = _struct_from_json(cls, doc.get("data", {}), cls.__name__)
    except (KeyError, TypeError, ValueError, binascii.Error) as e:
        raise MetadataParseError(f"not a metadata record in JSON form: {e}") from e
    return RecordAndVersion(record, version)

