# cython: language_level=3
"""Compaction's per-record work: the key scan of a records block, the key hash, the dedupe
offset map and the rewrite of the records a batch keeps. Every loop runs without the GIL.

The pure-Python twin is ``kraft/log/_pure_compact.py``; both must give identical results
(hashes included: the map of one may be probed with the scan of the other in tests).
Must not import kraft Python modules.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy

import numpy as np

from kraft._native._prims cimport kc_read_varint32, kc_read_varint64, kc_sizeof_varint, kc_write_varint

#: Bytes per map slot: two 64-bit key hashes and an offset (Kafka's SkimpyOffsetMap spends 24 too).
ENTRY_BYTES = 24
#: Seeds of the two 64-bit hashes (together a 128-bit fingerprint, as Kafka's MD5 is).
SEED1 = 0
SEED2 = 0xC2B2AE3D27D4EB4F

cdef uint64_t K1 = 0x9E3779B97F4A7C15ULL
cdef uint64_t K2 = 0xC2B2AE3D27D4EB4FULL
cdef uint64_t CSEED1 = 0
cdef uint64_t CSEED2 = 0xC2B2AE3D27D4EB4FULL


cdef inline uint64_t mix64(uint64_t x) noexcept nogil:
    x ^= x >> 30
    x *= 0xBF58476D1CE4E5B9ULL
    x ^= x >> 27
    x *= 0x94D049BB133111EBULL
    x ^= x >> 31
    return x


cdef inline uint64_t load_le64(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    cdef uint64_t w = 0
    cdef Py_ssize_t i
    for i in range(n):
        w |= (<uint64_t>p[i]) << (8 * i)
    return w


cdef uint64_t hash_bytes(const uint8_t *p, Py_ssize_t n, uint64_t seed) noexcept nogil:
    cdef uint64_t h = seed ^ (<uint64_t>n * K1)
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        h = mix64(h ^ load_le64(p + i, 8)) * K2
        i += 8
    h = mix64(h ^ load_le64(p + i, n - i) ^ (<uint64_t>(n - i) << 56))
    return mix64(h)


cdef void _nothing() noexcept nogil:
    pass


def release_gil():
    """Drop the GIL and take it back: a thread waiting for it (the event loop) gets it now
    instead of after the switch interval, and no CPU is given up when none waits (unlike
    ``time.sleep(0)``, which yields to other processes on a busy machine)."""
    with nogil:
        _nothing()


def key_hash(key):
    """The key's two 64-bit hashes."""
    cdef const uint8_t[::1] k = key
    cdef Py_ssize_t n = k.shape[0]
    cdef const uint8_t *p = &k[0] if n else <const uint8_t *>""
    return hash_bytes(p, n, CSEED1), hash_bytes(p, n, CSEED2)


cdef int walk_block(const uint8_t *base, Py_ssize_t start, Py_ssize_t stop_at, int count, int64_t base_offset,
                    int64_t base_timestamp, int64_t *o, uint64_t *a, uint64_t *c, int64_t *t, uint8_t *f,
                    int64_t *s, int64_t *e) noexcept nogil:
    """Walk ``count`` records in ``base[start:stop_at]``; positions written are relative to
    ``base``. Returns the index of the malformed record, or -1."""
    cdef const uint8_t *p = base + start
    cdef const uint8_t *stop = base + stop_at
    cdef const uint8_t *rec_end
    cdef int32_t length, odelta, klen, vlen
    cdef int64_t tdelta
    cdef int n, i
    for i in range(count):
        s[i] = p - base
        f[i] = 0
        a[i] = 0
        c[i] = 0
        n = kc_read_varint32(p, stop, &length)
        if n == 0 or length < 0 or length > stop - p - n:
            return i
        p += n
        rec_end = p + length
        p += 1  # attributes
        n = kc_read_varint64(p, rec_end, &tdelta) if p < rec_end else 0
        if n == 0:
            return i
        p += n
        n = kc_read_varint32(p, rec_end, &odelta)
        if n == 0:
            return i
        p += n
        n = kc_read_varint32(p, rec_end, &klen)
        if n == 0 or klen > rec_end - p - n or klen < -1:
            return i
        p += n
        if klen >= 0:
            f[i] = 1
            a[i] = hash_bytes(p, klen, CSEED1)
            c[i] = hash_bytes(p, klen, CSEED2)
            p += klen
        n = kc_read_varint32(p, rec_end, &vlen)
        if n == 0 or vlen < -1 or vlen > rec_end - p - n:
            return i
        if vlen >= 0:
            f[i] |= 2
        p = rec_end
        o[i] = base_offset + odelta
        t[i] = base_timestamp + tdelta
        e[i] = p - base
    return -1


