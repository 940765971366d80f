# cython: language_level=3
"""Compiled whole-buffer passes over many batches: the recovery/validation scan and
leader offset assignment. Both loops run without the GIL.

Must not import kraft Python modules.
"""

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc

import numpy as np

from kraft._native._buffer cimport Buffer, Hooks, acquire, get_hooks
from kraft._native._layout cimport *
from kraft._native._prims cimport *

cdef Hooks H = get_hooks()


cdef struct Found:
    int64_t position, base_offset, last_offset, max_timestamp, size
    int32_t epoch


cdef enum Stop:
    STOP_END = 0
    STOP_PARTIAL = 1
    STOP_LENGTH = 2
    STOP_MAGIC = 3
    STOP_CRC = 4
    STOP_OFFSETS = 5
    STOP_NOMEM = 6


def scan_batches(buffer, Py_ssize_t position=0):
    """Validate every batch from ``position`` and report them (see kraft.records.BatchScan)."""
    cdef Buffer b = acquire(buffer)
    cdef Found *rows = NULL
    cdef Found *grown
    cdef Py_ssize_t n = 0, cap = 0, end = b.size, pos = position, avail
    cdef const uint8_t *p
    cdef int32_t length = 0, lod, count
    cdef int64_t base, next_offset = 0
    cdef bint have_prev = False
    cdef Stop stop = STOP_END
    if position < 0 or position > end:
        raise H.corrupt_error("position outside the buffer")
    with nogil:
        while pos < end:
            avail = end - pos
            p = b.ptr + pos
            if avail < HEADER_SIZE:
                stop = STOP_PARTIAL
                break
            length = <int32_t>kc_load_be32(p + OFF_LENGTH)
            if length < MIN_LENGTH:
                stop = STOP_LENGTH
                break
            if <Py_ssize_t>length + LOG_OVERHEAD > avail:  # widen: Length may be near 2**31
                stop = STOP_PARTIAL
                break
            if p[OFF_MAGIC] != 2:
                stop = STOP_MAGIC
                break
            if kraft_crc32c(0, p + OFF_ATTRIBUTES, <Py_ssize_t>length + LOG_OVERHEAD - OFF_ATTRIBUTES) != kc_load_be32(p + OFF_CRC):
                stop = STOP_CRC
                break
            base = <int64_t>kc_load_be64(p + OFF_BASE_OFFSET)
            lod = <int32_t>kc_load_be32(p + OFF_LAST_OFFSET_DELTA)
            count = <int32_t>kc_load_be32(p + OFF_RECORDS_COUNT)
            if lod < 0 or count < 0 or (have_prev and base < next_offset):
                stop = STOP_OFFSETS
                break
            if n == cap:
                cap = cap * 2 if cap else 1024
                grown = <Found *>realloc(rows, cap * sizeof(Found))
                if grown == NULL:
                    stop = STOP_NOMEM
                    break
                rows = grown
            rows[n].position = pos
            rows[n].base_offset = base
            rows[n].last_offset = kc_wrap_add(base, lod)
            rows[n].epoch = <int32_t>kc_load_be32(p + OFF_EPOCH)
            rows[n].max_timestamp = <int64_t>kc_load_be64(p + OFF_MAX_TIMESTAMP)
            rows[n].size = <int64_t>length + LOG_OVERHEAD
            n += 1
            next_offset = kc_wrap_add(base, <int64_t>lod + 1)
            have_prev = True
            pos += <Py_ssize_t>length + LOG_OVERHEAD
    if stop == STOP_NOMEM:
        free(rows)
        raise MemoryError()
    if stop == STOP_END:
        error = None
    elif stop == STOP_PARTIAL:
        error = "partial"
    elif stop == STOP_LENGTH:
        error = f"invalid batch length {length} at position {pos}"
    elif stop == STOP_MAGIC:
        error = f"invalid magic {<int>(<signed char>b.ptr[pos + OFF_MAGIC])} at position {pos}"
    elif stop == STOP_CRC:
        error = f"CRC mismatch at position {pos}"
    else:
        error = f"offsets not increasing at position {pos}"
    cdef Scan result = Scan.__new__(Scan)
    result.rows, result.n, result.valid_end, result.error = rows, n, pos, error
    return result


