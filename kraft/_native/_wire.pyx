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


# Encoding and decoding, one file each (textually part of this module).
include "_wire_encode.pxi"
include "_wire_decode.pxi"
