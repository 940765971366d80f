"""Picks the implementation of the log's hot loops: ``kraft._native._log`` (compiled) or
``kraft.log._pure_log`` (``KRAFT_NO_EXTENSIONS=1``, or when the extension is not built).

``Syncer`` (fdatasync on a thread, reported through an eventfd) comes from
``kraft._native._syncer`` or its twin ``kraft.log._pure_syncer`` the same way.

``IMPLEMENTATION`` says which one was loaded; ``implementation(name)`` returns either one so
tests and benchmarks can compare them in one process. Selection only: no logic here.
"""

from __future__ import annotations

import os

from kraft.log import _pure_log, _pure_syncer


def _load_native():
    from kraft._native import _log

    return _log


def _load_syncer():
    from kraft._native._syncer import Syncer

    return Syncer


NATIVE_IMPORT_ERROR: Exception | None = None
if os.environ.get("KRAFT_NO_EXTENSIONS"):
    _impl = _pure_log
    IMPLEMENTATION = "python"
    Syncer = _pure_syncer.Syncer
else:
    try:
        _impl = _load_native()
        Syncer = _load_syncer()
        IMPLEMENTATION = "native"
    except ImportError as exc:  # not built: fall back, but say so (tests assert on it)
        NATIVE_IMPORT_ERROR = exc
        _impl = _pure_log
        Syncer = _pure_syncer.Syncer
        IMPLEMENTATION = "python"

FOUND, NOT_FOUND, CORRUPT = _pure_log.FOUND, _pure_log.NOT_FOUND, _pure_log.CORRUPT
find_batch = _impl.find_batch
whole_batches = _impl.whole_batches
floor_index = _impl.floor_index
check_offset_index = _impl.check_offset_index
check_time_index = _impl.check_time_index
order_violation = _impl.order_violation
IndexBuilder = _impl.IndexBuilder
EpochTable = _impl.EpochTable


def implementation(name: str):
    """The module ``"native"`` or ``"python"``; ImportError if the native one is not built."""
    return _load_native() if name == "native" else _pure_log


def syncer_class(name: str):
    """``Syncer`` of ``"native"`` or ``"python"``; ImportError if the native one is not built."""
    return _load_syncer() if name == "native" else _pure_syncer.Syncer


__all__ = ["CORRUPT", "FOUND", "IMPLEMENTATION", "NOT_FOUND", "EpochTable", "IndexBuilder", "Syncer",
           "check_offset_index", "check_time_index", "find_batch", "floor_index",
           "implementation", "order_violation", "syncer_class", "whole_batches"]
