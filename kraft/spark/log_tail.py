"""Where a live log directory ends, for the streaming readers: the offset after the last
complete, CRC-valid batch, found without rescanning the whole active segment each trigger.

Runs on the driver between micro-batches. A node may be appending while we look, so a torn
or half-written batch at the tail is simply not there yet; only whole valid batches count.
Remembers, per directory, the segment and file position it scanned up to, so each call
reads only the bytes appended since the last one (or, the first time, from the active
segment's last ``.index`` entry). Reading only; no pyspark import (testable without a JVM).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kraft import records
from kraft.log import files
from kraft.spark.layout import NO_LIMIT, index_position, segment_bases


@dataclass
class _Scanned:
    base: int  # the active segment scanned
    position: int  # end of its last valid batch
    next_offset: int  # the offset after that batch


class LogTail:
    """``end_offset(directory)``: the log end offset of a directory's whole valid batches;
    ``start_offset(directory)``: its first segment's base (None without segments)."""

    def __init__(self):
        self._seen: dict[str, _Scanned] = {}

    @staticmethod
    def start_offset(directory: str) -> int | None:
        bases = segment_bases(directory) if os.path.isdir(directory) else []
        return bases[0] if bases else None

    def end_offset(self, directory: str) -> int | None:
        bases = segment_bases(directory) if os.path.isdir(directory) else []
        if not bases:
            return None
        base = bases[-1]
        path = os.path.join(directory, files.segment_name(base, files.LOG_SUFFIX))
        seen = self._seen.get(directory)
        try:
            size = os.path.getsize(path)
        except OSError:  # deleted between listing and looking: look again next trigger
            return seen.next_offset if seen else None
        if seen is not None and seen.base == base and seen.position <= size:
            seen = self._scan(path, seen) or seen  # only the bytes appended since last time
        else:
            # a new active segment, or one truncated below what we saw: from the index hint
            # (the start of a batch), and from 0 if the hint leads to nothing valid
            fresh = _Scanned(base, index_position(directory, base, NO_LIMIT), base)
            found = self._scan(path, fresh) if fresh.position else None
            seen = found or self._scan(path, _Scanned(base, 0, base)) or _Scanned(base, 0, base)
        self._seen[directory] = seen
        return seen.next_offset

    @staticmethod
    def _scan(path: str, seen: _Scanned) -> _Scanned | None:
        """Scan ``path`` from ``seen.position``; None when no whole valid batch is there."""
        with open(path, "rb") as f:
            f.seek(seen.position)
            buf = f.read()
        scan = records.scan_batches(buf)
        if not len(scan):
            return None
        return _Scanned(seen.base, seen.position + int(scan.valid_end), int(scan.last_offsets[-1]) + 1)
