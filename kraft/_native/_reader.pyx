# cython: language_level=3
"""Compiled RecordBatch v2 reader: header parse, CRC check, lazy record iteration, bulk
decode into numpy arrays, and iteration over a buffer of many batches.

Every malformed input raises the injected CorruptRecordError; nothing reads past the
buffer, and no allocation is sized by an unchecked length from the input. Must not import
kraft Python modules.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

import numpy as np

cimport cython

from kraft._native._buffer cimport Buffer, Hooks, acquire, get_hooks
from kraft._native._layout cimport *
from kraft._native._prims cimport *

cdef Hooks H = get_hooks()


@cython.freelist(256)
@cython.no_gc  # members are ints, bytes, None and tuples of (str, bytes): no cycles possible
cdef class Record:
    """One decoded record; ``headers`` is a tuple of ``(str, bytes | None)`` pairs."""
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly object key
    cdef readonly object value
    cdef readonly tuple headers
    cdef readonly int attributes

    def __init__(self, offset, timestamp, key, value, headers, attributes=0):
        self.offset, self.timestamp, self.key, self.value = offset, timestamp, key, value
        self.headers, self.attributes = tuple(headers), attributes

    def __eq__(self, other):
        if not hasattr(other, "offset") or not hasattr(other, "headers"):
            return NotImplemented
        return (self.offset, self.timestamp, self.key, self.value, self.headers) == (
            other.offset, other.timestamp, other.key, other.value, tuple(other.headers))

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


cdef struct RawRecord:
    int64_t ts_delta
    int32_t offset_delta
    Py_ssize_t key_pos, key_len, value_pos, value_len, headers_pos


cdef inline const uint8_t *read_v32(const uint8_t *p, const uint8_t *end, int32_t *out,
                                    const char *what) except NULL:
    cdef int n = kc_read_varint32(p, end, out)
    if n == 0:
        raise H.corrupt_error(f"invalid varint for {what.decode()}")
    return p + n


cdef const uint8_t *walk_headers(const uint8_t *p, const uint8_t *end, list out) except NULL:
    """Validate (and, if ``out`` is a list, collect) the headers starting at ``p``."""
    cdef int32_t count, klen, vlen, i
    p = read_v32(p, end, &count, b"header count")
    if count < 0 or count > (end - p) // 2:
        raise H.corrupt_error(f"invalid header count {count}")
    for i in range(count):
        p = read_v32(p, end, &klen, b"header key length")
        if klen < 0 or klen > end - p:
            raise H.corrupt_error(f"invalid header key length {klen}")
        try:
            key = PyUnicode_DecodeUTF8(<const char *>p, klen, NULL)
        except UnicodeDecodeError:
            raise H.corrupt_error("header key is not UTF-8")
        p += klen
        p = read_v32(p, end, &vlen, b"header value length")
        if vlen < -1 or vlen > end - p:
            raise H.corrupt_error(f"invalid header value length {vlen}")
        if out is not None:
            out.append((key, None if vlen < 0 else PyBytes_FromStringAndSize(<const char *>p, vlen)))
        if vlen > 0:
            p += vlen
    return p


cdef const uint8_t *parse_record(const uint8_t *p, const uint8_t *end, const uint8_t *base,
                                 RawRecord *r) except NULL:
    cdef int32_t length
    cdef const uint8_t *rec_end
    cdef int n
    p = read_v32(p, end, &length, b"record length")
    if length < MIN_RECORD_SIZE - 1 or length > end - p:
        raise H.corrupt_error(f"invalid record length {length}")
    rec_end = p + length
    p += 1  # attributes: unused in v2
    n = kc_read_varint64(p, rec_end, &r.ts_delta)
    if n == 0:
        raise H.corrupt_error("invalid varint for timestamp delta")
    p = read_v32(p + n, rec_end, &r.offset_delta, b"offset delta")
    cdef int32_t klen, vlen
    p = read_v32(p, rec_end, &klen, b"key length")
    if klen < -1 or klen > rec_end - p:
        raise H.corrupt_error(f"invalid key length {klen}")
    r.key_pos, r.key_len = p - base, klen
    if klen > 0:
        p += klen
    p = read_v32(p, rec_end, &vlen, b"value length")
    if vlen < -1 or vlen > rec_end - p:
        raise H.corrupt_error(f"invalid value length {vlen}")
    r.value_pos, r.value_len = p - base, vlen
    if vlen > 0:
        p += vlen
    r.headers_pos = p - base
    if p < rec_end and p[0] == 0 and p + 1 == rec_end:  # the common case: no headers
        return rec_end
    p = walk_headers(p, rec_end, None)
    if p != rec_end:
        raise H.corrupt_error("record length does not match its fields")
    return p


def parse_headers(data, Py_ssize_t pos):
    """Headers at ``pos`` in a records block (for DecodedBatch.headers)."""
    cdef Buffer b = acquire(data)
    cdef list out = []
    if pos < 0 or pos >= b.size:
        raise H.corrupt_error("header position outside the records block")
    walk_headers(b.ptr + pos, b.ptr + b.size, out)
    return tuple(out)


cdef inline object blob(const uint8_t *base, Py_ssize_t pos, Py_ssize_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char *>base + pos, n)


cdef class RecordBatch:
    """A view of one batch at ``position`` in ``buffer`` (see kraft.records.RecordBatch)."""
    cdef Buffer _buf
    cdef const uint8_t *p
    cdef readonly Py_ssize_t position
    cdef readonly int64_t base_offset, base_timestamp, max_timestamp, producer_id
    cdef readonly int32_t length, partition_leader_epoch, last_offset_delta, base_sequence
    cdef readonly int32_t records_count
    cdef readonly int magic, attributes, producer_epoch
    cdef readonly uint32_t crc

    def __init__(self, buffer, Py_ssize_t position=0):
        self._init(acquire(buffer), position)

    cdef int _init(self, Buffer b, Py_ssize_t position) except -1:
        cdef Py_ssize_t avail = b.size - position
        cdef const uint8_t *p
        if position < 0 or avail < HEADER_SIZE:
            raise H.corrupt_error(f"need {HEADER_SIZE} bytes for a batch header, have {avail}")
        p = b.ptr + position
        self.magic = <int8_t>p[OFF_MAGIC]
        self.length = <int32_t>kc_load_be32(p + OFF_LENGTH)
        if self.magic != 2:
            raise H.corrupt_error(f"unsupported magic {self.magic} at position {position}")
        if self.length < MIN_LENGTH:
            raise H.corrupt_error(f"batch length {self.length} below the minimum {MIN_LENGTH}")
        if <Py_ssize_t>self.length + LOG_OVERHEAD > avail:  # widen first: Length may be near 2**31
            raise H.corrupt_error(f"batch of {<Py_ssize_t>self.length + LOG_OVERHEAD} bytes runs past the buffer ({avail})")
        self.records_count = <int32_t>kc_load_be32(p + OFF_RECORDS_COUNT)
        if self.records_count < 0:
            raise H.corrupt_error(f"negative record count {self.records_count}")
        self._buf, self.p, self.position = b, p, position
        self.base_offset = <int64_t>kc_load_be64(p + OFF_BASE_OFFSET)
        self.partition_leader_epoch = <int32_t>kc_load_be32(p + OFF_EPOCH)
        self.crc = kc_load_be32(p + OFF_CRC)
        self.attributes = <int16_t>kc_load_be16(p + OFF_ATTRIBUTES)
        self.last_offset_delta = <int32_t>kc_load_be32(p + OFF_LAST_OFFSET_DELTA)
        self.base_timestamp = <int64_t>kc_load_be64(p + OFF_BASE_TIMESTAMP)
        self.max_timestamp = <int64_t>kc_load_be64(p + OFF_MAX_TIMESTAMP)
        self.producer_id = <int64_t>kc_load_be64(p + OFF_PRODUCER_ID)
        self.producer_epoch = <int16_t>kc_load_be16(p + OFF_PRODUCER_EPOCH)
        self.base_sequence = <int32_t>kc_load_be32(p + OFF_BASE_SEQUENCE)
        return 0

    @property
    def size(self): return <Py_ssize_t>self.length + LOG_OVERHEAD
    @property
    def last_offset(self): return kc_wrap_add(self.base_offset, self.last_offset_delta)
    @property
    def next_offset(self): return kc_wrap_add(self.base_offset, <int64_t>self.last_offset_delta + 1)
    @property
    def compression(self): return self.attributes & ATTR_COMPRESSION
    @property
    def timestamp_type(self): return 1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0
    @property
    def is_transactional(self): return bool(self.attributes & ATTR_TRANSACTIONAL)
    @property
    def is_control(self): return bool(self.attributes & ATTR_CONTROL)
    @property
    def has_delete_horizon(self): return bool(self.attributes & ATTR_DELETE_HORIZON)

    def tobytes(self):
        return PyBytes_FromStringAndSize(<const char *>self.p, <Py_ssize_t>self.length + LOG_OVERHEAD)

    def compute_crc(self):
        return kraft_crc32c(0, self.p + OFF_ATTRIBUTES, <Py_ssize_t>self.length + LOG_OVERHEAD - OFF_ATTRIBUTES)

    def is_valid(self):
        return self.compute_crc() == self.crc

    def validate(self):
        cdef uint32_t actual = self.compute_crc()
        if actual != self.crc:
            raise H.corrupt_error(
                f"CRC mismatch in batch at offset {self.base_offset}: stored {self.crc:#010x}, "
                f"computed {actual:#010x}")

    cdef object _block(self, const uint8_t **start, Py_ssize_t *size):
        """The records block (decompressed if needed) and the object that owns its memory."""
        cdef int codec = self.attributes & ATTR_COMPRESSION
        cdef object owner = self._buf
        start[0] = self.p + HEADER_SIZE
        size[0] = <Py_ssize_t>self.length + LOG_OVERHEAD - HEADER_SIZE
        if codec:
            owner = H.decompress(codec, PyBytes_FromStringAndSize(<const char *>start[0], size[0]))
            start[0] = <const uint8_t *>PyBytes_AS_STRING(owner)
            size[0] = PyBytes_GET_SIZE(owner)
        if self.records_count > size[0] // MIN_RECORD_SIZE:
            raise H.corrupt_error(f"record count {self.records_count} impossible in {size[0]} bytes")
        return owner

    cdef inline int64_t _ts(self, int64_t delta):
        if self.attributes & ATTR_TIMESTAMP_TYPE:
            return self.max_timestamp
        return kc_wrap_add(self.base_timestamp, delta)

    def __iter__(self):
        cdef _RecordIterator it = _RecordIterator.__new__(_RecordIterator)
        it.batch = self
        it.owner = self._block(&it.p, &it.size)
        it.base = it.p
        it.end = it.p + it.size
        it.remaining = self.records_count
        return it

    def records(self):
        return list(self)

    def values(self):
        """Every record's value (bytes or None), in one C loop."""
        cdef const uint8_t *start
        cdef Py_ssize_t size, i
        cdef RawRecord r
        owner = self._block(&start, &size)
        cdef const uint8_t *p = start
        cdef const uint8_t *end = start + size
        cdef list out = PyList_New(self.records_count)
        for i in range(self.records_count):
            p = parse_record(p, end, start, &r)
            v = blob(start, r.value_pos, r.value_len)
            Py_INCREF(v)
            PyList_SET_ITEM(out, i, v)
        if p != end:
            raise H.corrupt_error(f"{end - p} bytes left after the last record")
        return out

    def values_led_by(self, leads):
        """``([(index, value)], others)``: the values whose first byte ``b`` has
        ``leads[b] != 0`` (``leads``: 256 bytes), and how many values did not (null, empty or
        led by another byte), in one C loop without an object per skipped value (a reader
        that wants only some kinds of values on a log full of others)."""
        cdef const uint8_t *start
        cdef Py_ssize_t size, i
        cdef Py_ssize_t others = 0
        cdef RawRecord r
        cdef const uint8_t[:] table = leads
        if table.shape[0] != 256:
            raise ValueError("leads must hold 256 entries")
        owner = self._block(&start, &size)
        cdef const uint8_t *p = start
        cdef const uint8_t *end = start + size
        cdef list out = []
        for i in range(self.records_count):
            p = parse_record(p, end, start, &r)
            if r.value_len > 0 and table[start[r.value_pos]]:
                out.append((i, PyBytes_FromStringAndSize(<const char *>start + r.value_pos, r.value_len)))
            else:
                others += 1
        if p != end:
            raise H.corrupt_error(f"{end - p} bytes left after the last record")
        return out, others

    def decode(self):
        """All records as numpy arrays (a DecodedBatch), no Python object per record."""
        cdef const uint8_t *start
        cdef Py_ssize_t size, i, n = self.records_count
        cdef RawRecord r
        owner = self._block(&start, &size)
        cols = np.empty((7, n), dtype=np.int64)
        cdef int64_t[:, ::1] c = cols
        cdef const uint8_t *p = start
        cdef const uint8_t *end = start + size
        for i in range(n):
            p = parse_record(p, end, start, &r)
            c[0, i] = kc_wrap_add(self.base_offset, r.offset_delta)
            c[1, i] = self._ts(r.ts_delta)
            c[2, i] = r.key_pos
            c[3, i] = r.key_len
            c[4, i] = r.value_pos
            c[5, i] = r.value_len
            c[6, i] = r.headers_pos
        if p != end:
            raise H.corrupt_error(f"{end - p} bytes left after the last record")
        if owner is self._buf:
            data = memoryview(self._buf.obj)[self.position + HEADER_SIZE : self.position + self.length + LOG_OVERHEAD]
        else:
            data = owner
        return H.decoded_batch(data, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6],
                               header_parser=parse_headers)

    def __repr__(self):
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"epoch={self.partition_leader_epoch}, count={self.records_count}, size={self.size})")