cdef class Scan:
    """What ``scan_batches`` found: kraft.records.BatchScan's interface. The rows stay in C;
    the six numpy arrays are built on first use. An append reads only the scalars (first
    and last offset, largest timestamp and size, the order check): creating six arrays per
    append cost several times the scan itself in a busy node."""

    cdef Found *rows
    cdef Py_ssize_t n
    cdef readonly Py_ssize_t valid_end
    cdef readonly object error
    cdef tuple _arrays

    def __dealloc__(self):
        free(self.rows)

    def __len__(self):
        return self.n

    @property
    def complete(self):
        return self.error is None

    cdef tuple _columns(self):
        if self._arrays is None:
            positions = np.empty(self.n, np.int64)
            bases = np.empty(self.n, np.int64)
            lasts = np.empty(self.n, np.int64)
            epochs = np.empty(self.n, np.int32)
            maxts = np.empty(self.n, np.int64)
            sizes = np.empty(self.n, np.int64)
            fill(self.rows, self.n, positions, bases, lasts, epochs, maxts, sizes)
            self._arrays = (positions, bases, lasts, epochs, maxts, sizes)
        return self._arrays

    @property
    def positions(self):
        return self._columns()[0]

    @property
    def base_offsets(self):
        return self._columns()[1]

    @property
    def last_offsets(self):
        return self._columns()[2]

    @property
    def partition_leader_epochs(self):
        return self._columns()[3]

    @property
    def max_timestamps(self):
        return self._columns()[4]

    @property
    def sizes(self):
        return self._columns()[5]

    @property
    def first_offset(self):
        """Base offset of the first batch (-1 if none)."""
        return self.rows[0].base_offset if self.n else -1

    @property
    def last_offset(self):
        """Last offset of the last batch (-1 if none)."""
        return self.rows[self.n - 1].last_offset if self.n else -1

    @property
    def last_position(self):
        """Position of the last batch (-1 if none)."""
        return self.rows[self.n - 1].position if self.n else -1

    @property
    def max_timestamp(self):
        """The largest MaxTimestamp of any batch (-1 if none)."""
        if not self.n:
            return -1
        cdef int64_t best = self.rows[0].max_timestamp
        cdef Py_ssize_t i
        for i in range(1, self.n):
            if self.rows[i].max_timestamp > best:
                best = self.rows[i].max_timestamp
        return best

    @property
    def max_size(self):
        """The size of the largest batch (0 if none)."""
        cdef int64_t best = 0
        cdef Py_ssize_t i
        for i in range(self.n):
            if self.rows[i].size > best:
                best = self.rows[i].size
        return best

    @property
    def max_epoch(self):
        """The largest PartitionLeaderEpoch of any batch (-1 if none)."""
        if not self.n:
            return -1
        cdef int64_t best = self.rows[0].epoch
        cdef Py_ssize_t i
        for i in range(1, self.n):
            if self.rows[i].epoch > best:
                best = self.rows[i].epoch
        return best

    def is_ordered(self, int64_t expected_first, int64_t previous_epoch):
        """No batch breaks strict log order: offsets run on from ``expected_first`` (-1:
        from the first batch) without gaps, and leader epochs never decrease from
        ``previous_epoch``. kraft.log.recovery.order_violation says where and why."""
        cdef int64_t expect = expected_first, epoch = previous_epoch
        cdef Py_ssize_t i
        for i in range(self.n):
            if (i > 0 or expected_first >= 0) and self.rows[i].base_offset != expect:
                return False
            if self.rows[i].epoch < epoch:
                return False
            epoch = self.rows[i].epoch
            expect = self.rows[i].last_offset + 1
        return True

    def __repr__(self):
        return f"Scan({self.n} batches, valid_end={self.valid_end}, error={self.error!r})"


cdef void fill(Found *rows, Py_ssize_t n, int64_t[::1] positions, int64_t[::1] bases,
               int64_t[::1] lasts, int32_t[::1] epochs, int64_t[::1] maxts,
               int64_t[::1] sizes) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        positions[i] = rows[i].position
        bases[i] = rows[i].base_offset
        lasts[i] = rows[i].last_offset
        epochs[i] = rows[i].epoch
        maxts[i] = rows[i].max_timestamp
        sizes[i] = rows[i].size


