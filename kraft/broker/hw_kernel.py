"""Picks the high-watermark kernel: ``kraft._native._hw`` (compiled, loops without the GIL) or
``kraft.broker._pure_hw`` (``KRAFT_NO_EXTENSIONS=1``, or when the extension is not built).

``IMPLEMENTATION`` says which one was loaded; ``implementation(name)`` returns either one so
tests and benchmarks can compare them in one process. Selection only: no logic here.
"""

from __future__ import annotations

import os

from kraft.broker import _pure_hw


def _load_native():
    from kraft._native import _hw

    return _hw


NATIVE_IMPORT_ERROR: Exception | None = None
if os.environ.get("KRAFT_NO_EXTENSIONS"):
    _impl = _pure_hw
    IMPLEMENTATION = "python"
else:
    try:
        _impl = _load_native()
        IMPLEMENTATION = "native"
    except ImportError as exc:  # not built: fall back, but say so (tests assert on it)
        NATIVE_IMPORT_ERROR = exc
        _impl = _pure_hw
        IMPLEMENTATION = "python"

isr_min_leo = _impl.isr_min_leo
advance_hw = _impl.advance_hw


def implementation(name: str):
    """The module ``"native"`` or ``"python"``; ImportError if the native one is not built."""
    return _load_native() if name == "native" else _pure_hw


__all__ = ["IMPLEMENTATION", "NATIVE_IMPORT_ERROR", "advance_hw", "implementation", "isr_min_leo"]
