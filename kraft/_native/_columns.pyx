# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled column builder: the records of many batches of a segment slice straight into
Arrow-layout column buffers (numpy arrays), for the Spark ``kraft-log`` source.

Two passes over the records without the GIL: the first validates every record and sizes
the buffers, the second fills them; nothing is allocated from an unchecked length. Only
compressed batches cost Python work (their blocks are inflated by the injected
``decompress`` hook, once, before the passes). Must not import kraft Python modules; the
pure twin is ``kraft/records/_pure_columns.py``.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport INT32_MAX, int8_t, int16_t, int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import numpy as np

from kraft._native._buffer cimport Buffer, Hooks, acquire, get_hooks
from kraft._native._layout cimport *
from kraft._native._prims cimport *

cdef Hooks H = get_hooks()


cdef struct Block:
    const uint8_t *p
    Py_ssize_t size
    int64_t base_offset, base_ts, max_ts, producer_id
    int32_t epoch, count
    int attributes


cdef struct Sizes:
    Py_ssize_t rows, keys, values, headers, hkeys, hvalues


cdef enum Err:
    OK = 0
    E_VARINT = 1
    E_RECORD_LENGTH = 2
    E_KEY_LENGTH = 3
    E_VALUE_LENGTH = 4
    E_HEADER_COUNT = 5
    E_HEADER_KEY = 6
    E_HEADER_VALUE = 7
    E_TRAILING = 8
    E_LEFT_OVER = 9
    E_TOO_BIG = 10

cdef dict _MESSAGES = {
    E_VARINT: "invalid varint", E_RECORD_LENGTH: "invalid record length", E_KEY_LENGTH: "invalid key length",
    E_VALUE_LENGTH: "invalid value length", E_HEADER_COUNT: "invalid header count",
    E_HEADER_KEY: "invalid header key length", E_HEADER_VALUE: "invalid header value length",
    E_TRAILING: "record length does not match its fields", E_LEFT_OVER: "bytes left after the last record",
    E_TOO_BIG: "more than 2 GiB of keys, values or headers in one call",
}


cdef inline int rd32(const uint8_t **p, const uint8_t *end, int32_t *out) noexcept nogil:
    cdef int n = kc_read_varint32(p[0], end, out)
    p[0] += n
    return n == 0


cdef inline void set_bit(uint8_t *bits, Py_ssize_t i) noexcept nogil:
    bits[i >> 3] |= <uint8_t>(1 << (i & 7))


cdef struct Out:
    # filled only in the second pass (all NULL in the first)
    int64_t *offsets
    int64_t *timestamps
    int32_t *ts_types
    int32_t *epochs
    int64_t *producers
    int8_t *codecs
    uint8_t *key_valid
    int32_t *key_offsets
    uint8_t *key_data
    uint8_t *value_valid
    int32_t *value_offsets
    uint8_t *value_data
    int32_t *header_offsets
    int32_t *hkey_offsets
    uint8_t *hkey_data
    uint8_t *hvalue_valid
    int32_t *hvalue_offsets
    uint8_t *hvalue_data


