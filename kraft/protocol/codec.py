"""The one codec: compiles a struct's schema into an encoder and a decoder per (version, flexible).

Two implementations of the same plan: ``kraft._native._wire`` interprets it natively (the
default when built), and the generated Python below is its pure twin and reference
(``KRAFT_NO_EXTENSIONS=1``, or when the extension is not built). ``plan(..., impl=)`` gives
either, so tests compare them on the same messages.

For each struct class and version we generate straight-line Python source once (``exec``),
cache it in ``cls._PLANS`` and reuse it for every message: no schema walking, no ``getattr``
by name, no per-field dispatch at call time. Runs of fixed-width fields are packed and
unpacked with one precompiled ``struct.Struct``; everything else calls the small bounds-checked
helpers in ``primitives.py``. The same generator handles classic and flexible versions:
compact lengths, and after every struct a tagged-field section (ascending tags, fields equal to
their default omitted, unknown tags kept as ``[(tag, bytes)]`` and written back).

Encoders have the signature ``encode(obj, out: bytearray) -> None``; decoders
``decode(buf, pos) -> (obj, new_pos)`` and may raise ``struct.error``/``IndexError``/
``ValueError`` on truncated input, which ``message.py`` turns into :class:`ProtocolError`.
This module must not know about headers, framing or particular messages.
"""

from __future__ import annotations

import os
import struct

from kraft.errors import EncodeError, ProtocolError, UnsupportedVersionError
from kraft.protocol import primitives as P
from kraft.protocol.schema import Array, Field, Primitive, is_struct

NATIVE_IMPORT_ERROR: Exception | None = None
_wire = None
if not os.environ.get("KRAFT_NO_EXTENSIONS"):
    try:
        from kraft._native import _wire
    except ImportError as exc:  # not built: the generated Python codec, but say so
        NATIVE_IMPORT_ERROR = exc
IMPLEMENTATION = "native" if _wire is not None else "python"


class Plan:
    """The compiled codec of one struct at one (version, flexible). ``native``: the
    ``_wire.Plan`` behind a native plan's encode and decode (None for a Python plan)."""

    __slots__ = ("encode", "decode", "min_size", "source", "native")

    def __init__(self, encode, decode, min_size: int, source: str, native=None):
        self.encode, self.decode, self.min_size, self.source, self.native = encode, decode, min_size, source, native


def plan(cls, version: int, flexible: bool, impl: str | None = None) -> Plan:
    """The cached plan of ``cls`` at ``version``, built on first use; ``impl`` "native" or
    "python" (default: ``IMPLEMENTATION``; "native" needs the extension)."""
    impl = impl or IMPLEMENTATION
    key = (version, flexible, impl)
    p = cls._PLANS.get(key)
    if p is None:
        if impl == "python":
            p = cls._PLANS[key] = _Builder(cls, version, flexible).build()
        elif impl == "native" and _wire is not None:
            p = _native_plan(cls, version, flexible)
        else:
            raise ValueError(f"no {impl!r} codec here (native: {NATIVE_IMPORT_ERROR or 'built'})")
    return p


def _unsupported(owner: str, field: Field, version: int, what: str = "a non-default value"):
    return UnsupportedVersionError(
        f"{owner}.{field.name} has {what}, but version {version} cannot carry it "
        f"(field versions {field.versions!r}, nullable {field.nullable!r})")


def _not_null(owner: str, name: str):
    return EncodeError(f"{owner}.{name} is None but the field is not nullable")


def _merge_unknown(known: list, unknown, known_tags) -> list:
    """Known and unknown tagged fields in ascending tag order; a known tag wins a collision."""
    merged = list(known) + [(t, b) for t, b in unknown if t not in known_tags]
    merged.sort(key=lambda item: item[0])
    return merged


def _fixed_array_packer(fmt: str):
    def pack(values) -> bytes:
        return struct.pack(">%d%s" % (len(values), fmt), *values)
    return pack


def _fixed_array_reader(fmt: str, size: int):
    # Short arrays (replica lists, ISRs) dominate: keep a compiled Struct per small length.
    cache = {n: struct.Struct(">%d%s" % (n, fmt)).unpack_from for n in range(17)}

    def read(buf, pos: int, n: int):
        unpack = cache.get(n)
        if unpack is None:
            return list(struct.unpack_from(">%d%s" % (n, fmt), buf, pos)), pos + n * size
        return list(unpack(buf, pos)), pos + n * size
    return read


