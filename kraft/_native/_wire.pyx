# cython: language_level=3
"""The protocol codec's native twin: encodes and decodes one struct at one (version,
flexible) by interpreting a plan that ``kraft.protocol.codec`` compiles from the schema.

The generated Python codec (``codec.py``) is the reference; this does exactly what its
source does, in the same order, with the same values, errors and messages: fixed-width
fields big-endian, compact or classic lengths and counts, nullability, defaults of absent and
tagged fields, a tagged-field section after every flexible struct (unknown tags kept and
written back in tag order), ``records`` decoded as a slice of the input view and large
``bytes``/``records`` values spliced into a ``SplicedFrame`` instead of copied. Why: in a
busy node every request and answer is decoded and encoded once, and the interpreted
decoder's many small calls ran with cold caches at three to four times their hot-loop cost.

Must not import kraft Python modules: the error types and helpers come in ``Hooks``.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

import struct as _struct
import operator as _operator

from kraft._native._prims cimport (kc_load_be16, kc_load_be32, kc_load_be64, kc_read_uvarint, kc_store_be16,
                                   kc_store_be32, kc_store_be64, kc_write_uvarint)

cdef extern from "Python.h":
    char *PyUnicode_AsUTF8AndSize(object, Py_ssize_t *) except NULL
    object PyNumber_Index(object)
    long long PyLong_AsLongLong(object) except? -1
    unsigned long long PyLong_AsUnsignedLongLong(object) except? -1
    double PyFloat_AsDouble(object) except? -1.0
    object PyLong_FromLongLong(long long)
    object PyLong_FromUnsignedLongLong(unsigned long long)
    object PyFloat_FromDouble(double)
    bint PyObject_IsTrue(object) except -1

# Value kinds (kraft.protocol.schema's primitive names, plus struct and array).
cdef enum Kind:
    K_INT8 = 0
    K_INT16 = 1
    K_INT32 = 2
    K_INT64 = 3
    K_UINT16 = 4
    K_UINT32 = 5
    K_FLOAT64 = 6
    K_BOOL = 7
    K_UUID = 8
    K_UVARINT = 9
    K_VARINT = 10
    K_STRING = 11
    K_BYTES = 12
    K_RECORDS = 13
    K_STRUCT = 14
    K_ARRAY = 15

#: schema type name -> Kind, for kraft.protocol.codec to build plans with.
KINDS = {"int8": K_INT8, "int16": K_INT16, "int32": K_INT32, "int64": K_INT64, "uint16": K_UINT16,
         "uint32": K_UINT32, "float64": K_FLOAT64, "bool": K_BOOL, "uuid": K_UUID, "uvarint": K_UVARINT,
         "varint": K_VARINT, "string": K_STRING, "bytes": K_BYTES, "records": K_RECORDS, "struct": K_STRUCT,
         "array": K_ARRAY}

cdef Py_ssize_t[8] FIXED_SIZE = [1, 2, 4, 8, 2, 4, 8, 1]  # K_INT8 .. K_BOOL

# struct.pack's messages for out-of-range values, which the reference raises.
cdef dict _PACK_RANGE = {K_INT8: "byte format requires -128 <= number <= 127",
               K_INT16: "'h' format requires -32768 <= number <= 32767",
               K_INT32: "'i' format requires -2147483648 <= number <= 2147483647",
               K_INT64: "int too large to convert",
               K_UINT16: "argument out of range",
               K_UINT32: "argument out of range"}


cdef class Hooks:
    """What kraft.protocol hands the codec: error types and the helpers whose behaviour the
    generated codec shares (uuid objects, the unsupported/not-null errors, splicing)."""
    cdef object perr, eerr, unsupported, not_null, uuid_from_wire, merge_unknown, spliced_frame, uuid_type
    cdef Py_ssize_t splice_bytes

    def __init__(self, *, protocol_error, encode_error, unsupported, not_null, uuid_from_wire, merge_unknown,
                 spliced_frame, splice_bytes, uuid_type):
        self.perr = protocol_error
        self.eerr = encode_error
        self.unsupported = unsupported
        self.not_null = not_null
        self.uuid_from_wire = uuid_from_wire
        self.merge_unknown = merge_unknown
        self.spliced_frame = spliced_frame
        self.splice_bytes = splice_bytes
        self.uuid_type = uuid_type


cdef class Slot:
    """One field at one version: how its value is encoded and decoded."""
    cdef int kind, elem
    cdef bint nullable
    cdef str name
    cdef Plan sub  # the struct's plan (K_STRUCT, or an array of structs)
    cdef Py_ssize_t elem_min  # smallest encoding of one array element (count check)
    cdef int tag
    cdef object default, factory, field
    cdef bint ignorable
    cdef Py_ssize_t run  # bytes of the run of fixed-width fields this one starts (0: none)
    cdef Plan fresh  # a struct field's default struct, built natively (its class's new_default)

    def __init__(self, str name, int kind, int elem=-1, bint nullable=False, Plan sub=None, Py_ssize_t elem_min=1,
                 int tag=-1, default=None, factory=None, field=None, bint ignorable=False, Plan fresh=None):
        self.name, self.kind, self.elem, self.nullable, self.sub = name, kind, elem, nullable, sub
        self.elem_min, self.tag, self.default, self.factory, self.field = elem_min, tag, default, factory, field
        self.ignorable, self.fresh = ignorable, fresh

    cdef object fresh_default(self):
        if self.fresh is not None:
            return default_struct(self.fresh)
        return self.factory() if self.factory is not None else self.default


cdef bint at_default(Plan plan, object v) except -1:
    """``v == cls.new_default()`` for a struct of ``plan.cls`` (the generated __eq__: every
    field equal, unknown tags empty or None), without a Python call per struct."""
    cdef Slot s
    for s in plan.absent:
        x = getattr(v, s.name)
        if s.fresh is not None and type(x) is s.fresh.cls:
            if not at_default(s.fresh, x):
                return False
        elif s.factory is list:
            if type(x) is not list or len(<list>x) != 0:
                if x != []:
                    return False
        elif s.fresh is not None:
            if x != default_struct(s.fresh):
                return False
        elif not (x is s.default or x == s.default):
            return False
    u = v.unknown_tagged_fields
    return not u


cdef object default_struct(Plan plan):
    """``cls.new_default()``: every field at its default (``plan.absent`` lists them all)."""
    cdef Slot s
    o = plan.cls.__new__(plan.cls)
    for s in plan.absent:
        setattr(o, s.name, s.fresh_default())
    o.unknown_tagged_fields = None
    return o


cdef struct Reader:
    const uint8_t *p
    Py_ssize_t n
    Py_ssize_t pos


cdef class Plan:
    """The codec of one struct class at one (version, flexible). Built empty, then ``fill``ed
    (a struct may contain itself through its fields' plans)."""
    cdef object cls
    cdef str owner
    cdef int version
    cdef bint flexible
    cdef list untagged, tagged, absent, null_checks
    cdef object known_tags
    cdef Hooks h

    def __init__(self, cls, str owner, int version, bint flexible, Hooks hooks):
        self.cls, self.owner, self.version, self.flexible, self.h = cls, owner, version, flexible, hooks
        self.untagged, self.tagged, self.absent, self.null_checks = [], [], [], []
        self.known_tags = frozenset()

    def fill(self, list untagged, list tagged, list absent, list null_checks):
        """``untagged``/``tagged``: Slots in wire order (tagged ascending by tag);
        ``absent``: Slots of fields this version lacks (default, ignorable, field);
        ``null_checks``: Slots of fields nullable in other versions but not this one."""
        self.untagged, self.tagged, self.absent, self.null_checks = untagged, tagged, absent, null_checks
        self.known_tags = frozenset((<Slot>s).tag for s in tagged)
        cdef Slot s, first = None
        for s in untagged:  # runs of fixed-width fields, bounds-checked together as the reference does
            if s.kind <= K_BOOL or s.kind == K_UUID:
                if first is None:
                    first = s
                first.run += 16 if s.kind == K_UUID else FIXED_SIZE[s.kind]
            else:
                first = None

    def encode(self, o, out):
        """Append ``o`` to the bytearray ``out`` (the generated ``encode(o, out)``)."""
        encode_struct(self, o, out)

    def decode(self, buf, Py_ssize_t pos):
        """``(struct, end)`` read from the flat byte view ``buf`` at ``pos``."""
        cdef Py_buffer view
        cdef Reader r
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        try:
            r.p = <const uint8_t *>view.buf
            r.n = view.len
            r.pos = pos
            if pos < 0 or pos > r.n:
                raise IndexError("position outside the buffer")
            o = decode_struct(self, &r, buf)
            return o, r.pos
        finally:
            PyBuffer_Release(&view)


# --- encoding ----------------------------------------------------------------------------------

cdef inline uint8_t *grow(object out, Py_ssize_t n) except NULL:
    cdef Py_ssize_t size = PyByteArray_GET_SIZE(out)
    if PyByteArray_Resize(out, size + n) < 0:
        return NULL
    return <uint8_t *>PyByteArray_AS_STRING(out) + size


cdef inline void put(object out, const void *src, Py_ssize_t n) except *:
    if n:
        memcpy(grow(out, n), src, n)


cdef inline void put_uvarint(object out, uint64_t v) except *:
    cdef uint8_t tmp[10]
    put(out, tmp, kc_write_uvarint(tmp, v))


cdef void put_uv32(Hooks h, object out, object value) except *:
    """``uvarint_bytes``: 0 <= value < 2**32, else EncodeError."""
    cdef object v = PyNumber_Index(value)
    if v < 0 or v > 0xFFFFFFFF:
        raise h.eerr(f"uvarint out of range: {value}")
    put_uvarint(out, <uint64_t>PyLong_AsUnsignedLongLong(v))


cdef object as_int(object value):
    try:
        return PyNumber_Index(value)
    except TypeError:
        raise _struct.error("required argument is not an integer")


cdef void put_fixed(int kind, object out, object value) except *:
    cdef uint8_t *p
    cdef long long v
    cdef double d
    if kind == K_BOOL:
        p = grow(out, 1)
        p[0] = 1 if PyObject_IsTrue(value) else 0
        return
    if kind == K_FLOAT64:
        try:
            d = PyFloat_AsDouble(value)
        except TypeError:
            raise _struct.error("required argument is not a float")
        p = grow(out, 8)
        kc_store_be64(p, (<uint64_t *>&d)[0])
        return
    iv = as_int(value)
    if kind == K_INT64:
        try:
            v = PyLong_AsLongLong(iv)
        except OverflowError:
            raise _struct.error(_PACK_RANGE[kind])
        kc_store_be64(grow(out, 8), <uint64_t>v)
        return
    if kind == K_UINT32:
        if iv < 0 or iv > 0xFFFFFFFF:
            raise _struct.error(_PACK_RANGE[kind])
        kc_store_be32(grow(out, 4), <uint32_t>PyLong_AsUnsignedLongLong(iv))
        return
    try:
        v = PyLong_AsLongLong(iv)
    except OverflowError:
        raise _struct.error(_PACK_RANGE[kind])
    if kind == K_INT32:
        if v < -0x80000000 or v > 0x7FFFFFFF:
            raise _struct.error(_PACK_RANGE[kind])
        kc_store_be32(grow(out, 4), <uint32_t><int32_t>v)
    elif kind == K_INT16:
        if v < -0x8000 or v > 0x7FFF:
            raise _struct.error(_PACK_RANGE[kind])
        kc_store_be16(grow(out, 2), <uint16_t><int16_t>v)
    elif kind == K_UINT16:
        if v < 0 or v > 0xFFFF:
            raise _struct.error(_PACK_RANGE[kind])
        kc_store_be16(grow(out, 2), <uint16_t>v)
    else:  # K_INT8
        if v < -0x80 or v > 0x7F:
            raise _struct.error(_PACK_RANGE[kind])
        p = grow(out, 1)
        p[0] = <uint8_t><int8_t>v


cdef void put_null(object out, bint compact, Py_ssize_t classic_width) except *:
    """A null string, bytes or array: compact 0, classic length -1 (int16 or int32)."""
    if compact:
        put_uvarint(out, 0)
    else:
        put(out, b"\xff\xff\xff\xff", classic_width)


cdef void put_string(Hooks h, object out, object s, bint compact, bint nullable) except *:
    cdef Py_ssize_t n
    cdef const char *data
    cdef uint8_t *p
    if s is None:
        if nullable:
            put_null(out, compact, 2)
            return
        raise h.eerr("non-nullable string field is None")
    if type(s) is str:
        data = PyUnicode_AsUTF8AndSize(s, &n)
    else:
        b = s.encode("utf-8")  # what the generated codec calls (and its error for non-strings)
        data = <const char *>b
        n = len(b)
    if n > 0x7FFF:
        raise h.eerr(f"string of {n} bytes is longer than 32767")
    if compact:
        put_uvarint(out, <uint64_t>n + 1)
    else:
        kc_store_be16(grow(out, 2), <uint16_t>n)
    put(out, data, n)


cdef void put_blob(Hooks h, object out, object b, bint compact, bint nullable) except *:
    """bytes and records: the length, then the value (spliced when large and ``out`` is a
    SplicedFrame)."""
    cdef Py_buffer view
    cdef Py_ssize_t n
    if b is None:
        if nullable:
            put_null(out, compact, 4)
            return
        raise h.eerr("non-nullable bytes field is None")
    PyObject_GetBuffer(b, &view, PyBUF_SIMPLE)
    try:
        n = view.len
        if compact:
            put_uv32(h, out, n + 1)
        else:
            if n > 0x7FFFFFFF:
                raise _struct.error(_PACK_RANGE[K_INT32])
            kc_store_be32(grow(out, 4), <uint32_t>n)
        if n >= h.splice_bytes and type(out) is h.spliced_frame:
            out.splices.append((PyByteArray_GET_SIZE(out), b))
            out.spliced_bytes += n
        else:
            put(out, view.buf, n)
    finally:
        PyBuffer_Release(&view)


cdef void put_uuid(Hooks h, object out, object v, bint in_run) except *:
    """``v.bytes`` (from the UUID's int without the Python-level property when it is a
    uuid.UUID); in a run of fixed-width fields padded or cut to 16 bytes as struct's '16s'
    does, elsewhere appended as it is (the reference's ``out += v.bytes``)."""
    cdef Py_buffer view
    cdef uint8_t *p
    raw = v.int.to_bytes(16, "big") if type(v) is h.uuid_type else v.bytes
    PyObject_GetBuffer(raw, &view, PyBUF_SIMPLE)
    try:
        if not in_run:
            put(out, view.buf, view.len)
            return
        p = grow(out, 16)
        memcpy(p, view.buf, min(view.len, 16))
        if view.len < 16:
            memset(p + view.len, 0, 16 - view.len)
    finally:
        PyBuffer_Release(&view)


cdef void put_value(Plan plan, Slot s, int kind, bint nullable, object out, object v) except *:
    """One value of ``s`` (kind given: an array element has its own)."""
    cdef Hooks h = plan.h
    cdef bint compact = plan.flexible
    cdef int64_t x
    if kind <= K_BOOL:
        put_fixed(kind, out, v)
    elif kind == K_UUID:
        put_uuid(h, out, v, s.kind == K_UUID and s.tag < 0)
    elif kind == K_UVARINT:
        put_uv32(h, out, v)
    elif kind == K_VARINT:
        iv = PyNumber_Index(v)
        if iv < -0x80000000 or iv > 0x7FFFFFFF:
            raise h.eerr(f"varint out of int32 range: {v}")
        x = <int64_t>PyLong_AsLongLong(iv)
        put_uvarint(out, <uint64_t>((x << 1) ^ (x >> 63)))
    elif kind == K_STRING:
        put_string(h, out, v, compact, nullable)
    elif kind == K_BYTES or kind == K_RECORDS:
        put_blob(h, out, v, compact, nullable)
    elif kind == K_STRUCT:
        if v is None:
            raise h.not_null(plan.owner, s.name)
        encode_struct(s.sub, v, out)
    else:
        put_array(plan, s, out, v)


cdef void put_array(Plan plan, Slot s, object out, object v) except *:
    cdef Hooks h = plan.h
    cdef Py_ssize_t i, n
    if v is None:
        if s.nullable:
            put_null(out, plan.flexible, 4)
            return
        raise h.not_null(plan.owner, s.name)
    n = len(v)
    if plan.flexible:
        put_uv32(h, out, n + 1)
    else:
        put_fixed(K_INT32, out, n)
    if s.elem == K_STRUCT:
        for e in v:
            encode_struct(s.sub, e, out)
    else:
        for e in v:  # elements are never nullable (Field("element", ...) in the reference)
            put_value(plan, s, s.elem, False, out, e)


cdef void encode_struct(Plan plan, object o, object out) except *:
    cdef Slot s
    cdef Hooks h = plan.h
    for s in plan.absent:
        if not s.ignorable and getattr(o, s.name) != s.default:
            raise h.unsupported(plan.owner, s.field, plan.version)
    for s in plan.null_checks:
        if getattr(o, s.name) is None:
            raise h.unsupported(plan.owner, s.field, plan.version, "a null value")
    for s in plan.untagged:
        put_value(plan, s, s.kind, s.nullable, out, getattr(o, s.name))
    if not plan.flexible:
        return
    unknown = o.unknown_tagged_fields
    cdef list present = []
    for s in plan.tagged:
        v = getattr(o, s.name)
        if s.fresh is not None and type(v) is s.fresh.cls:
            differs = not at_default(s.fresh, v)
        else:
            differs = v != s.default
        if differs:
            b = bytearray()
            put_value(plan, s, s.kind, s.nullable, b, v)
            present.append((s.tag, b))
    if unknown:
        present = h.merge_unknown(present, unknown, plan.known_tags)
    if not present:
        put(out, b"\x00", 1)
        return
    put_uvarint(out, len(present))
    for tag, payload in present:
        put_uv32(h, out, tag)
        put_uv32(h, out, len(payload))
        out += payload


# --- decoding ----------------------------------------------------------------------------------

cdef inline int check(Reader *r, Py_ssize_t k) except -1:
    """``k`` more bytes are there, or struct.unpack_from's error (the reference unpacks each
    run of fixed-width fields, and each length, with one unpack_from)."""
    if k > r.n - r.pos:
        raise _struct.error(f"unpack_from requires a buffer of at least {r.pos + k} bytes for unpacking {k} bytes "
                            f"at offset {r.pos} (actual buffer size is {r.n})")
    return 0


cdef inline const uint8_t *need(Reader *r, Py_ssize_t k) except NULL:
    """The next ``k`` bytes."""
    check(r, k)
    cdef const uint8_t *p = r.p + r.pos
    r.pos += k
    return p


cdef inline int at_end(Reader *r) except -1:
    if r.pos >= r.n:
        raise IndexError("index out of bounds on dimension 1")  # the reference's buf[pos]
    return 0


cdef uint64_t get_uvarint(Hooks h, Reader *r) except? 0xFFFFFFFFFFFFFFFF:
    """``read_uvarint``: at most 5 bytes, 32 bits."""
    cdef uint64_t v
    cdef int k
    at_end(r)
    k = kc_read_uvarint(r.p + r.pos, r.p + r.n, &v, 5, 32)
    if k == 0:
        raise h.perr("unsigned varint is too long or truncated (truncated or over-long unsigned varint)")
    r.pos += k
    return v


cdef object get_fixed(int kind, Reader *r):
    cdef const uint8_t *p = need(r, FIXED_SIZE[kind])
    cdef uint64_t bits
    if kind == K_INT32:
        return <int32_t>kc_load_be32(p)
    if kind == K_INT64:
        return PyLong_FromLongLong(<int64_t>kc_load_be64(p))
    if kind == K_INT16:
        return <int16_t>kc_load_be16(p)
    if kind == K_INT8:
        return <int8_t>p[0]
    if kind == K_BOOL:
        return p[0] != 0
    if kind == K_UINT16:
        return kc_load_be16(p)
    if kind == K_UINT32:
        return PyLong_FromUnsignedLongLong(kc_load_be32(p))
    bits = kc_load_be64(p)  # K_FLOAT64
    return PyFloat_FromDouble((<double *>&bits)[0])


cdef object get_text(Hooks h, Reader *r, Py_ssize_t n):
    if n > 0x7FFF:  # Kafka's limit for strings, which compact lengths could otherwise exceed
        raise h.perr(f"string of {n} bytes is longer than 32767")
    if n > r.n - r.pos:
        raise h.perr(f"string of {n} bytes runs past the end of the buffer")
    s = PyUnicode_DecodeUTF8(<const char *>(r.p + r.pos), n, NULL)
    r.pos += n
    return s


cdef object get_string(Hooks h, Reader *r, bint compact, bint nullable):
    cdef int64_t n
    if compact:
        n = <int64_t>get_uvarint(h, r)
        if n == 0:
            if nullable:
                return None
            raise h.perr("non-nullable compact string is null")
        return get_text(h, r, n - 1)
    n = <int16_t>kc_load_be16(need(r, 2))
    if n < 0:
        if nullable:
            if n == -1:
                return None
            raise h.perr(f"string has negative length {n}")
        raise h.perr(f"non-nullable string has length {n}")
    return get_text(h, r, n)


cdef object get_blob(Hooks h, Reader *r, object view, bint records, bint compact, bint nullable):
    cdef int64_t n
    cdef Py_ssize_t start
    what = "records" if records else "bytes"
    if compact:
        n = <int64_t>get_uvarint(h, r)
        if n == 0:
            if nullable:
                return None
            raise h.perr(f"non-nullable compact {what} field is null")
        n -= 1
    else:
        n = <int32_t>kc_load_be32(need(r, 4))
        if n < 0:
            if nullable:
                if n == -1:
                    return None
                raise h.perr(f"{what} field has negative length {n}")
            raise h.perr(f"non-nullable {what} field has length {n}")
    if n > r.n - r.pos:
        raise h.perr(f"bytes field of {n} bytes runs past the end of the buffer")
    start = r.pos
    r.pos += n
    if records:  # a view of the input, not a copy
        return view[start:r.pos]
    return PyBytes_FromStringAndSize(<const char *>(r.p + start), n)


cdef object get_value(Plan plan, Slot s, int kind, bint nullable, Reader *r, object view):
    cdef Hooks h = plan.h
    cdef int64_t x
    if kind <= K_BOOL:
        return get_fixed(kind, r)
    if kind == K_UUID:
        if r.n - r.pos < 16:
            raise h.perr("uuid runs past the end of the buffer")
        raw = PyBytes_FromStringAndSize(<const char *>(r.p + r.pos), 16)
        r.pos += 16
        return h.uuid_from_wire(raw)
    if kind == K_UVARINT:
        return get_uvarint(h, r)
    if kind == K_VARINT:
        x = <int64_t>get_uvarint(h, r)
        return (x >> 1) ^ -(x & 1)
    if kind == K_STRING:
        return get_string(h, r, plan.flexible, nullable)
    if kind == K_BYTES or kind == K_RECORDS:
        return get_blob(h, r, view, kind == K_RECORDS, plan.flexible, nullable)
    if kind == K_STRUCT:
        return decode_struct(s.sub, r, view)
    return get_array(plan, s, r, view)


cdef object get_array(Plan plan, Slot s, Reader *r, object view):
    cdef Hooks h = plan.h
    cdef int64_t n
    cdef Py_ssize_t i, left
    if plan.flexible:
        n = <int64_t>get_uvarint(h, r)
        if n == 0:
            if s.nullable:
                return None
            raise h.perr("non-nullable compact array is null")
        n -= 1
    else:
        n = <int32_t>kc_load_be32(need(r, 4))
        if n < 0:
            if s.nullable:
                if n == -1:
                    return None
                raise h.perr(f"array has negative count {n}")
            raise h.perr(f"non-nullable array has count {n}")
    left = r.n - r.pos
    if n * s.elem_min > left or n > left:
        raise h.perr(f"array of {n} elements cannot fit in {left} bytes")
    cdef list out = []
    if s.elem == K_UUID:
        for i in range(n):
            out.append(get_value(plan, s, K_UUID, False, r, view))
        return out
    for i in range(n):
        if s.elem == K_STRUCT:
            out.append(decode_struct(s.sub, r, view))
        else:
            out.append(get_value(plan, s, s.elem, False, r, view))
    return out


cdef object decode_struct(Plan plan, Reader *r, object view):
    cdef Slot s
    cdef Hooks h = plan.h
    cdef uint64_t count, tag, size, k
    cdef Py_ssize_t end, p0
    o = plan.cls.__new__(plan.cls)
    for s in plan.absent:
        setattr(o, s.name, s.fresh_default())
    for s in plan.untagged:
        if s.run:
            check(r, s.run)
        setattr(o, s.name, get_value(plan, s, s.kind, s.nullable, r, view))
    for s in plan.tagged:
        setattr(o, s.name, s.fresh_default())
    o.unknown_tagged_fields = None
    if not plan.flexible:
        return o
    at_end(r)
    if r.p[r.pos] == 0:  # most structs carry no tags
        r.pos += 1
        return o
    count = get_uvarint(h, r)
    if count > <uint64_t>(r.n - r.pos):
        raise h.perr('tagged field count %d exceeds the bytes left' % count)
    unknown = None
    for k in range(count):
        tag = get_uvarint(h, r)
        size = get_uvarint(h, r)
        end = r.pos + <Py_ssize_t>size
        if end > r.n:
            raise h.perr('tagged field %d runs past the end of the buffer' % tag)
        p0 = r.pos
        for s in plan.tagged:
            if <uint64_t>s.tag == tag:
                setattr(o, s.name, get_value(plan, s, s.kind, s.nullable, r, view))
                break
        else:
            if unknown is None:
                unknown = o.unknown_tagged_fields = []
            unknown.append((tag, PyBytes_FromStringAndSize(<const char *>(r.p + p0), end - p0)))
            r.pos = end
        if r.pos != end:
            raise h.perr('tagged field %d: declared %d bytes, decoded %d' % (tag, size, r.pos - p0))
    if unknown is not None and len(unknown) > 1:
        unknown.sort(key=_BY_TAG)  # stable: equal tags keep their order, as in the reference
    return o


cdef object _BY_TAG = _operator.itemgetter(0)