cdef int walk(Block *blocks, Py_ssize_t nblocks, int64_t first, int64_t end_offset, Sizes *s, Out *o,
              Py_ssize_t *bad_block) noexcept nogil:
    """One pass over every record: count into ``s``; with ``o.offsets`` set, also fill."""
    cdef Py_ssize_t b, i, j
    cdef const uint8_t *p
    cdef const uint8_t *end
    cdef const uint8_t *rec_end
    cdef int32_t length, offset_delta, klen, vlen, hcount, hk, hv
    cdef int64_t ts_delta, offset
    cdef int n
    cdef bint fill = o.offsets != NULL
    cdef bint keep
    s.rows = s.keys = s.values = s.headers = s.hkeys = s.hvalues = 0
    for b in range(nblocks):
        bad_block[0] = b
        p = blocks[b].p
        end = p + blocks[b].size
        for i in range(blocks[b].count):
            if rd32(&p, end, &length):
                return E_VARINT
            if length < MIN_RECORD_SIZE - 1 or length > end - p:
                return E_RECORD_LENGTH
            rec_end = p + length
            p += 1  # record attributes: unused in v2
            n = kc_read_varint64(p, rec_end, &ts_delta)
            if n == 0:
                return E_VARINT
            p += n
            if rd32(&p, rec_end, &offset_delta) or rd32(&p, rec_end, &klen):
                return E_VARINT
            if klen < -1 or klen > rec_end - p:
                return E_KEY_LENGTH
            offset = kc_wrap_add(blocks[b].base_offset, offset_delta)
            keep = first <= offset < end_offset
            if keep and fill:
                o.offsets[s.rows] = offset
                o.timestamps[s.rows] = (blocks[b].max_ts if blocks[b].attributes & ATTR_TIMESTAMP_TYPE
                                        else kc_wrap_add(blocks[b].base_ts, ts_delta))
                o.ts_types[s.rows] = 1 if blocks[b].attributes & ATTR_TIMESTAMP_TYPE else 0
                o.epochs[s.rows] = blocks[b].epoch
                o.producers[s.rows] = blocks[b].producer_id
                o.codecs[s.rows] = blocks[b].attributes & ATTR_COMPRESSION
                if klen >= 0:
                    set_bit(o.key_valid, s.rows)
                    memcpy(o.key_data + s.keys, p, klen)
                o.key_offsets[s.rows + 1] = <int32_t>(s.keys + (klen if klen > 0 else 0))
            if klen > 0:
                p += klen
                if keep:
                    s.keys += klen
            if rd32(&p, rec_end, &vlen):
                return E_VARINT
            if vlen < -1 or vlen > rec_end - p:
                return E_VALUE_LENGTH
            if keep and fill:
                if vlen >= 0:
                    set_bit(o.value_valid, s.rows)
                    memcpy(o.value_data + s.values, p, vlen)
                o.value_offsets[s.rows + 1] = <int32_t>(s.values + (vlen if vlen > 0 else 0))
            if vlen > 0:
                p += vlen
                if keep:
                    s.values += vlen
            if rd32(&p, rec_end, &hcount):
                return E_VARINT
            if hcount < 0 or hcount > (rec_end - p) // 2:
                return E_HEADER_COUNT
            for j in range(hcount):
                if rd32(&p, rec_end, &hk):
                    return E_VARINT
                if hk < 0 or hk > rec_end - p:
                    return E_HEADER_KEY
                if keep and fill:
                    memcpy(o.hkey_data + s.hkeys, p, hk)
                    o.hkey_offsets[s.headers + 1] = <int32_t>(s.hkeys + hk)
                p += hk
                if rd32(&p, rec_end, &hv):
                    return E_VARINT
                if hv < -1 or hv > rec_end - p:
                    return E_HEADER_VALUE
                if keep and fill:
                    if hv >= 0:
                        set_bit(o.hvalue_valid, s.headers)
                        memcpy(o.hvalue_data + s.hvalues, p, hv)
                    o.hvalue_offsets[s.headers + 1] = <int32_t>(s.hvalues + (hv if hv > 0 else 0))
                if hv > 0:
                    p += hv
                if keep:
                    s.hkeys += hk
                    s.hvalues += hv if hv > 0 else 0
                    s.headers += 1
            if p != rec_end:
                return E_TRAILING
            if keep:
                s.rows += 1
                if fill:
                    o.header_offsets[s.rows] = <int32_t>s.headers
            if s.keys > INT32_MAX or s.values > INT32_MAX or s.hkeys > INT32_MAX or s.hvalues > INT32_MAX:
                return E_TOO_BIG
        if p != end:
            return E_LEFT_OVER
    return OK