cdef tuple _outputs(Py_ssize_t n):
    return (np.empty(n, np.int64), np.zeros(n, np.uint64), np.zeros(n, np.uint64), np.empty(n, np.int64),
            np.zeros(n, np.uint8), np.empty(n, np.int64), np.empty(n, np.int64))


def scan_records(block, int count, int64_t base_offset, int64_t base_timestamp):
    """Walk ``count`` records of an uncompressed records block. Returns ``(offsets, h1, h2,
    timestamps, flags, starts, ends)`` (flags bit 0: has a key, bit 1: has a value); ValueError
    when the block does not hold ``count`` well-formed records."""
    cdef const uint8_t[::1] b = block
    cdef Py_ssize_t size = b.shape[0]
    if count < 0 or count > size:
        raise ValueError(f"record count {count} does not fit {size} bytes")
    out = _outputs(count)
    if count == 0:
        return out
    cdef int64_t[::1] o = out[0], t = out[3], s = out[5], e = out[6]
    cdef uint64_t[::1] a = out[1], c = out[2]
    cdef uint8_t[::1] f = out[4]
    cdef int bad
    with nogil:
        bad = walk_block(&b[0], 0, size, count, base_offset, base_timestamp, &o[0], &a[0], &c[0], &t[0], &f[0],
                         &s[0], &e[0])
    if bad >= 0:
        raise ValueError(f"malformed record {bad} of {count}")
    return out


def scan_many(buffer, const int64_t[::1] block_starts, const int64_t[::1] block_ends, const int64_t[::1] counts,
              const int64_t[::1] base_offsets, const int64_t[::1] base_timestamps):
    """``scan_records`` of many uncompressed blocks of one buffer (a segment) in one call, the
    results concatenated, starts and ends relative to the buffer. The GIL is released."""
    cdef const uint8_t[::1] b = buffer
    cdef Py_ssize_t nb = block_starts.shape[0], size = b.shape[0], total = 0, k, at = 0
    for k in range(nb):
        if counts[k] < 0 or block_starts[k] < 0 or block_ends[k] > size or block_starts[k] > block_ends[k] \
                or counts[k] > block_ends[k] - block_starts[k]:
            raise ValueError(f"block {k} does not fit the buffer")
        total += counts[k]
    out = _outputs(total)
    if total == 0:
        return out
    cdef int64_t[::1] o = out[0], t = out[3], s = out[5], e = out[6]
    cdef uint64_t[::1] a = out[1], c = out[2]
    cdef uint8_t[::1] f = out[4]
    cdef int bad = -1
    with nogil:
        for k in range(nb):
            if counts[k] == 0:
                continue
            bad = walk_block(&b[0], block_starts[k], block_ends[k], <int>counts[k], base_offsets[k],
                             base_timestamps[k], &o[at], &a[at], &c[at], &t[at], &f[at], &s[at], &e[at])
            if bad >= 0:
                break
            at += counts[k]
    if bad >= 0:
        raise ValueError(f"malformed record {bad} in block {k}")
    return out


def rebuild_records(block, const int64_t[::1] starts, const int64_t[::1] ends, const int64_t[::1] timestamps,
                    const int64_t[::1] keep, int64_t new_base_timestamp):
    """The records ``keep`` (indexes into the scan of ``block``), each re-encoded with its
    timestamp relative to ``new_base_timestamp`` (everything else byte for byte)."""
    cdef const uint8_t[::1] b = block
    cdef Py_ssize_t total = 0, j, k
    cdef int64_t i
    for j in range(keep.shape[0]):
        i = keep[j]
        total += ends[i] - starts[i] + 20  # a varlong and a varint may each grow
    out = bytearray(total)
    if total == 0:
        return b""
    cdef uint8_t[::1] w = out
    cdef uint8_t *q = &w[0]
    cdef uint8_t *q0 = q
    cdef const uint8_t *base = &b[0]
    cdef const uint8_t *p
    cdef const uint8_t *rec_end
    cdef int32_t length
    cdef int64_t tdelta, newdelta
    cdef int n
    cdef Py_ssize_t body
    with nogil:
        for j in range(keep.shape[0]):
            i = keep[j]
            p = base + starts[i]
            rec_end = base + ends[i]
            n = kc_read_varint32(p, rec_end, &length)
            p += n
            n = kc_read_varint64(p + 1, rec_end, &tdelta)
            newdelta = timestamps[i] - new_base_timestamp
            body = 1 + kc_sizeof_varint(newdelta) + (rec_end - (p + 1 + n))
            q += kc_write_varint(q, body)
            q[0] = p[0]
            q += 1
            q += kc_write_varint(q, newdelta)
            k = rec_end - (p + 1 + n)
            memcpy(q, p + 1 + n, k)
            q += k
    return bytes(out[:q - q0])