def _read_uuid(buf, pos: int):
    raw = bytes(buf[pos:pos + 16])
    if len(raw) != 16:
        raise ProtocolError("uuid runs past the end of the buffer")
    return P.uuid_from_wire(raw), pos + 16


def _read_uuid_array(buf, pos: int, n: int):
    end = pos + 16 * n
    raw = bytes(buf[pos:end])
    if len(raw) != 16 * n:
        raise ProtocolError("uuid array runs past the end of the buffer")
    wire = P.uuid_from_wire
    return [wire(raw[i:i + 16]) for i in range(0, len(raw), 16)], end


def _write_uuid(out: bytearray, u) -> None:
    out += u.bytes


# (kind, flexible, nullable) -> helper; "fixed" kinds are handled with struct directly.
_WRITERS = {
    ("string", False, False): P.write_string, ("string", False, True): P.write_nullable_string,
    ("string", True, False): P.write_compact_string, ("string", True, True): P.write_compact_nullable_string,
    ("bytes", False, False): P.write_bytes, ("bytes", False, True): P.write_nullable_bytes,
    ("bytes", True, False): P.write_compact_bytes, ("bytes", True, True): P.write_compact_nullable_bytes,
}
_WRITERS.update({("records",) + k[1:]: w for k, w in list(_WRITERS.items()) if k[0] == "bytes"})
_READERS = {
    ("string", False, False): P.read_string, ("string", False, True): P.read_nullable_string,
    ("string", True, False): P.read_compact_string, ("string", True, True): P.read_compact_nullable_string,
    ("bytes", False, False): P.read_bytes, ("bytes", False, True): P.read_nullable_bytes,
    ("bytes", True, False): P.read_compact_bytes, ("bytes", True, True): P.read_compact_nullable_bytes,
    ("records", False, False): P.read_records, ("records", False, True): P.read_nullable_records,
    ("records", True, False): P.read_compact_records, ("records", True, True): P.read_compact_nullable_records,
}
_COUNT_READERS = {
    (False, False): P.read_count, (False, True): P.read_nullable_count,
    (True, False): P.read_compact_count, (True, True): P.read_compact_nullable_count,
}


