# Included by _wire.pyx (one extension module): writing a struct at a plan's version.
# The reference is the generated encoder in kraft/protocol/codec.py.

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
        # A nullable struct is Kafka's int8 marker (-1 null, 1 present) before its fields.
        if v is None:
            if not nullable:
                raise h.not_null(plan.owner, s.name)
            put(out, b"\xff", 1)
            return
        if nullable:
            put(out, b"\x01", 1)
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