cdef struct Entry:
    uint64_t h1
    uint64_t h2
    int64_t off


cdef class OffsetMap:
    """Kafka's SkimpyOffsetMap: key fingerprint -> latest offset, in a fixed table of
    ``memory_bytes // 24`` slots (open addressing, linear probing; each slot's two hashes and
    offset side by side, one cache line touched per probe) filled to at most ``load_factor``
    of them. Memory never grows: a caller whose keys do not fit cleans in several passes."""

    cdef object _table
    cdef Entry *tab
    cdef readonly Py_ssize_t slots, capacity, size
    cdef readonly int64_t latest_offset

    def __init__(self, Py_ssize_t memory_bytes, double load_factor=0.9):
        self.slots = max(1, memory_bytes // ENTRY_BYTES)
        self.capacity = max(1, min(self.slots - 1, <Py_ssize_t>(self.slots * load_factor))) if self.slots > 1 else 0
        self._table = np.empty(self.slots * 3, np.int64)
        cdef int64_t[::1] raw = self._table
        self.tab = <Entry *>&raw[0]
        self.size = 1
        self.clear()

    def clear(self):
        cdef Py_ssize_t i
        if self.size:
            with nogil:
                for i in range(self.slots):
                    self.tab[i].off = -1
        self.size = 0
        self.latest_offset = -1

    def put_many(self, const uint64_t[::1] h1, const uint64_t[::1] h2, const int64_t[::1] offsets,
                 const uint8_t[::1] flags):
        """Put each keyed record (flags bit 0), in order, keeping the larger offset per key.
        Returns the index of the first record that did not fit (``len`` if all did)."""
        cdef Py_ssize_t n = offsets.shape[0], i = 0, slot, slots = self.slots
        cdef int64_t latest = self.latest_offset
        cdef Py_ssize_t size = self.size, capacity = self.capacity
        cdef Entry *tab = self.tab
        cdef bint full = False
        with nogil:
            while i < n:
                if flags[i] & 1:
                    slot = <Py_ssize_t>(h1[i] % <uint64_t>slots)
                    while tab[slot].off >= 0 and (tab[slot].h1 != h1[i] or tab[slot].h2 != h2[i]):
                        slot += 1
                        if slot == slots:
                            slot = 0
                    if tab[slot].off < 0:
                        if size >= capacity:
                            full = True
                            break
                        size += 1
                        tab[slot].h1 = h1[i]
                        tab[slot].h2 = h2[i]
                        tab[slot].off = offsets[i]
                    elif offsets[i] > tab[slot].off:
                        tab[slot].off = offsets[i]
                    if offsets[i] > latest:
                        latest = offsets[i]
                i += 1
        self.size = size
        self.latest_offset = latest
        return i

    def get_many(self, const uint64_t[::1] h1, const uint64_t[::1] h2, const uint8_t[::1] flags):
        """The latest offset of each keyed record's key, -1 when absent or keyless."""
        cdef Py_ssize_t n = h1.shape[0], i, slot, slots = self.slots
        cdef Entry *tab = self.tab
        found = np.full(n, -1, np.int64)
        if n == 0:
            return found
        cdef int64_t[::1] out = found
        with nogil:
            for i in range(n):
                if not (flags[i] & 1):
                    continue
                slot = <Py_ssize_t>(h1[i] % <uint64_t>slots)
                while tab[slot].off >= 0:
                    if tab[slot].h1 == h1[i] and tab[slot].h2 == h2[i]:
                        out[i] = tab[slot].off
                        break
                    slot += 1
                    if slot == slots:
                        slot = 0
        return found