class _Builder:
    """Generates the source of one plan. Each helper object is bound into the generated
    function's globals under a short unique name (``_g0``, ``_g1``...)."""

    def __init__(self, cls, version: int, flexible: bool):
        self.cls, self.version, self.flexible = cls, version, flexible
        self.owner = cls.__qualname__
        self.env = {"_perr": ProtocolError, "_new": object.__new__, "_C": cls, "_ruv": P.read_uvarint,
                    "_uv": P.uvarint_bytes, "_write_tags": P.write_tagged_fields,
                    "_merge_unknown": _merge_unknown, "_unsupported": _unsupported,
                    "_not_null": _not_null, "_fields": {f.name: f for f in cls.FIELDS}}
        self.min_size = 1 if flexible else 0  # the tagged-field count

    def bind(self, obj) -> str:
        name = f"_g{len(self.env)}"
        self.env[name] = obj
        return name

    # --- per-value code, shared by untagged fields, tagged fields and array elements ---

    def nullable_now(self, f: Field) -> bool:
        return self.version in f.nullable

    def value_min_size(self, t) -> int:
        if isinstance(t, Primitive):
            if t.size is not None:
                return t.size
            if t.name in ("uvarint", "varint"):
                return 1
            return 1 if self.flexible else (2 if t.name == "string" else 4)
        if isinstance(t, Array):
            return 1 if self.flexible else 4
        return plan(t, self.version, self.flexible, "python").min_size

    def encode_value(self, f: Field, t, expr: str, out: str, ind: str) -> list[str]:
        nullable = self.nullable_now(f)
        if isinstance(t, Primitive):
            if t.name == "uuid":
                return [f"{ind}{out} += {expr}.bytes"]
            if t.fmt is not None:
                return [f"{ind}{out} += {self.bind(struct.Struct('>' + t.fmt).pack)}({expr})"]
            if t.name == "uvarint":
                return [f"{ind}{out} += _uv({expr})"]
            if t.name == "varint":
                return [f"{ind}{self.bind(P.write_varint)}({out}, {expr})"]
            return [f"{ind}{self.bind(_WRITERS[(t.name, self.flexible, nullable)])}({out}, {expr})"]
        if is_struct(t):
            enc = self.bind(plan(t, self.version, self.flexible, "python").encode)
            if nullable:  # Kafka's int8 marker: -1 null, 1 present
                return [f"{ind}if {expr} is None:", f"{ind}    {out} += b'\\xff'", f"{ind}else:",
                        f"{ind}    {out} += b'\\x01'", f"{ind}    {enc}({expr}, {out})"]
            return [f"{ind}if {expr} is None: raise _not_null({self.owner!r}, {f.name!r})",
                    f"{ind}{enc}({expr}, {out})"]
        # Array: count, then the elements.
        elem = t.elem
        lines = [f"{ind}_v = {expr}", f"{ind}if _v is None:"]
        if nullable:
            null = b"\x00" if self.flexible else b"\xff\xff\xff\xff"
            lines.append(f"{ind}    {out} += {null!r}")
        else:
            lines.append(f"{ind}    raise _not_null({self.owner!r}, {f.name!r})")
        lines.append(f"{ind}else:")
        count = "_uv(len(_v) + 1)" if self.flexible else f"{self.bind(struct.Struct('>i').pack)}(len(_v))"
        lines.append(f"{ind}    {out} += {count}")
        if is_struct(elem):
            enc = self.bind(plan(elem, self.version, self.flexible, "python").encode)
            lines += [f"{ind}    for _e in _v:", f"{ind}        {enc}(_e, {out})"]
        elif elem.fmt is not None and elem.name != "uuid":
            lines.append(f"{ind}    {out} += {self.bind(_fixed_array_packer(elem.fmt))}(_v)")
        else:
            lines.append(f"{ind}    for _e in _v:")
            lines += self.encode_value(Field("element", elem), elem, "_e", out, ind + "        ")
        return lines

    def decode_value(self, f: Field, t, target: str, pos: str, ind: str) -> list[str]:
        nullable = self.nullable_now(f)
        if isinstance(t, Primitive):
            if t.name == "uuid":
                return [f"{ind}{target}, {pos} = {self.bind(_read_uuid)}(buf, {pos})"]
            if t.fmt is not None:
                unpack = self.bind(struct.Struct(">" + t.fmt).unpack_from)
                return [f"{ind}({target},) = {unpack}(buf, {pos})", f"{ind}{pos} += {t.size}"]
            if t.name == "uvarint":
                return [f"{ind}{target}, {pos} = _ruv(buf, {pos})"]
            if t.name == "varint":
                return [f"{ind}{target}, {pos} = {self.bind(P.read_varint)}(buf, {pos})"]
            return [f"{ind}{target}, {pos} = {self.bind(_READERS[(t.name, self.flexible, nullable)])}(buf, {pos})"]
        if is_struct(t):
            dec = self.bind(plan(t, self.version, self.flexible, "python").decode)
            if nullable:
                return [f"{ind}if buf[{pos}] >= 0x80:", f"{ind}    {target} = None", f"{ind}    {pos} += 1",
                        f"{ind}else:", f"{ind}    {target}, {pos} = {dec}(buf, {pos} + 1)"]
            return [f"{ind}{target}, {pos} = {dec}(buf, {pos})"]
        elem = t.elem
        reader = self.bind(_COUNT_READERS[(self.flexible, nullable)])
        lines = [f"{ind}_n, {pos} = {reader}(buf, {pos}, {max(1, self.value_min_size(elem))})"]
        body_ind = ind
        if nullable:
            lines += [f"{ind}if _n is None:", f"{ind}    {target} = None", f"{ind}else:"]
            body_ind = ind + "    "
        if is_struct(elem):
            dec = self.bind(plan(elem, self.version, self.flexible, "python").decode)
            lines += [f"{body_ind}_l = []", f"{body_ind}_a = _l.append", f"{body_ind}for _ in range(_n):",
                      f"{body_ind}    _e, {pos} = {dec}(buf, {pos})", f"{body_ind}    _a(_e)",
                      f"{body_ind}{target} = _l"]
        elif elem.fmt is not None and elem.name != "uuid":
            read = self.bind(_fixed_array_reader(elem.fmt, elem.size))
            lines.append(f"{body_ind}{target}, {pos} = {read}(buf, {pos}, _n)")
        elif elem.name == "uuid":
            lines.append(f"{body_ind}{target}, {pos} = {self.bind(_read_uuid_array)}(buf, {pos}, _n)")
        else:
            lines += [f"{body_ind}_l = []", f"{body_ind}for _ in range(_n):"]
            lines += self.decode_value(Field("element", elem), elem, "_e", pos, body_ind + "    ")
            lines += [f"{body_ind}    _l.append(_e)", f"{body_ind}{target} = _l"]
        return lines

    # --- whole struct ---

    def build(self) -> Plan:
        v, flex = self.version, self.flexible
        present = [f for f in self.cls.FIELDS if v in f.versions]
        absent = [f for f in self.cls.FIELDS if v not in f.versions]
        tagged = sorted((f for f in present if f.tagged_in(v, flex)), key=lambda f: f.tag)
        untagged = [f for f in present if not f.tagged_in(v, flex)]
        for f in present:
            if f.tag is not None and v in f.tagged and not flex:
                raise TypeError(f"{self.owner}.{f.name} is tagged in non-flexible version {v}")

        enc = ["def encode(o, out):"]
        dec = ["def decode(buf, pos):", "    o = _new(_C)"]
        for f in absent:
            if not f.ignorable:
                enc.append(f"    if o.{f.name} != {self.bind(f.default_value())}: "
                           f"raise _unsupported({self.owner!r}, _fields[{f.name!r}], {v})")
            dec.append(self.assign_default(f))
        for f in present:
            if not f.nullable.empty and not self.nullable_now(f):
                enc.append(f"    if o.{f.name} is None: raise _unsupported({self.owner!r}, "
                           f"_fields[{f.name!r}], {v}, 'a null value')")

        run: list[Field] = []

        def flush_run():
            if not run:
                return
            fmt = ">" + "".join(f.type.fmt for f in run)
            s = struct.Struct(fmt)
            args = ", ".join(f"o.{f.name}.bytes" if f.type.name == "uuid" else f"o.{f.name}" for f in run)
            enc.append(f"    out += {self.bind(s.pack)}({args})")
            temps = [f"_t{i}" for i in range(len(run))]
            dec.append(f"    ({', '.join(temps)},) = {self.bind(s.unpack_from)}(buf, pos)")
            for f, tmp in zip(run, temps):
                if f.type.name == "uuid":
                    tmp = f"{self.bind(P.uuid_from_wire)}({tmp})"
                dec.append(f"    o.{f.name} = {tmp}")
            dec.append(f"    pos += {s.size}")
            self.min_size += s.size
            run.clear()

        for f in untagged:
            if isinstance(f.type, Primitive) and f.type.fmt is not None:
                run.append(f)
                continue
            flush_run()
            enc += self.encode_value(f, f.type, f"o.{f.name}", "out", "    ")
            dec += self.decode_value(f, f.type, f"o.{f.name}", "pos", "    ")
            self.min_size += 1 if is_struct(f.type) and self.nullable_now(f) else self.value_min_size(f.type)
        flush_run()

        for f in tagged:
            dec.append(self.assign_default(f))
        if flex:
            self.tag_section(tagged, enc, dec)
        else:
            dec.append("    o.unknown_tagged_fields = None")
        dec.append("    return o, pos")

        if len(enc) == 1:
            enc.append("    pass")
        source = "\n".join(enc) + "\n\n" + "\n".join(dec) + "\n"
        filename = f"<kraft.protocol {self.owner} v{v}{' flexible' if flex else ''}>"
        exec(compile(source, filename, "exec"), self.env)
        return Plan(self.env["encode"], self.env["decode"], self.min_size, source)

    def assign_default(self, f: Field) -> str:
        if f.factory is list:
            return f"    o.{f.name} = []"
        if f.factory is not None:
            return f"    o.{f.name} = {self.bind(f.factory)}()"
        return f"    o.{f.name} = {self.bind(f.default)}"

    def tag_section(self, tagged: list[Field], enc: list[str], dec: list[str]) -> None:
        enc.append("    _u = o.unknown_tagged_fields")
        if not tagged:
            enc += ["    if _u:", "        _write_tags(out, _merge_unknown((), _u, ()))",
                    "    else:", "        out.append(0)"]
        else:
            enc.append("    _t = []")
            for f in tagged:
                enc.append(f"    if o.{f.name} != {self.bind(f.default_value())}:")
                enc.append("        _b = bytearray()")
                enc += self.encode_value(f, f.type, f"o.{f.name}", "_b", "        ")
                enc.append(f"        _t.append(({f.tag}, _b))")
            known = self.bind(frozenset(f.tag for f in tagged))
            enc += ["    if _u:", f"        _t = _merge_unknown(_t, _u, {known})",
                    "    if _t:", "        _write_tags(out, _t)", "    else:", "        out.append(0)"]

        # Most structs carry no tags: one byte test instead of a varint call.
        dec += ["    o.unknown_tagged_fields = None",
                "    if buf[pos] == 0:",
                "        pos += 1",
                "    else:",
                "        _nt, pos = _ruv(buf, pos)",
                "        if _nt > len(buf) - pos:",
                "            raise _perr('tagged field count %d exceeds the bytes left' % _nt)",
                "        for _ in range(_nt):",
                "            _tag, pos = _ruv(buf, pos)",
                "            _size, pos = _ruv(buf, pos)",
                "            _end = pos + _size",
                "            if _end > len(buf):",
                "                raise _perr('tagged field %d runs past the end of the buffer' % _tag)",
                "            _p = pos"]
        keyword = "if"
        for f in tagged:
            dec.append(f"            {keyword} _tag == {f.tag}:")
            dec += self.decode_value(f, f.type, f"o.{f.name}", "_p", "                ")
            keyword = "elif"
        unknown = ["if o.unknown_tagged_fields is None:", "    o.unknown_tagged_fields = []",
                   "o.unknown_tagged_fields.append((_tag, bytes(buf[pos:_end])))", "_p = _end"]
        if tagged:
            dec.append("            else:")
            dec += ["                " + line for line in unknown]
        else:
            dec += ["            " + line for line in unknown]
        dec += ["            if _p != _end:",
                "                raise _perr('tagged field %d: declared %d bytes, decoded %d' % (_tag, _size, _p - pos))",
                "            pos = _end",
                # Kept in tag order whatever order they came in (they are written back sorted).
                "        if o.unknown_tagged_fields is not None and len(o.unknown_tagged_fields) > 1:",
                "            o.unknown_tagged_fields.sort(key=lambda t: t[0])"]


