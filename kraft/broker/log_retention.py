"""Retention of a partition log (Kafka's ``UnifiedLog.deleteOldSegments`` for ``delete``
cleanup): whole segments go, oldest first, while they are older than ``retention.ms`` (by
their largest timestamp) or while the log without them is still at least ``retention.bytes``;
only segments wholly below the high watermark go. ``-1`` disables either rule. The time test
is the metadata log's (``MetadataRetention.beyond_time``); the size rule differs from the
metadata log's (no snapshots here). Decides the new log start offset; the caller applies it
with ``SegmentedLog.delete_below``. No I/O beyond reading the log's in-memory state.
"""

from __future__ import annotations

import os

from kraft.log.log_reads import segment_max_timestamp
from kraft.log.retention import MetadataRetention
from kraft.log.segmented_log import SegmentedLog


def _largest_timestamp(seg) -> int:
    """The segment's largest batch timestamp; without one (no timestamps) the file's
    modification time, as Kafka falls back to."""
    ts = segment_max_timestamp(seg)
    if ts >= 0:
        return ts
    try:
        return int(os.stat(seg.path).st_mtime * 1000)
    except OSError:
        return -1


def retention_start_offset(log: SegmentedLog, high_watermark: int, retention_ms: int, retention_bytes: int,
                           now_ms: int) -> int | None:
    """The log start offset after retention, or None when nothing is to be deleted."""
    by_time = MetadataRetention(max_bytes=-1, max_ms=retention_ms)
    segments = log.segments
    excess = log.size_bytes - retention_bytes if retention_bytes >= 0 else -1
    new_start = None
    for i, seg in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else log.end_offset
        if seg.size == 0 or upper > high_watermark:
            break
        if not seg.index.loaded:
            log._segment_with_index(i)
        old = by_time.beyond_time(_largest_timestamp(seg), now_ms)
        big = excess >= seg.size
        if not (old or big):
            break
        excess -= seg.size
        new_start = upper
    if new_start is None or new_start <= log.start_offset:
        return None
    return new_start
