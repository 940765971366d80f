"""Helpers of the compaction tests: keyed logs and what a reader sees in them."""

from __future__ import annotations

from kraft import records
from kraft.log import LogConfig, SegmentedLog
from kraft.log.cleaner import clean_log
from kraft.log.compact_codec import OffsetMap
from kraft.records import Compression


def open_compact_log(directory, **config) -> SegmentedLog:
    config.setdefault("background_flush", False)
    config.setdefault("strict_order", False)
    config.setdefault("segment_bytes", 4096)
    return SegmentedLog.open(str(directory), LogConfig(**config))


def append_keyed(log, pairs, *, per_batch=10, timestamp=1_000, compression=Compression.NONE, producer=None,
                 transactional=False):
    """Append ``(key, value)`` pairs (value None: a tombstone) as leader batches."""
    for i in range(0, len(pairs), per_batch):
        chunk = pairs[i:i + per_batch]
        kw = {}
        if producer is not None:
            kw = dict(producer_id=producer[0], producer_epoch=producer[1], base_sequence=producer[2] + i,
                      transactional=transactional)
        batch = records.build_batch([v for _, v in chunk], keys=[k for k, _ in chunk], timestamp=timestamp,
                                    compression=compression, **kw)
        log.append(batch, leader_epoch=1)


def read_all(log) -> list:
    """Every record as (offset, key, value), reading from the start across gaps."""
    out, offset = [], log.start_offset
    while offset < log.end_offset:
        data = log.read(offset, 1 << 20)
        if not data:
            break
        for batch in records.iter_batches(data):
            for r in batch:
                out.append((r.offset, r.key, r.value))
            offset = batch.base_offset + batch.last_offset_delta + 1
    return out


def latest_per_key(rows) -> dict:
    latest = {}
    for offset, key, value in rows:
        latest[key] = (offset, value)
    return latest


def clean_all(log, *, map_bytes=1 << 20, now_ms=10_000, delete_retention_ms=1_000, first_dirty=None,
              upper=None, run_on_owner=None):
    """Clean below the active segment until the dirty section is done; returns the stats of each pass."""
    passes, first = [], log.start_offset if first_dirty is None else first_dirty
    upper = log.segments[-1].base_offset if upper is None else upper
    while True:
        stats = clean_log(log, first, upper, OffsetMap(map_bytes), now_ms=now_ms,
                          delete_retention_ms=delete_retention_ms, segment_bytes=log.config.segment_bytes,
                          run_on_owner=run_on_owner)
        passes.append(stats)
        if stats.end_offset >= upper or stats.end_offset <= first:
            return passes
        first = stats.end_offset
