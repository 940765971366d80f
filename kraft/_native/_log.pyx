# cython: language_level=3
"""Hot loops of the log storage layer: batch location in segment bytes, offset/time index
building and lookup, and the leader-epoch table.

Everything here works on plain buffers and numpy arrays; it must not import any kraft Python
module, do I/O, or know about files (``kraft.log`` owns that). ``kraft/log/_pure_log.py`` is
the pure-Python twin with the same API and results; tests feed both the same inputs.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memmove

import numpy as np

cimport numpy as cnp

cnp.import_array()

# Batch layout (kraft/records/format.py): only the fields this module reads.
cdef enum:
    OFF_LENGTH = 8
    OFF_LAST_OFFSET_DELTA = 23
    LOG_OVERHEAD = 12
    MIN_LENGTH = 49
    FOUND_C = 0
    NOT_FOUND_C = 1
    CORRUPT_C = 2

FOUND = 0
NOT_FOUND = 1
CORRUPT = 2

cdef inline uint32_t _be32(const uint8_t *p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]

cdef inline uint64_t _be64(const uint8_t *p) noexcept nogil:
    return (<uint64_t>_be32(p) << 32) | _be32(p + 4)


def find_batch(const uint8_t[::1] buf, Py_ssize_t position, int64_t target):
    """Walk the batch headers in ``buf`` from ``position`` and return ``(FOUND, pos)`` for the
    first complete batch whose last offset is >= ``target``; ``(NOT_FOUND, end)`` when no
    complete batch qualifies (``end`` = just after the last complete batch); ``(CORRUPT,
    pos)`` when the length field at ``pos`` is impossible. No CRC check: callers read data
    that was validated when it was appended or recovered."""
    cdef Py_ssize_t end = buf.shape[0]
    cdef int32_t length
    cdef int64_t last
    cdef const uint8_t *p
    cdef int status = NOT_FOUND_C
    if buf.shape[0] == 0:
        return NOT_FOUND, position
    p = &buf[0]
    with nogil:
        while end - position >= LOG_OVERHEAD:
            length = <int32_t>_be32(p + position + OFF_LENGTH)
            if length < MIN_LENGTH:
                status = CORRUPT_C
                break
            if <int64_t>length + LOG_OVERHEAD > end - position:
                break
            last = <int64_t>_be64(p + position) + <int32_t>_be32(p + position + OFF_LAST_OFFSET_DELTA)
            if last >= target:
                status = FOUND_C
                break
            position += length + LOG_OVERHEAD
    return status, position


def whole_batches(const uint8_t[::1] buf, Py_ssize_t position, Py_ssize_t limit):
    """``(end, first_size)``: ``end`` is the furthest batch boundary with ``end - position <=
    limit`` and only complete batches in between (``position`` if even the first batch does
    not fit); ``first_size`` is the size of the batch at ``position`` (-1 if its header is
    not in ``buf``, -2 if its length field is impossible)."""
    cdef Py_ssize_t n = buf.shape[0]
    cdef Py_ssize_t start = position, stop
    cdef int32_t length
    cdef int64_t first_size = -1
    cdef const uint8_t *p
    if n == 0:
        return position, -1
    p = &buf[0]
    stop = n if limit > n - start else start + limit
    with nogil:
        if n - position >= LOG_OVERHEAD:
            length = <int32_t>_be32(p + position + OFF_LENGTH)
            first_size = -2 if length < MIN_LENGTH else <int64_t>length + LOG_OVERHEAD
        while stop - position >= LOG_OVERHEAD:
            length = <int32_t>_be32(p + position + OFF_LENGTH)
            if length < MIN_LENGTH or <int64_t>length + LOG_OVERHEAD > stop - position:
                break
            position += length + LOG_OVERHEAD
    return position, first_size


def floor_index(cnp.ndarray keys, Py_ssize_t n, int64_t target):
    """Largest ``i < n`` with ``keys[i] <= target`` (keys ascending, int32 or int64), or -1."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    cdef const int32_t[::1] k32
    cdef const int64_t[::1] k64
    if n <= 0:
        return -1
    if keys.dtype == np.int32:
        k32 = keys
        with nogil:
            while lo < hi:
                mid = (lo + hi) >> 1
                if k32[mid] <= target:
                    lo = mid + 1
                else:
                    hi = mid
    else:
        k64 = keys
        with nogil:
            while lo < hi:
                mid = (lo + hi) >> 1
                if k64[mid] <= target:
                    lo = mid + 1
                else:
                    hi = mid
    return lo - 1


