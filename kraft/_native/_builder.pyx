# cython: language_level=3
"""Compiled RecordBatch v2 builder: whole-batch ``build_batch`` and incremental
``RecordBatchBuilder``. Output is byte-identical to the pure-Python builder.

``build_batch`` sizes the batch exactly in a first pass and writes records straight into
the final bytes object in a second, so an uncompressed batch costs one allocation and no
intermediate copy. Must not import kraft Python modules.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.number cimport PyNumber_Index
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from kraft._native._buffer cimport Buffer, Hooks, acquire, get_hooks
from kraft._native._layout cimport *
from kraft._native._prims cimport *

cdef Hooks H = get_hooks()
cdef int64_t MAX_BATCH = 0x7FFFFFFF


cdef inline int64_t now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef inline int64_t as_ms(object o) except? -1:
    """A timestamp: any integer (``__index__``); a float is a TypeError, not truncated."""
    return PyNumber_Index(o)


cdef struct Blob:
    const uint8_t *ptr
    Py_ssize_t len  # -1 = null


cdef inline int get_blob(object o, Blob *out, list holders) except -1:
    cdef Buffer b
    if o is None:
        out.ptr = NULL
        out.len = -1
    elif type(o) is bytes:
        out.ptr = <const uint8_t *>PyBytes_AS_STRING(o)
        out.len = PyBytes_GET_SIZE(o)
    else:
        b = acquire(o)
        holders.append(b)  # keep the export alive until the record is written
        out.ptr = b.ptr
        out.len = b.size
    return 0


cdef inline Py_ssize_t blob_size(Blob *b) noexcept nogil:
    return 1 if b.len < 0 else kc_sizeof_varint(b.len) + b.len


cdef inline uint8_t *write_blob(uint8_t *p, Blob *b) noexcept nogil:
    if b.len < 0:
        p[0] = 1  # zig-zag -1
        return p + 1
    p += kc_write_varint(p, b.len)
    memcpy(p, b.ptr, b.len)
    return p + b.len


cdef inline int header_key(object k, Blob *out, list holders) except -1:
    cdef Py_ssize_t n
    if isinstance(k, str):
        out.ptr = <const uint8_t *>PyUnicode_AsUTF8AndSize(k, &n)
        out.len = n
        return 0
    if k is None:
        raise TypeError("header key must be a str, not None")
    return get_blob(k, out, holders)


cdef Py_ssize_t headers_size(object headers, list holders) except -1:
    cdef Blob k, v
    cdef Py_ssize_t size
    if not headers:
        return 1
    size = kc_sizeof_varint(len(headers))
    for hk, hv in headers:
        header_key(hk, &k, holders)
        get_blob(hv, &v, holders)
        size += kc_sizeof_varint(k.len) + k.len + blob_size(&v)
    return size


cdef uint8_t *write_headers(uint8_t *p, object headers, list holders) except NULL:
    cdef Blob k, v
    if not headers:
        p[0] = 0
        return p + 1
    p += kc_write_varint(p, len(headers))
    for hk, hv in headers:
        header_key(hk, &k, holders)
        get_blob(hv, &v, holders)
        p = write_blob(p, &k)
        p = write_blob(p, &v)
    return p


cdef inline Py_ssize_t body_size(int64_t ts_delta, int32_t offset_delta, Blob *key, Blob *value,
                                 Py_ssize_t hsize) noexcept nogil:
    return 1 + kc_sizeof_varint(ts_delta) + kc_sizeof_varint(offset_delta) + blob_size(key) \
        + blob_size(value) + hsize


cdef inline uint8_t *write_record_start(uint8_t *p, Py_ssize_t body, int64_t ts_delta,
                                        int32_t offset_delta, Blob *key, Blob *value) noexcept nogil:
    p += kc_write_varint(p, body)
    p[0] = 0  # record attributes: unused in v2
    p += 1
    p += kc_write_varint(p, ts_delta)
    p += kc_write_varint(p, offset_delta)
    p = write_blob(p, key)
    return write_blob(p, value)


cdef void finish_header(uint8_t *p, Py_ssize_t total, int64_t base_offset, int32_t epoch,
                        int16_t attributes, int32_t count, int64_t base_ts, int64_t max_ts,
                        int64_t producer_id, int16_t producer_epoch, int32_t base_sequence) noexcept nogil:
    kc_store_be64(p + OFF_BASE_OFFSET, <uint64_t>base_offset)
    kc_store_be32(p + OFF_LENGTH, <uint32_t>(total - LOG_OVERHEAD))
    kc_store_be32(p + OFF_EPOCH, <uint32_t>epoch)
    p[OFF_MAGIC] = 2
    kc_store_be16(p + OFF_ATTRIBUTES, <uint16_t>attributes)
    kc_store_be32(p + OFF_LAST_OFFSET_DELTA, <uint32_t>(count - 1))
    kc_store_be64(p + OFF_BASE_TIMESTAMP, <uint64_t>base_ts)
    kc_store_be64(p + OFF_MAX_TIMESTAMP, <uint64_t>max_ts)
    kc_store_be64(p + OFF_PRODUCER_ID, <uint64_t>producer_id)
    kc_store_be16(p + OFF_PRODUCER_EPOCH, <uint16_t>producer_epoch)
    kc_store_be32(p + OFF_BASE_SEQUENCE, <uint32_t>base_sequence)
    kc_store_be32(p + OFF_RECORDS_COUNT, <uint32_t>count)
    kc_store_be32(p + OFF_CRC, kraft_crc32c(0, p + OFF_ATTRIBUTES, total - OFF_ATTRIBUTES))


cdef int16_t make_attributes(int compression, bint transactional, bint control,
                             bint log_append_time) except -1:
    if compression < 0 or compression > 4:
        raise H.codec_error(f"unknown compression codec {compression}")
    return <int16_t>(compression | (ATTR_TIMESTAMP_TYPE if log_append_time else 0)
                     | (ATTR_TRANSACTIONAL if transactional else 0) | (ATTR_CONTROL if control else 0))


cdef bytes assemble(object records, int compression, int32_t count, int64_t base_offset,
                    int32_t epoch, int16_t attributes, int64_t base_ts, int64_t max_ts,
                    int64_t producer_id, int16_t producer_epoch, int32_t base_sequence):
    """Compress a records block and put a header in front (the compressed path)."""
    cdef bytes packed = H.compress(compression, records)
    cdef Py_ssize_t total = HEADER_SIZE + PyBytes_GET_SIZE(packed)
    if total > MAX_BATCH:
        raise OverflowError("record batch larger than 2 GiB")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t *p = <uint8_t *>PyBytes_AS_STRING(out)
    memcpy(p + HEADER_SIZE, PyBytes_AS_STRING(packed), PyBytes_GET_SIZE(packed))
    finish_header(p, total, base_offset, epoch, attributes, count, base_ts, max_ts,
                  producer_id, producer_epoch, base_sequence)
    return out


def build_batch(values, keys=None, headers=None, timestamps=None, *, int64_t base_offset=0,
                int32_t partition_leader_epoch=-1, timestamp=None, int compression=0,
                int64_t producer_id=-1, int16_t producer_epoch=-1, int32_t base_sequence=-1,
                bint transactional=False, bint control=False, bint log_append_time=False):
    """Encode a whole batch in one call (see kraft.records.build_batch)."""
    cdef Py_ssize_t n = len(values), i, total, body
    cdef int16_t attributes = make_attributes(compression, transactional, control, log_append_time)
    cdef list holders = []
    cdef Blob k, v
    cdef int64_t ts, base_ts, max_ts, fixed_ts
    cdef bint has_keys = keys is not None, has_headers = headers is not None
    cdef bint has_ts = timestamps is not None
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    if n > 0x7FFFFFFF:
        raise OverflowError("too many records for one batch")
    for name, seq in (("keys", keys), ("headers", headers), ("timestamps", timestamps)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"{name} has {len(seq)} entries for {n} values")
    fixed_ts = now_ms() if timestamp is None else as_ms(timestamp)
    base_ts = as_ms(timestamps[0]) if has_ts else fixed_ts
    max_ts = base_ts
    k.ptr = NULL
    k.len = -1

    # Pass 1: exact size.
    total = HEADER_SIZE
    for i in range(n):
        if has_keys:
            get_blob(keys[i], &k, holders)
        get_blob(values[i], &v, holders)
        ts = as_ms(timestamps[i]) if has_ts else fixed_ts
        if ts > max_ts:
            max_ts = ts
        body = body_size(kc_wrap_sub(ts, base_ts), <int32_t>i,  &k, &v,
                         headers_size(headers[i], holders) if has_headers else 1)
        total += kc_sizeof_varint(body) + body
        if holders:
            del holders[:]
    if total > MAX_BATCH:
        raise OverflowError("record batch larger than 2 GiB")

    # Pass 2: write records in place (after the header, or into a scratch block to compress).
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total if compression == 0 else total - HEADER_SIZE)
    cdef uint8_t *start = <uint8_t *>PyBytes_AS_STRING(out)
    cdef uint8_t *p = start + (HEADER_SIZE if compression == 0 else 0)
    cdef Py_ssize_t hsize
    for i in range(n):
        if has_keys:
            get_blob(keys[i], &k, holders)
        get_blob(values[i], &v, holders)
        ts = as_ms(timestamps[i]) if has_ts else fixed_ts
        if has_headers:
            hsize = headers_size(headers[i], holders)
            body = body_size(kc_wrap_sub(ts, base_ts), <int32_t>i, &k, &v, hsize)
            p = write_record_start(p, body, kc_wrap_sub(ts, base_ts), <int32_t>i, &k, &v)
            p = write_headers(p, headers[i], holders)
        else:
            body = body_size(kc_wrap_sub(ts, base_ts), <int32_t>i, &k, &v, 1)
            p = write_record_start(p, body, kc_wrap_sub(ts, base_ts), <int32_t>i, &k, &v)
            p[0] = 0
            p += 1
        if holders:
            del holders[:]
    if compression:
        return assemble(out, compression, <int32_t>n, base_offset, partition_leader_epoch,
                        attributes, base_ts, max_ts, producer_id, producer_epoch, base_sequence)
    finish_header(start, total, base_offset, partition_leader_epoch, attributes, <int32_t>n,
                  base_ts, max_ts, producer_id, producer_epoch, base_sequence)
    return out


def build_control_batch(int control_type, value, *, int64_t base_offset=0,
                        int32_t partition_leader_epoch=-1, timestamp=None):
    """A one-record control batch: key = int16 version 0 + int16 type."""
    cdef uint8_t key[4]
    kc_store_be16(key, 0)
    kc_store_be16(key + 2, <uint16_t>control_type)
    return build_batch([value], [PyBytes_FromStringAndSize(<char *>key, 4)],
                       base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                       timestamp=timestamp, control=True)


cdef class RecordBatchBuilder:
    """Accumulates records one at a time (see kraft.records.RecordBatchBuilder)."""

    cdef uint8_t *buf
    cdef Py_ssize_t len, cap, max_bytes
    cdef int32_t count, epoch, base_sequence
    cdef int64_t base_ts, max_ts, base_offset, producer_id
    cdef int16_t producer_epoch, attributes
    cdef int compression

    def __init__(self, *, int compression=0, int64_t base_offset=0, int32_t partition_leader_epoch=-1,
                 int64_t producer_id=-1, int16_t producer_epoch=-1, int32_t base_sequence=-1,
                 bint transactional=False, bint control=False, bint log_append_time=False,
                 max_bytes=None):
        self.attributes = make_attributes(compression, transactional, control, log_append_time)
        self.compression = compression
        self.base_offset = base_offset
        self.epoch = partition_leader_epoch
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.max_bytes = -1 if max_bytes is None else max_bytes
        self.len = HEADER_SIZE  # the header is reserved at the front of buf

    def __dealloc__(self):
        free(self.buf)

    def __len__(self):
        return self.count

    def size_in_bytes(self):
        """Uncompressed size of the batch built so far."""
        return self.len

    cdef int reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t want = self.len + extra
        cdef uint8_t *nb
        if want <= self.cap:
            return 0
        want = max(want, self.cap * 2, 65536)  # most batches fit without a second realloc
        nb = <uint8_t *>realloc(self.buf, want)
        if nb == NULL:
            raise MemoryError()
        self.buf, self.cap = nb, want
        return 0

    def append(self, value, key=None, headers=None, timestamp=None):
        """Add a record; returns its offset delta, or None if it would exceed max_bytes."""
        cdef list holders = None
        cdef Blob k, v
        cdef int64_t ts = now_ms() if timestamp is None else as_ms(timestamp)
        cdef Py_ssize_t hsize = 1, body, size
        cdef uint8_t *p
        cdef object tv = type(value)
        cdef object tk = type(key)
        if self.count == 0x7FFFFFFF:
            raise OverflowError("too many records for one batch")
        if self.count == 0:
            self.base_ts = self.max_ts = ts
        # Buffer exports need holding only for non-bytes inputs; skip the list otherwise.
        if headers or (tv is not bytes and value is not None) or (tk is not bytes and key is not None):
            holders = []
        get_blob(key, &k, holders)
        get_blob(value, &v, holders)
        if headers:
            hsize = headers_size(headers, holders)
        body = body_size(kc_wrap_sub(ts, self.base_ts), self.count, &k, &v, hsize)
        size = kc_sizeof_varint(body) + body
        if self.max_bytes >= 0 and self.count and self.len + size > self.max_bytes:
            return None
        if self.len + size > MAX_BATCH:
            raise OverflowError("record batch larger than 2 GiB")
        self.reserve(size)
        p = write_record_start(self.buf + self.len, body, kc_wrap_sub(ts, self.base_ts), self.count, &k, &v)
        if headers:
            write_headers(p, headers, holders)
        else:
            p[0] = 0
        self.len += size
        if ts > self.max_ts:
            self.max_ts = ts
        self.count += 1
        return self.count - 1

    def build(self):
        cdef bytes out
        if self.count == 0:
            raise ValueError("a record batch needs at least one record")
        if self.compression:
            return assemble(PyBytes_FromStringAndSize(<char *>self.buf + HEADER_SIZE, self.len - HEADER_SIZE),
                            self.compression, self.count, self.base_offset, self.epoch,
                            self.attributes, self.base_ts, self.max_ts, self.producer_id,
                            self.producer_epoch, self.base_sequence)
        out = PyBytes_FromStringAndSize(<char *>self.buf, self.len)
        finish_header(<uint8_t *>PyBytes_AS_STRING(out), self.len, self.base_offset, self.epoch,
                      self.attributes, self.count, self.base_ts, self.max_ts, self.producer_id,
                      self.producer_epoch, self.base_sequence)
        return out
