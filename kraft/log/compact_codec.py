"""Which implementation of compaction's per-record work is in use: ``kraft._native._compact``
or, under ``KRAFT_NO_EXTENSIONS=1`` (or without the extension), ``kraft.log._pure_compact``.
One API: ``key_hash``, ``scan_records``, ``scan_many``, ``rebuild_records``, ``OffsetMap``."""

from __future__ import annotations

import os


def implementation(name: str):
    if name == "native":
        from kraft._native import _compact
        return _compact
    from kraft.log import _pure_compact
    return _pure_compact


if os.environ.get("KRAFT_NO_EXTENSIONS") == "1":
    IMPLEMENTATION = "pure"
else:
    try:
        implementation("native")
        IMPLEMENTATION = "native"
    except ImportError:  # pragma: no cover - a source checkout without the build
        IMPLEMENTATION = "pure"

_impl = implementation(IMPLEMENTATION)
key_hash = _impl.key_hash
release_gil = _impl.release_gil
scan_records = _impl.scan_records
scan_many = _impl.scan_many
rebuild_records = _impl.rebuild_records
OffsetMap = _impl.OffsetMap
