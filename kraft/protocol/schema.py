"""The declarative schema DSL: version ranges, field types, ``Field`` and the ``Struct`` base.

A message or nested struct is a class whose ``FIELDS`` tuple lists :class:`Field` objects, the
way Kafka's message JSON lists fields::

    class Partition(Struct):
        FIELDS = (
            Field("partition_index", INT32),
            Field("replica_directory_id", UUID, "1+", ignorable=True),
            Field("pre_vote", BOOL, "2+"),
        )

Declaring the class gives it ``__slots__``, a keyword-only ``__init__`` with the defaults,
``__eq__`` and ``__repr__``; all generated once, at class creation. Encoding and decoding
live in ``codec.py``; this module only describes shapes, so it must not touch bytes.
"""

from __future__ import annotations

import uuid

from kraft.protocol.primitives import ZERO_UUID, uuid_to_base64


class Versions:
    """An inclusive version range written as Kafka writes it: ``"0+"``, ``"1-14"``, ``"3"``, ``"none"``."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: int, hi: int | None):
        self.lo = lo
        self.hi = hi  # None means open-ended

    @classmethod
    def parse(cls, spec) -> "Versions":
        if isinstance(spec, Versions):
            return spec
        if spec is None or spec == "none":
            return cls(1, 0)  # empty
        spec = str(spec).strip()
        if spec.endswith("+"):
            return cls(int(spec[:-1]), None)
        if "-" in spec:
            lo, hi = spec.split("-")
            return cls(int(lo), int(hi))
        return cls(int(spec), int(spec))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version and (self.hi is None or version <= self.hi)

    @property
    def empty(self) -> bool:
        return self.hi is not None and self.hi < self.lo

    def __eq__(self, other):
        return isinstance(other, Versions) and (self.lo, self.hi) == (other.lo, other.hi)

    def __hash__(self):
        return hash((self.lo, self.hi))

    def __repr__(self):
        if self.empty:
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        return f"{self.lo}" if self.lo == self.hi else f"{self.lo}-{self.hi}"


# --- field types ----------------------------------------------------------------


class Primitive:
    """A scalar wire type. ``fmt`` is its ``struct`` code when it has a fixed width."""

    __slots__ = ("name", "fmt", "size", "default")

    def __init__(self, name: str, fmt: str | None, size: int | None, default):
        self.name, self.fmt, self.size, self.default = name, fmt, size, default

    def __repr__(self):
        return self.name.upper()


INT8 = Primitive("int8", "b", 1, 0)
INT16 = Primitive("int16", "h", 2, 0)
INT32 = Primitive("int32", "i", 4, 0)
INT64 = Primitive("int64", "q", 8, 0)
UINT16 = Primitive("uint16", "H", 2, 0)
UINT32 = Primitive("uint32", "I", 4, 0)
FLOAT64 = Primitive("float64", "d", 8, 0.0)
BOOL = Primitive("bool", "?", 1, False)
UUID = Primitive("uuid", "16s", 16, ZERO_UUID)
UVARINT = Primitive("uvarint", None, None, 0)
VARINT = Primitive("varint", None, None, 0)
STRING = Primitive("string", None, None, "")
BYTES = Primitive("bytes", None, None, b"")
RECORDS = Primitive("records", None, None, b"")

# Types whose value may be null (Kafka allows nullableVersions on these only).
_NULLABLE_KINDS = ("string", "bytes", "records")


class Array:
    """``[]elem`` where elem is a :class:`Primitive` or a :class:`Struct` subclass."""

    __slots__ = ("elem",)

    def __init__(self, elem):
        if not (isinstance(elem, Primitive) or is_struct(elem)):
            raise TypeError(f"array element must be a primitive or a Struct class, not {elem!r}")
        if isinstance(elem, Primitive) and elem.name == "records":
            raise TypeError("arrays of records are not a Kafka type")
        self.elem = elem

    def __repr__(self):
        name = self.elem.__name__ if is_struct(self.elem) else repr(self.elem)
        return f"Array({name})"


def is_struct(t) -> bool:
    return isinstance(t, type) and issubclass(t, Struct)


_MISSING = object()


class Field:
    """One field of a struct: Kafka's name/type/versions/nullableVersions/taggedVersions/tag/
    default/ignorable, with ``name`` in snake_case."""

    __slots__ = ("name", "type", "versions", "nullable", "tag", "tagged", "default", "ignorable", "factory",
                 "null_struct")

    def __init__(self, name: str, type, versions="0+", *, nullable=None, tag: int | None = None,
                 tagged=None, default=_MISSING, ignorable: bool = False):
        if not name.isidentifier() or name.startswith("_") or name == "unknown_tagged_fields":
            raise TypeError(f"bad field name {name!r}")
        if not (isinstance(type, (Primitive, Array)) or is_struct(type)):
            raise TypeError(f"field {name}: unknown type {type!r}")
        self.name = name
        self.type = type
        self.versions = Versions.parse(versions)
        self.nullable = Versions.parse(nullable)
        if not self.nullable.empty:
            kind = type.name if isinstance(type, Primitive) else ("array" if isinstance(type, Array) else "struct")
            if kind not in _NULLABLE_KINDS and kind not in ("array", "struct"):
                raise TypeError(f"field {name}: {kind} cannot be nullable")
        if tag is None and tagged is not None:
            raise TypeError(f"field {name}: tagged versions without a tag")
        self.tag = tag
        self.tagged = Versions.parse(tagged if tagged is not None else (versions if tag is not None else None))
        self.ignorable = ignorable
        if default is _MISSING:
            default = self._type_default()
        elif default is None and self.nullable.empty:
            raise TypeError(f"field {name}: default is null but the field is never nullable")
        elif isinstance(type, Array) or is_struct(type):
            if default is not None:
                raise TypeError(f"field {name}: only null may be given as an array/struct default")
        self.default = default
        # Builds a fresh default for arrays and structs (never shared: messages are mutable); a
        # nullable struct whose default is null has none.
        self.null_struct = is_struct(type) and default is None and not self.nullable.empty
        self.factory = None if self.null_struct else (
            type.new_default if is_struct(type) else (list if self.mutable_default else None))

    def _type_default(self):
        t = self.type
        if isinstance(t, Array):
            return []
        if is_struct(t):
            return None  # replaced by a fresh t() per instance, see ``mutable_default``
        if t.name == "records" and not self.nullable.empty:
            return None
        return t.default

    @property
    def mutable_default(self) -> bool:
        """True when each instance needs its own default (an empty list or a struct)."""
        return (isinstance(self.type, Array) and self.default is not None) or \
            (is_struct(self.type) and not self.null_struct)

    def default_value(self):
        """A fresh default value for this field."""
        return self.factory() if self.factory is not None else self.default

    def tagged_in(self, version: int, flexible: bool) -> bool:
        return self.tag is not None and version in self.tagged and flexible

    def __repr__(self):
        extra = f", tag={self.tag}" if self.tag is not None else ""
        return f"Field({self.name!r}, {self.type!r}, {self.versions!r}{extra})"


# --- struct classes -------------------------------------------------------------


class _Fresh:
    """Sentinel default of generated ``__init__`` parameters that need a new list or struct."""

    def __repr__(self):
        return "<default>"


_FRESH = _Fresh()


class StructMeta(type):
    """Turns a class with ``FIELDS`` into a slotted record class with generated methods."""

    def __new__(mcs, name, bases, ns, **kw):
        fields = tuple(ns.get("FIELDS", ()))
        if "__slots__" not in ns:
            ns["__slots__"] = tuple(f.name for f in fields)
        cls = super().__new__(mcs, name, bases, ns, **kw)
        cls.FIELDS = fields
        cls._PLANS = {}  # (version, flexible, implementation) -> codec plan, filled lazily by codec.py
        _check_fields(cls)
        _install_methods(cls)
        return cls


def _check_fields(cls) -> None:
    names, tags = set(), set()
    for f in cls.FIELDS:
        if not isinstance(f, Field):
            raise TypeError(f"{cls.__qualname__}.FIELDS holds {f!r}, not a Field")
        if f.name in names:
            raise TypeError(f"{cls.__qualname__}: duplicate field {f.name}")
        names.add(f.name)
        if f.tag is not None:
            if f.tag in tags or f.tag < 0:
                raise TypeError(f"{cls.__qualname__}: duplicate or negative tag {f.tag}")
            tags.add(f.tag)


def _install_methods(cls) -> None:
    """Generate ``__init__``, ``new_default`` and ``__eq__`` as straight-line code: building
    and comparing messages is frequent (decoders build defaults for every absent field), so no
    per-field loop runs at call time."""
    fields = cls.FIELDS
    env = {"_FRESH": _FRESH, "_new": object.__new__, "_C": cls}
    params, body, defaults = [], [], []
    for i, f in enumerate(fields):
        if f.factory is not None:
            params.append(f"{f.name}=_FRESH")
            env[f"_F{i}"] = f.factory
            body.append(f"    self.{f.name} = _F{i}() if {f.name} is _FRESH else {f.name}")
            defaults.append(f"    o.{f.name} = _F{i}()")
        else:
            env[f"_D{i}"] = f.default
            params.append(f"{f.name}=_D{i}")
            body.append(f"    self.{f.name} = {f.name}")
            defaults.append(f"    o.{f.name} = _D{i}")
    params.append("unknown_tagged_fields=None")
    body.append("    self.unknown_tagged_fields = unknown_tagged_fields")
    src = f"def __init__(self, *, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    src += "def new_default():\n    o = _new(_C)\n" + "".join(d + "\n" for d in defaults)
    src += "    o.unknown_tagged_fields = None\n    return o\n"
    comparisons = [f"self.{f.name} == other.{f.name}" for f in fields]
    comparisons.append("(self.unknown_tagged_fields or None) == (other.unknown_tagged_fields or None)")
    src += ("def __eq__(self, other):\n"
            "    if type(other) is not type(self):\n"
            "        return NotImplemented\n"
            f"    return {' and '.join(comparisons)}\n")
    exec(compile(src, f"<kraft.protocol struct {cls.__qualname__}>", "exec"), env)
    cls.__init__ = env["__init__"]
    cls.new_default = staticmethod(env["new_default"])  # same as cls(), only faster
    cls.__eq__ = env["__eq__"]
    cls.__hash__ = None  # mutable records


class Struct(metaclass=StructMeta):
    """Base of every message and nested struct. ``unknown_tagged_fields`` keeps tagged fields
    this version does not know, as ``[(tag, bytes)]``, so they survive a decode/encode trip."""

    __slots__ = ("unknown_tagged_fields",)
    FIELDS: tuple = ()

    def __repr__(self):
        parts = []
        for f in self.FIELDS:
            value = getattr(self, f.name)
            if isinstance(value, memoryview) or (f.type is RECORDS and value is not None):
                parts.append(f"{f.name}=<{len(value)} bytes>")
            elif isinstance(value, uuid.UUID):
                parts.append(f"{f.name}={uuid_to_base64(value)}")
            else:
                parts.append(f"{f.name}={value!r}")
        if self.unknown_tagged_fields:
            parts.append(f"unknown_tagged_fields={self.unknown_tagged_fields!r}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    def to_dict(self) -> dict:
        """Plain nested dicts/lists, e.g. for logging or comparing with other implementations."""
        return {f.name: _plain(getattr(self, f.name)) for f in self.FIELDS}


def _plain(value):
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value

