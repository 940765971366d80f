# cython: language_level=3
"""High-watermark math over many partitions at once, the GIL released for the loops:
``isr_min_leo`` (per row, the least LEO among the ISR columns) and ``advance_hw`` (the same
fused with the never-backwards rule, returning only the rows that moved, so the caller's
Python touches changed partitions only). Twin: ``kraft/broker/_pure_hw.py``, same results.

Must not import kraft Python modules.
"""

from libc.stdint cimport int64_t, uint8_t, INT64_MAX

import numpy as np


cdef inline void _min_rows(const int64_t[:, ::1] leos, const uint8_t[:, ::1] isr, int64_t *out) noexcept nogil:
    cdef Py_ssize_t p, r, P = leos.shape[0], R = leos.shape[1]
    cdef int64_t m, v
    for p in range(P):
        m = INT64_MAX
        for r in range(R):
            if isr[p, r]:
                v = leos[p, r]
                if v < m:
                    m = v
        out[p] = m


cdef tuple _views(leos, in_isr):
    # numpy bool is one byte of 0/1, so it is read as uint8 without a copy when contiguous.
    a = np.ascontiguousarray(leos, dtype=np.int64)
    m = np.ascontiguousarray(in_isr, dtype=np.bool_)
    if a.ndim != 2 or a.shape != m.shape:
        raise ValueError(f"leos {a.shape} and in_isr {m.shape} must be the same [P, R] shape")
    return a, m.view(np.uint8)


def isr_min_leo(leos, in_isr):
    """Per row: the least LEO among the columns marked in ``in_isr``; ``int64 max`` for a row
    with none. ``leos`` int64 [P, R], ``in_isr`` bool [P, R]; returns int64 [P]."""
    a, m = _views(leos, in_isr)
    out = np.empty(a.shape[0], np.int64)
    cdef const int64_t[:, ::1] lv = a
    cdef const uint8_t[:, ::1] iv = m
    cdef int64_t[::1] ov = out
    if ov.shape[0]:
        with nogil:
            _min_rows(lv, iv, &ov[0])
    return out


def advance_hw(leos, in_isr, hws):
    """Rows whose ISR min LEO exceeds the current HW (``hws`` int64 [P]): returns
    ``(rows, new_hws)``, both int64, ``rows`` ascending. A row with no ISR member never moves
    (its min is ``int64 max``, meaning "no answer", not "everything committed"); so neither
    does a row whose least member LEO is ``int64 max``, which no real offset reaches."""
    a, m = _views(leos, in_isr)
    h = np.ascontiguousarray(hws, dtype=np.int64)
    if h.ndim != 1 or h.shape[0] != a.shape[0]:
        raise ValueError(f"hws {h.shape} must be [P] for leos {a.shape}")
    cdef Py_ssize_t P = a.shape[0], n = 0, p
    rows = np.empty(P, np.int64)
    new = np.empty(P, np.int64)
    cdef const int64_t[:, ::1] lv = a
    cdef const uint8_t[:, ::1] iv = m
    cdef const int64_t[::1] hv = h
    cdef int64_t[::1] rv = rows, nv = new
    cdef int64_t v
    if P:
        with nogil:
            _min_rows(lv, iv, &nv[0])
            for p in range(P):  # compacts in place: n <= p, so nv[p] is read before overwritten
                v = nv[p]
                if v != INT64_MAX and v > hv[p]:
                    rv[n] = p
                    nv[n] = v
                    n += 1
    return rows[:n], new[:n]