# --- the native plan ---------------------------------------------------------------------------

def _kind(t) -> int:
    if is_struct(t):
        return _wire.KINDS["struct"]
    if isinstance(t, Array):
        return _wire.KINDS["array"]
    return _wire.KINDS[t.name]


def _native_plan(cls, version: int, flexible: bool) -> Plan:
    """``_wire`` interprets the same field lists the generator walks (``_Builder.build``);
    the Python plan is built first for its checks and its ``min_size``."""
    ref = plan(cls, version, flexible, "python")
    native = _wire.Plan(cls, cls.__qualname__, version, flexible, _HOOKS)
    p = cls._PLANS[(version, flexible, "native")] = Plan(native.encode, native.decode, ref.min_size, ref.source,
                                                          native)
    builder = _Builder(cls, version, flexible)
    v = version

    def slot(f: Field, tag: int = -1):
        t = f.type
        elem = t.elem if isinstance(t, Array) else None
        struct_t = t if is_struct(t) else (elem if elem is not None and is_struct(elem) else None)
        sub = plan(struct_t, version, flexible, "native").native if struct_t is not None else None
        return _wire.Slot(f.name, _kind(t), _kind(elem) if elem is not None else -1, v in f.nullable, sub,
                          max(1, builder.value_min_size(elem)) if elem is not None else 1, tag,
                          f.default_value(), f.factory, f, f.ignorable,
                          _defaults(t) if is_struct(t) and not f.null_struct else None)

    present = [f for f in cls.FIELDS if v in f.versions]
    tagged = sorted((f for f in present if f.tagged_in(v, flexible)), key=lambda f: f.tag)
    native.fill([slot(f) for f in present if not f.tagged_in(v, flexible)],
                [slot(f, f.tag) for f in tagged],
                [slot(f) for f in cls.FIELDS if v not in f.versions],
                [slot(f) for f in present if not f.nullable.empty and v not in f.nullable])
    return p


def _defaults(cls):
    """A ``_wire.Plan`` that builds ``cls.new_default()`` natively (every field in ``absent``)."""
    plan = cls.__dict__.get("_NATIVE_DEFAULTS")
    if plan is None:
        plan = _wire.Plan(cls, cls.__qualname__, -1, False, _HOOKS)
        cls._NATIVE_DEFAULTS = plan  # before filling: a struct may contain itself
        plan.fill([], [], [_wire.Slot(f.name, _kind(f.type), default=f.default, factory=f.factory,
                                      fresh=_defaults(f.type) if is_struct(f.type) else None)
                           for f in cls.FIELDS], [])
    return plan


_HOOKS = None if _wire is None else _wire.Hooks(
    protocol_error=ProtocolError, encode_error=EncodeError, unsupported=_unsupported, not_null=_not_null,
    uuid_from_wire=P.uuid_from_wire, merge_unknown=_merge_unknown, spliced_frame=P.SplicedFrame,
    splice_bytes=P.SPLICE_BYTES, uuid_type=P.ZERO_UUID.__class__)