cdef class _RecordIterator:
    cdef RecordBatch batch
    cdef object owner
    cdef const uint8_t *p
    cdef const uint8_t *base
    cdef const uint8_t *end
    cdef Py_ssize_t size
    cdef int32_t remaining

    def __iter__(self):
        return self

    def __next__(self):
        cdef RawRecord r
        cdef Record rec
        cdef list headers
        if self.remaining == 0:
            if self.p != self.end:
                self.p = self.end  # report once
                raise H.corrupt_error("bytes left after the last record")
            raise StopIteration
        self.p = parse_record(self.p, self.end, self.base, &r)
        self.remaining -= 1
        rec = Record.__new__(Record)
        rec.offset = kc_wrap_add(self.batch.base_offset, r.offset_delta)
        rec.timestamp = self.batch._ts(r.ts_delta)
        rec.key = blob(self.base, r.key_pos, r.key_len)
        rec.value = blob(self.base, r.value_pos, r.value_len)
        if self.base[r.headers_pos] == 0:
            rec.headers = ()
        else:
            headers = []
            walk_headers(self.base + r.headers_pos, self.end, headers)
            rec.headers = tuple(headers)
        return rec


cdef class _BatchIterator:
    cdef Buffer buf
    cdef Py_ssize_t pos
    cdef bint validate

    def __iter__(self):
        return self

    def __next__(self):
        cdef Py_ssize_t avail = self.buf.size - self.pos
        cdef int32_t length
        cdef RecordBatch b
        if avail < LOG_OVERHEAD:
            raise StopIteration
        length = <int32_t>kc_load_be32(self.buf.ptr + self.pos + OFF_LENGTH)
        if length < MIN_LENGTH:
            raise H.corrupt_error(f"batch length {length} below the minimum at position {self.pos}")
        if <Py_ssize_t>length + LOG_OVERHEAD > avail:
            raise StopIteration  # incomplete trailing batch
        b = RecordBatch.__new__(RecordBatch)
        b._init(self.buf, self.pos)
        if self.validate:
            b.validate()
        self.pos += <Py_ssize_t>length + LOG_OVERHEAD
        return b


def iter_batches(buffer, Py_ssize_t position=0, *, bint validate=False):
    """Each complete batch in ``buffer`` from ``position`` (see kraft.records.iter_batches)."""
    cdef _BatchIterator it = _BatchIterator.__new__(_BatchIterator)
    it.buf = acquire(buffer)
    if position < 0 or position > it.buf.size:
        raise H.corrupt_error("position outside the buffer")
    it.pos = position
    it.validate = validate
    return it