def order_violation(const int64_t[::1] base_offsets, const int64_t[::1] last_offsets,
                    const int32_t[::1] epochs, int64_t expected_first, int64_t previous_epoch):
    """``(index, kind)`` of the first batch that breaks strict log order — kind 1: its base
    offset is not the previous last offset + 1 (``expected_first`` for the first batch, -1
    to skip that check); kind 2: its epoch is below an earlier one (or ``previous_epoch``)
    — or ``(-1, 0)``."""
    cdef Py_ssize_t i, n = base_offsets.shape[0], bad = -1
    cdef int kind = 0
    cdef int64_t expect = expected_first, epoch = previous_epoch
    with nogil:
        for i in range(n):
            if (i > 0 or expected_first >= 0) and base_offsets[i] != expect:
                bad, kind = i, 1
                break
            if epochs[i] < epoch:
                bad, kind = i, 2
                break
            epoch = epochs[i]
            expect = last_offsets[i] + 1
    return bad, kind


def check_offset_index(const int32_t[::1] rel, const int32_t[::1] pos, Py_ssize_t n, int64_t log_size):
    """Index of the first entry that breaks an offset index's invariants (relative offsets
    and positions strictly increasing, non-negative, positions inside the log), or -1."""
    cdef Py_ssize_t i, bad = -1
    with nogil:
        for i in range(n):
            if (rel[i] < 0 or pos[i] < 0 or pos[i] >= log_size
                    or (i > 0 and (rel[i] <= rel[i - 1] or pos[i] <= pos[i - 1]))):
                bad = i
                break
    return bad


def check_time_index(const int64_t[::1] ts, const int32_t[::1] rel, Py_ssize_t n, int64_t max_rel):
    """Index of the first time-index entry whose timestamp decreases or whose relative
    offset decreases or lies outside ``[0, max_rel]``, or -1."""
    cdef Py_ssize_t i, bad = -1
    with nogil:
        for i in range(n):
            if (rel[i] < 0 or rel[i] > max_rel
                    or (i > 0 and (ts[i] < ts[i - 1] or rel[i] < rel[i - 1]))):
                bad = i
                break
    return bad