def log_columns(buffer, const int64_t[::1] positions, int64_t first_offset, int64_t end_offset):
    """Columns of every record with ``first_offset <= offset < end_offset`` in the batches
    starting at ``positions`` of ``buffer`` (see kraft.records.log_columns for the tuple)."""
    cdef Buffer buf = acquire(buffer)
    cdef Py_ssize_t nb = positions.shape[0], b, pos
    cdef const uint8_t *hp
    cdef int32_t length
    cdef list owners = []
    cdef Block *blocks = <Block *>malloc((nb if nb else 1) * sizeof(Block))
    cdef Sizes s
    cdef Out o
    cdef int err
    cdef Py_ssize_t bad = 0
    if blocks == NULL:
        raise MemoryError()
    try:
        for b in range(nb):
            pos = positions[b]
            if pos < 0 or pos > buf.size - HEADER_SIZE:
                raise H.corrupt_error(f"batch position {pos} outside the buffer")
            hp = buf.ptr + pos
            length = <int32_t>kc_load_be32(hp + OFF_LENGTH)
            if hp[OFF_MAGIC] != 2 or length < MIN_LENGTH or <Py_ssize_t>length + LOG_OVERHEAD > buf.size - pos:
                raise H.corrupt_error(f"no valid batch at position {pos}")
            blocks[b].base_offset = <int64_t>kc_load_be64(hp + OFF_BASE_OFFSET)
            blocks[b].epoch = <int32_t>kc_load_be32(hp + OFF_EPOCH)
            blocks[b].attributes = <int16_t>kc_load_be16(hp + OFF_ATTRIBUTES)
            blocks[b].base_ts = <int64_t>kc_load_be64(hp + OFF_BASE_TIMESTAMP)
            blocks[b].max_ts = <int64_t>kc_load_be64(hp + OFF_MAX_TIMESTAMP)
            blocks[b].producer_id = <int64_t>kc_load_be64(hp + OFF_PRODUCER_ID)
            blocks[b].count = <int32_t>kc_load_be32(hp + OFF_RECORDS_COUNT)
            blocks[b].p = hp + HEADER_SIZE
            blocks[b].size = <Py_ssize_t>length + LOG_OVERHEAD - HEADER_SIZE
            if blocks[b].attributes & ATTR_COMPRESSION:
                owner = H.decompress(blocks[b].attributes & ATTR_COMPRESSION,
                                     PyBytes_FromStringAndSize(<const char *>blocks[b].p, blocks[b].size))
                owners.append(owner)
                blocks[b].p = <const uint8_t *>PyBytes_AS_STRING(owner)
                blocks[b].size = PyBytes_GET_SIZE(owner)
            if blocks[b].count < 0 or blocks[b].count > blocks[b].size // MIN_RECORD_SIZE:
                raise H.corrupt_error(f"record count {blocks[b].count} impossible in batch at position {pos}")
        o.offsets = NULL
        with nogil:
            err = walk(blocks, nb, first_offset, end_offset, &s, &o, &bad)
        if err != OK:
            raise H.corrupt_error(f"{_MESSAGES[err]} in batch at position {positions[bad]}")
        n, nh = s.rows, s.headers
        offsets = np.empty(n, np.int64)
        timestamps = np.empty(n, np.int64)
        ts_types = np.empty(n, np.int32)
        epochs = np.empty(n, np.int32)
        producers = np.empty(n, np.int64)
        codecs = np.empty(n, np.int8)
        key_valid = np.zeros((n + 7) // 8, np.uint8)
        key_offsets = np.zeros(n + 1, np.int32)
        key_data = np.empty(s.keys, np.uint8)
        value_valid = np.zeros((n + 7) // 8, np.uint8)
        value_offsets = np.zeros(n + 1, np.int32)
        value_data = np.empty(s.values, np.uint8)
        header_offsets = np.zeros(n + 1, np.int32)
        hkey_offsets = np.zeros(nh + 1, np.int32)
        hkey_data = np.empty(s.hkeys, np.uint8)
        hvalue_valid = np.zeros((nh + 7) // 8, np.uint8)
        hvalue_offsets = np.zeros(nh + 1, np.int32)
        hvalue_data = np.empty(s.hvalues, np.uint8)
        if n == 0:  # nothing kept: the arrays are complete as allocated
            return (offsets, timestamps, ts_types, epochs, producers, codecs, key_valid, key_offsets, key_data,
                    value_valid, value_offsets, value_data, header_offsets, hkey_offsets, hkey_data,
                    hvalue_valid, hvalue_offsets, hvalue_data)
        _point(&o, offsets, timestamps, ts_types, epochs, producers, codecs, key_valid, key_offsets, key_data,
               value_valid, value_offsets, value_data, header_offsets, hkey_offsets, hkey_data, hvalue_valid,
               hvalue_offsets, hvalue_data)
        with nogil:
            err = walk(blocks, nb, first_offset, end_offset, &s, &o, &bad)
        if err != OK:  # the first pass accepted the same bytes
            raise H.corrupt_error(f"{_MESSAGES[err]} in batch at position {positions[bad]}")
        return (offsets, timestamps, ts_types, epochs, producers, codecs, key_valid, key_offsets, key_data,
                value_valid, value_offsets, value_data, header_offsets, hkey_offsets, hkey_data, hvalue_valid,
                hvalue_offsets, hvalue_data)
    finally:
        free(blocks)


cdef uint8_t *_u8(uint8_t[::1] a) noexcept:
    return &a[0] if a.shape[0] else <uint8_t *>&_EMPTY


cdef uint8_t _EMPTY = 0


cdef void _point(Out *o, int64_t[::1] offsets, int64_t[::1] timestamps, int32_t[::1] ts_types, int32_t[::1] epochs,
                 int64_t[::1] producers, int8_t[::1] codecs, uint8_t[::1] key_valid, int32_t[::1] key_offsets,
                 uint8_t[::1] key_data, uint8_t[::1] value_valid, int32_t[::1] value_offsets,
                 uint8_t[::1] value_data, int32_t[::1] header_offsets, int32_t[::1] hkey_offsets,
                 uint8_t[::1] hkey_data, uint8_t[::1] hvalue_valid, int32_t[::1] hvalue_offsets,
                 uint8_t[::1] hvalue_data):
    """Raw pointers into the freshly allocated arrays (kept alive by the caller); n > 0."""
    o.offsets = &offsets[0]  # non-NULL marks the filling pass (only called with rows to fill)
    o.timestamps = &timestamps[0]
    o.ts_types = &ts_types[0]
    o.epochs = &epochs[0]
    o.producers = &producers[0]
    o.codecs = &codecs[0]
    o.key_valid = _u8(key_valid)
    o.key_offsets = &key_offsets[0]
    o.key_data = _u8(key_data)
    o.value_valid = _u8(value_valid)
    o.value_offsets = &value_offsets[0]
    o.value_data = _u8(value_data)
    o.header_offsets = &header_offsets[0]
    o.hkey_offsets = &hkey_offsets[0]
    o.hkey_data = _u8(hkey_data)
    o.hvalue_valid = _u8(hvalue_valid)
    o.hvalue_offsets = &hvalue_offsets[0]
    o.hvalue_data = _u8(hvalue_data)