def assign_offsets(buffer, int64_t base_offset, int32_t partition_leader_epoch):
    """Rewrite BaseOffset and PartitionLeaderEpoch of every batch in the writable ``buffer``
    so offsets run on from ``base_offset``; returns the next offset (neither field is under
    the CRC). The buffer must hold only complete batches; nothing is changed otherwise."""
    cdef Buffer b = acquire(buffer, True)
    cdef uint8_t *p
    cdef Py_ssize_t pos = 0, end = b.size
    cdef int32_t length, lod
    cdef int64_t next_offset = base_offset
    # First pass validates the framing so a bad buffer is left untouched.
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise H.corrupt_error("incomplete batch in append buffer")
        length = <int32_t>kc_load_be32(b.ptr + pos + OFF_LENGTH)
        if length < MIN_LENGTH or <Py_ssize_t>length + LOG_OVERHEAD > end - pos:
            raise H.corrupt_error(f"invalid batch length {length} at position {pos}")
        lod = <int32_t>kc_load_be32(b.ptr + pos + OFF_LAST_OFFSET_DELTA)
        if lod < 0:
            raise H.corrupt_error(f"negative last offset delta at position {pos}")
        pos += <Py_ssize_t>length + LOG_OVERHEAD
    pos = 0
    with nogil:
        while pos < end:
            p = <uint8_t *>b.ptr + pos
            length = <int32_t>kc_load_be32(p + OFF_LENGTH)
            kc_store_be64(p + OFF_BASE_OFFSET, <uint64_t>next_offset)
            kc_store_be32(p + OFF_EPOCH, <uint32_t>partition_leader_epoch)
            next_offset = kc_wrap_add(next_offset, <int64_t><int32_t>kc_load_be32(p + OFF_LAST_OFFSET_DELTA) + 1)
            pos += <Py_ssize_t>length + LOG_OVERHEAD
    return next_offset


# --- a writer's batches, checked in one pass ---------------------------------------------
# Outcome codes of check_writer_batches (kraft.records.validation maps them to error types).
cdef enum Check:
    CHECK_OK = 0
    CHECK_CORRUPT = 1
    CHECK_INVALID_RECORD = 2
    CHECK_TOO_LARGE = 3
    CHECK_NO_KEY = 4
    CHECK_BAD_TIMESTAMP = 5


cdef struct RecordRules:
    bint allow_null_values
    bint require_keys  # a compacted topic: every record needs a key
    int64_t min_timestamp  # CreateTime records (other than -1) within [min, max]
    int64_t max_timestamp
    int64_t base_timestamp  # the batch's, for the records' deltas


cdef int walk_records(const uint8_t *p, const uint8_t *end, int32_t count, const RecordRules *rules,
                      const char **why) noexcept nogil:
    """Every record of an uncompressed block: lengths, offset deltas 0..count-1, a value
    unless nulls are allowed, a key if required, a timestamp within the bounds, well-formed
    headers, and nothing left over. A missing key or a timestamp out of bounds is reported
    only once the whole block is known to be well formed (CORRUPT takes precedence)."""
    cdef int32_t i, length, offset_delta, klen, vlen, nheaders, j, hk, hv
    cdef int64_t ts_delta, ts
    cdef int n, rule = CHECK_OK
    cdef const char *rule_why = NULL
    cdef const uint8_t *rec_end
    for i in range(count):
        n = kc_read_varint32(p, end, &length)
        if n == 0 or length < MIN_RECORD_SIZE - 1 or length > end - p - n:
            why[0] = b"invalid record length"
            return CHECK_CORRUPT
        p += n
        rec_end = p + length
        p += 1  # attributes
        n = kc_read_varint64(p, rec_end, &ts_delta)
        if n == 0:
            why[0] = b"invalid timestamp delta"
            return CHECK_CORRUPT
        p += n
        n = kc_read_varint32(p, rec_end, &offset_delta)
        if n == 0:
            why[0] = b"invalid offset delta"
            return CHECK_CORRUPT
        if offset_delta != i:
            why[0] = b"record offset deltas must run 0, 1, 2, ... within a batch"
            return CHECK_INVALID_RECORD
        p += n
        n = kc_read_varint32(p, rec_end, &klen)
        if n == 0 or klen < -1 or klen > rec_end - p - n:
            why[0] = b"invalid key length"
            return CHECK_CORRUPT
        p += n + (klen if klen > 0 else 0)
        if rule == CHECK_OK:
            if klen < 0 and rules.require_keys:
                rule, rule_why = CHECK_NO_KEY, b"a compacted topic cannot accept a record without a key"
            else:
                ts = <int64_t>(<uint64_t>rules.base_timestamp + <uint64_t>ts_delta)
                if ts != -1 and (ts < rules.min_timestamp or ts > rules.max_timestamp):
                    rule, rule_why = CHECK_BAD_TIMESTAMP, b"a record timestamp is out of range"
        n = kc_read_varint32(p, rec_end, &vlen)
        if n == 0 or vlen < -1 or vlen > rec_end - p - n:
            why[0] = b"invalid value length"
            return CHECK_CORRUPT
        if vlen == -1 and not rules.allow_null_values:
            why[0] = b"records need a value (null values are not accepted)"
            return CHECK_INVALID_RECORD
        p += n + (vlen if vlen > 0 else 0)
        n = kc_read_varint32(p, rec_end, &nheaders)
        if n == 0 or nheaders < 0:
            why[0] = b"invalid header count"
            return CHECK_CORRUPT
        p += n
        for j in range(nheaders):
            n = kc_read_varint32(p, rec_end, &hk)
            if n == 0 or hk < 0 or hk > rec_end - p - n:
                why[0] = b"invalid header key length"
                return CHECK_CORRUPT
            p += n + hk
            n = kc_read_varint32(p, rec_end, &hv)
            if n == 0 or hv < -1 or hv > rec_end - p - n:
                why[0] = b"invalid header value length"
                return CHECK_CORRUPT
            p += n + (hv if hv > 0 else 0)
        if p != rec_end:
            why[0] = b"record length does not match its fields"
            return CHECK_CORRUPT
    if p != end:
        why[0] = b"bytes left after the last record"
        return CHECK_CORRUPT
    if rule != CHECK_OK:
        why[0] = rule_why
    return rule


