# Included by _wire.pyx (one extension module): reading a struct at a plan's version.
# The reference is the generated decoder in kraft/protocol/codec.py.

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
        if nullable and <int8_t>need(r, 1)[0] < 0:
            return None
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