cdef class IndexBuilder:
    """Decides which batches of a segment get offset/time index entries, Kafka's way: an
    offset entry ``(last offset - base, batch position)`` once more than ``interval`` bytes
    were written since the previous entry, and with it a time entry ``(max timestamp so
    far, its batch's last offset - base)`` when that timestamp grew. Feed it batches in
    log order (arrays from a scan); it keeps the running state between calls."""

    cdef public int64_t base_offset
    cdef public int64_t interval
    cdef public int64_t bytes_since_entry
    cdef public int64_t max_timestamp
    cdef public int64_t offset_of_max_timestamp
    cdef public int64_t last_time_entry

    def __init__(self, int64_t base_offset, int64_t interval):
        self.base_offset = base_offset
        self.interval = interval
        self.bytes_since_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.last_time_entry = -1

    def add(self, const int64_t[::1] positions, const int64_t[::1] last_offsets,
            const int64_t[::1] max_timestamps, const int64_t[::1] sizes, int64_t shift=0):
        """Returns ``(rel, pos, time_ts, time_rel)`` numpy arrays of the new entries;
        ``positions[i] + shift`` is where batch i starts in the segment file."""
        cdef Py_ssize_t n = positions.shape[0], i, k = 0, t = 0
        cdef cnp.ndarray[cnp.int32_t, ndim=1] rel = np.empty(n, np.int32)
        cdef cnp.ndarray[cnp.int32_t, ndim=1] pos = np.empty(n, np.int32)
        cdef cnp.ndarray[cnp.int64_t, ndim=1] tts = np.empty(n, np.int64)
        cdef cnp.ndarray[cnp.int32_t, ndim=1] trel = np.empty(n, np.int32)
        cdef int32_t *rp = <int32_t *>rel.data
        cdef int32_t *pp = <int32_t *>pos.data
        cdef int64_t *tp = <int64_t *>tts.data
        cdef int32_t *trp = <int32_t *>trel.data
        with nogil:
            for i in range(n):
                if max_timestamps[i] > self.max_timestamp:
                    self.max_timestamp = max_timestamps[i]
                    self.offset_of_max_timestamp = last_offsets[i]
                if self.bytes_since_entry > self.interval:
                    rp[k] = <int32_t>(last_offsets[i] - self.base_offset)
                    pp[k] = <int32_t>(positions[i] + shift)
                    k += 1
                    if self.max_timestamp > self.last_time_entry:
                        tp[t] = self.max_timestamp
                        trp[t] = <int32_t>(self.offset_of_max_timestamp - self.base_offset)
                        self.last_time_entry = self.max_timestamp
                        t += 1
                    self.bytes_since_entry = 0
                self.bytes_since_entry += sizes[i]
        return rel[:k], pos[:k], tts[:t], trel[:t]

    def add_one(self, int64_t position, int64_t last_offset, int64_t max_timestamp, int64_t size):
        """``add`` for one batch at file ``position`` without arrays: None, or the new entry
        ``(rel, pos, time_ts, time_rel)`` (the time pair None when no time entry is due)."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_entry <= self.interval:
            self.bytes_since_entry += size
            return None
        rel = <int32_t>(last_offset - self.base_offset)
        pos = <int32_t>position
        ts = trel = None
        if self.max_timestamp > self.last_time_entry:
            ts = self.max_timestamp
            trel = <int32_t>(self.offset_of_max_timestamp - self.base_offset)
            self.last_time_entry = self.max_timestamp
        self.bytes_since_entry = size
        return rel, pos, ts, trel


cdef class EpochTable:
    """Leader epochs and their start offsets, both strictly increasing, with Kafka's
    ``LeaderEpochFileCache`` rules for assign/truncate and lookups by binary search."""

    cdef int32_t *_epochs
    cdef int64_t *_starts
    cdef Py_ssize_t _n
    cdef Py_ssize_t _cap

    def __cinit__(self):
        self._epochs = NULL
        self._starts = NULL
        self._n = 0
        self._cap = 0

    def __dealloc__(self):
        free(self._epochs)
        free(self._starts)

    def __init__(self, entries=()):
        for epoch, start in entries:
            self.assign(epoch, start)

    def __len__(self):
        return self._n

    cdef int _reserve(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap = self._cap if self._cap else 8
        cdef void *e
        cdef void *s
        if need <= self._cap:
            return 0
        while cap < need:
            cap *= 2
        e = realloc(self._epochs, cap * sizeof(int32_t))
        if e == NULL:
            raise MemoryError()
        self._epochs = <int32_t *>e
        s = realloc(self._starts, cap * sizeof(int64_t))
        if s == NULL:
            raise MemoryError()
        self._starts = <int64_t *>s
        self._cap = cap
        return 0

    cdef Py_ssize_t _floor_epoch(self, int64_t epoch) noexcept nogil:
        cdef Py_ssize_t lo = 0, hi = self._n, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._epochs[mid] <= epoch:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    cdef Py_ssize_t _floor_start(self, int64_t offset) noexcept nogil:
        cdef Py_ssize_t lo = 0, hi = self._n, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self._starts[mid] <= offset:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def assign(self, int64_t epoch, int64_t start_offset):
        """Record that ``epoch`` starts at ``start_offset``. A no-op if it is already the
        latest epoch at an earlier or equal start; otherwise entries with an epoch >= it or
        a start >= its start are dropped first. Returns True if the table changed."""
        if epoch < 0 or start_offset < 0 or epoch > 0x7FFFFFFF:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        cdef Py_ssize_t n = self._n
        if n and self._epochs[n - 1] == epoch and self._starts[n - 1] <= start_offset:
            return False
        while n and (self._epochs[n - 1] >= epoch or self._starts[n - 1] >= start_offset):
            n -= 1
        self._reserve(n + 1)
        self._epochs[n] = <int32_t>epoch
        self._starts[n] = start_offset
        self._n = n + 1
        return True

    def assign_batches(self, const int32_t[::1] epochs, const int64_t[::1] base_offsets):
        """Assign the epoch of every batch whose epoch is >= 0 and above the latest one (the
        rule Kafka applies while appending and recovering). Returns True if anything changed."""
        cdef Py_ssize_t i, n = epochs.shape[0]
        cdef int64_t latest = self._epochs[self._n - 1] if self._n else -1
        changed = False
        for i in range(n):
            if epochs[i] >= 0 and epochs[i] > latest:
                latest = epochs[i]
                self.assign(epochs[i], base_offsets[i])
                changed = True
        return changed

    def truncate_from_end(self, int64_t end_offset):
        """Drop entries starting at or after ``end_offset``. Returns True if any were."""
        cdef Py_ssize_t n = self._n
        while n and self._starts[n - 1] >= end_offset:
            n -= 1
        changed = n != self._n
        self._n = n
        return changed

    def truncate_from_start(self, int64_t start_offset):
        """Drop entries wholly below ``start_offset``; the last epoch starting at or before it
        is kept and moved to start there. Returns True if anything changed."""
        cdef Py_ssize_t i = self._floor_start(start_offset)
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return False
        memmove(self._epochs, self._epochs + i, (self._n - i) * sizeof(int32_t))
        memmove(self._starts, self._starts + i, (self._n - i) * sizeof(int64_t))
        self._n -= i
        self._starts[0] = start_offset
        return True

    def clear(self):
        self._n = 0

    def end_offset_for(self, int64_t requested, int64_t log_end_offset):
        """Kafka's ``endOffsetFor``: ``(epoch, end offset)`` where epoch is the largest known
        epoch <= ``requested`` and the end offset is the start of the next larger epoch (the
        log end offset for the latest epoch); ``(requested, first start)`` when ``requested``
        is below every known epoch; ``(-1, -1)`` when undefined."""
        cdef Py_ssize_t n = self._n, f
        if requested < 0 or n == 0:
            return -1, -1
        if self._epochs[n - 1] == requested:
            return requested, log_end_offset
        f = self._floor_epoch(requested)
        if f == n - 1:  # above every known epoch
            return -1, -1
        if f < 0:
            return requested, self._starts[0]
        return self._epochs[f], self._starts[f + 1]

    def epoch_for_offset(self, int64_t offset):
        """Epoch of the entry covering ``offset`` (largest start <= offset), or -1."""
        cdef Py_ssize_t i = self._floor_start(offset)
        return -1 if i < 0 else self._epochs[i]

    def latest(self):
        """``(epoch, start_offset)`` of the latest entry, or None."""
        return (self._epochs[self._n - 1], self._starts[self._n - 1]) if self._n else None

    def earliest(self):
        return (self._epochs[0], self._starts[0]) if self._n else None

    def entry(self, int64_t epoch):
        """``(epoch, start)`` of exactly ``epoch``, or None."""
        cdef Py_ssize_t i = self._floor_epoch(epoch)
        return (self._epochs[i], self._starts[i]) if i >= 0 and self._epochs[i] == epoch else None

    def previous_epoch(self, int64_t epoch):
        """Largest known epoch strictly below ``epoch``, or -1."""
        cdef Py_ssize_t i = self._floor_epoch(epoch - 1)
        return self._epochs[i] if i >= 0 else -1

    def entries(self):
        cdef Py_ssize_t i
        return [(self._epochs[i], self._starts[i]) for i in range(self._n)]