def check_writer_batches(buffer, int64_t max_batch_bytes, int64_t max_batch_records, bint allow_control,
                         bint allow_null_values, bint require_keys=False,
                         int64_t min_timestamp=-0x7FFFFFFFFFFFFFFF - 1, int64_t max_timestamp=0x7FFFFFFFFFFFFFFF):
    """One pass over the batches a writer sent: ``(outcome, records, compressed, whole_end,
    message)``. Whole batches only (``whole_end`` is where the last whole one ends; a
    trailing partial batch is left out, as Kafka ignores it). Per batch: length, magic, CRC,
    control bit, RecordsCount = LastOffsetDelta + 1, the size and count limits, and for an
    uncompressed batch every record (see walk_records). Compressed records are left to the
    caller (``compressed`` is true). Base offsets are not looked at: writers send 0. On a
    failure ``whole_end`` is where the failing batch starts."""
    cdef Buffer b = acquire(buffer)
    cdef Py_ssize_t pos = 0, end = b.size, size
    cdef const uint8_t *p
    cdef int32_t length, lod, count
    cdef int16_t attributes
    cdef int64_t records = 0
    cdef bint compressed = False
    cdef int outcome = CHECK_OK
    cdef const char *why = NULL
    cdef Py_ssize_t batch_at = 0
    cdef RecordRules rules
    rules.allow_null_values = allow_null_values
    rules.require_keys = require_keys
    rules.min_timestamp = min_timestamp
    rules.max_timestamp = max_timestamp
    with nogil:
        while end - pos >= HEADER_SIZE:
            p = b.ptr + pos
            length = <int32_t>kc_load_be32(p + OFF_LENGTH)
            if length < MIN_LENGTH:
                outcome, why = CHECK_CORRUPT, b"invalid batch length"
                break
            size = <Py_ssize_t>length + LOG_OVERHEAD
            if size > end - pos:
                break  # a trailing partial batch
            batch_at = pos
            if p[OFF_MAGIC] != 2:
                outcome, why = CHECK_CORRUPT, b"unsupported magic (only RecordBatch v2)"
                break
            if kraft_crc32c(0, p + OFF_ATTRIBUTES, size - OFF_ATTRIBUTES) != kc_load_be32(p + OFF_CRC):
                outcome, why = CHECK_CORRUPT, b"CRC mismatch"
                break
            attributes = <int16_t>kc_load_be16(p + OFF_ATTRIBUTES)
            if attributes & ATTR_CONTROL and not allow_control:
                outcome, why = CHECK_CORRUPT, b"control batches cannot be produced"
                break
            lod = <int32_t>kc_load_be32(p + OFF_LAST_OFFSET_DELTA)
            count = <int32_t>kc_load_be32(p + OFF_RECORDS_COUNT)
            if count <= 0 or lod < 0 or <int64_t>count != <int64_t>lod + 1:
                outcome, why = CHECK_INVALID_RECORD, b"RecordsCount does not match LastOffsetDelta + 1"
                break
            if size > max_batch_bytes:
                outcome, why = CHECK_TOO_LARGE, b"record batch is over the size limit"
                break
            if count > max_batch_records:
                outcome, why = CHECK_TOO_LARGE, b"record batch holds more records than the limit"
                break
            if attributes & ATTR_COMPRESSION:
                compressed = True
            else:
                if count > (size - HEADER_SIZE) // MIN_RECORD_SIZE:
                    outcome, why = CHECK_CORRUPT, b"record count impossible in the batch size"
                    break
                rules.base_timestamp = <int64_t>kc_load_be64(p + OFF_BASE_TIMESTAMP)
                outcome = walk_records(p + HEADER_SIZE, p + size, count, &rules, &why)
                if outcome != CHECK_OK:
                    break
            records += count
            pos += size
    if outcome != CHECK_OK:
        message = f"batch at byte {batch_at}: {why.decode()}"
        return outcome, 0, compressed, pos, message
    return outcome, records, compressed, pos, None
