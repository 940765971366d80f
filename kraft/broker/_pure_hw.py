"""Pure-Python twin of ``kraft._native._hw`` (``KRAFT_NO_EXTENSIONS=1``, or when the extension
is not built): the specification the compiled kernel is tested against, row by row, with no
numpy arithmetic, so a disagreement points at the kernel and not at a shared library call.
"""

from __future__ import annotations

import numpy as np

_NO_LEO = (1 << 63) - 1  # int64 max: "no ISR member", never a HW


def _checked(leos, in_isr):
    a = np.asarray(leos, dtype=np.int64)
    m = np.asarray(in_isr, dtype=np.bool_)
    if a.ndim != 2 or a.shape != m.shape:
        raise ValueError(f"leos {a.shape} and in_isr {m.shape} must be the same [P, R] shape")
    return a.tolist(), m.tolist()


def _min_rows(rows, masks) -> list[int]:
    return [min((v for v, m in zip(r, mr) if m), default=_NO_LEO) for r, mr in zip(rows, masks)]


def isr_min_leo(leos, in_isr) -> np.ndarray:
    """Per row: the least LEO among the columns marked in ``in_isr``; ``int64 max`` if none."""
    rows, masks = _checked(leos, in_isr)
    return np.array(_min_rows(rows, masks), dtype=np.int64)


def advance_hw(leos, in_isr, hws) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, new_hws)`` of the rows whose ISR min LEO exceeds ``hws``; a row with no ISR
    member never moves, nor one whose least member LEO is ``int64 max`` (no real offset)."""
    rows, masks = _checked(leos, in_isr)
    h = np.asarray(hws, dtype=np.int64)
    if h.ndim != 1 or h.shape[0] != len(rows):
        raise ValueError(f"hws {h.shape} must be [P] for {len(rows)} rows")
    moved, new = [], []
    for p, (v, old) in enumerate(zip(_min_rows(rows, masks), h.tolist())):
        if v != _NO_LEO and v > old:
            moved.append(p)
            new.append(v)
    return np.array(moved, dtype=np.int64), np.array(new, dtype=np.int64)
