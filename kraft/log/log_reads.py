"""Reads of a partition log for serving clients: whole batches as zero-copy views of the
segment files (Fetch), and the offset for a timestamp or of the largest timestamp
(ListOffsets).

``read_view`` never copies batch bytes: it finds the byte range with the offset index and a
header walk, and returns a ``memoryview`` of the segment's read-only map, for reads used
before the log can change. ``read_bytes`` finds the same range and reads it with ``pread``
(one copy, no map). ``read_answer`` is what a Fetch answer carries: a ``FileSlice`` of the
segment for a large range (the connection sends it from the page cache with ``sendfile``;
``kraft.log.file_slice`` says why a truncation cannot change it), ``read_bytes`` for a small
one (a ``pread`` costs less than the slice's bookkeeping there). Batches are not CRC-checked here (every byte was validated
when appended or recovered; clients check CRCs themselves). Functions over a
``SegmentedLog``'s segments (its ``_bases`` and ``_segment_with_index``, the lazily loaded
indexes: a sibling module of the log, not a client of it), called on the thread that owns the
log; no writes, no asyncio.
"""

from __future__ import annotations

import bisect
import os
import struct

from kraft.errors import LogCorruptionError, OffsetOutOfRangeError
from kraft.log import hotloops
from kraft.log.segmented_log import SegmentedLog
from kraft.records import RecordBatch

_HEADER = struct.Struct(">qiib")  # base offset, length, partition leader epoch, magic
_LAST_DELTA_AT, _MAX_TS_AT = 23, 35
_LOG_OVERHEAD = 12  # base offset + length: enough to know a batch's size
#: A Fetch answer's records from this many bytes on stay in the file until they are sent;
#: ``KRAFT_ZERO_COPY=0`` in a server's environment reads every answer with ``pread`` instead
#: (the copying path: for a comparison, or a platform whose ``sendfile`` misbehaves).
ZERO_COPY_MIN_BYTES = 64 * 1024 if os.environ.get("KRAFT_ZERO_COPY", "1") != "0" else 1 << 62
_I32, _I64 = struct.Struct(">i"), struct.Struct(">q")
EMPTY = memoryview(b"")


def read_view(log: SegmentedLog, offset: int, max_bytes: int, upper_offset: int | None = None,
              min_one: bool = True) -> memoryview:
    """Whole batches from the one containing ``offset``, at most ``max_bytes`` (or the first
    batch alone when ``min_one`` and it is larger, Kafka's ``minOneMessage``), never past
    ``upper_offset`` (exclusive; default the log end; a high watermark for consumers) and
    never across a segment. Empty at or beyond ``upper_offset``. OffsetOutOfRangeError
    outside ``[start_offset, end_offset]``. A view of the segment's map: use it before the
    log can be truncated (``read_bytes`` for bytes that leave the call)."""
    found = _locate(log, offset, max_bytes, upper_offset, min_one)
    if found is None:
        return EMPTY
    seg, position, stop = found
    view = seg.view(position, stop - position)
    end, first_size = hotloops.whole_batches(view, 0, max_bytes)
    if end:
        return view[:end]
    if first_size < 0:
        raise LogCorruptionError(f"invalid batch at position {position} of {seg.path}")
    return view[:first_size] if min_one else EMPTY


def read_bytes(log: SegmentedLog, offset: int, max_bytes: int, upper_offset: int | None = None,
               min_one: bool = True) -> memoryview:
    """What ``read_view`` returns, read with ``pread`` into memory of its own (a view of
    bytes, not of the file's map): what a Fetch answer carries. The answer may wait in the
    connection's queue behind earlier ones, and a follower may truncate the segment
    meanwhile; a map of a truncated file raises SIGBUS when touched, a copy cannot."""
    found = _locate(log, offset, max_bytes, upper_offset, min_one)
    return EMPTY if found is None else _pread_found(*found, max_bytes, min_one)


def _pread_found(seg, position: int, stop: int, max_bytes: int, min_one: bool) -> memoryview:
    chunk = seg.pread(min(stop - position, max(max_bytes, _LOG_OVERHEAD)), position)
    end, first_size = hotloops.whole_batches(chunk, 0, max_bytes)
    if end:
        return memoryview(chunk)[:end]
    if first_size < 0:
        raise LogCorruptionError(f"invalid batch at position {position} of {seg.path}")
    return memoryview(seg.pread(first_size, position)) if min_one else EMPTY


def read_answer(log: SegmentedLog, offset: int, max_bytes: int, upper_offset: int | None = None,
                min_one: bool = True):
    """What ``read_bytes`` returns, as a ``FileSlice`` of the segment when it is at least
    ``ZERO_COPY_MIN_BYTES`` long (whole batches found from the mapped headers, nothing read)."""
    found = _locate(log, offset, max_bytes, upper_offset, min_one)
    if found is None:
        return EMPTY
    seg, position, stop = found
    if min(stop - position, max_bytes) < ZERO_COPY_MIN_BYTES:  # located once: small reads are the hot path
        return _pread_found(seg, position, stop, max_bytes, min_one)
    view = seg.view(position, stop - position)
    try:
        end, first_size = hotloops.whole_batches(view, 0, max_bytes)
    finally:
        view.release()
    if not end:
        if first_size < 0:
            raise LogCorruptionError(f"invalid batch at position {position} of {seg.path}")
        if not min_one:
            return EMPTY
        end = first_size
    if end < ZERO_COPY_MIN_BYTES:
        return memoryview(seg.pread(end, position))
    return seg.slice(position, end)


def _locate(log: SegmentedLog, offset: int, max_bytes: int, upper_offset: int | None, min_one: bool):
    """``(segment, position, stop)``: the readable byte range for a read at ``offset`` (see
    ``read_view``), or None when there is nothing to read."""
    end_offset = log.end_offset
    upper = end_offset if upper_offset is None else min(upper_offset, end_offset)
    if offset < log.start_offset or offset > end_offset:
        raise OffsetOutOfRangeError(f"offset {offset} outside [{log.start_offset}, {end_offset}] of {log.directory}")
    if offset >= upper or max_bytes <= 0 and not min_one:
        return None
    bases = log._bases
    i = bisect.bisect_right(bases, offset) - 1
    while 0 <= i < len(bases):
        seg = log._segment_with_index(i)
        position = seg.translate(offset)
        if position is None:
            i += 1
            continue
        if seg.base_offset >= upper:
            return None
        # Where the readable part ends in this segment: the batch holding ``upper`` starts it.
        stop = seg.size
        if upper < seg.next_offset:
            stop = seg.translate(upper)
            if stop is None:  # pragma: no cover - upper < next_offset means a batch holds it
                stop = seg.size
        if stop <= position:
            return None
        return seg, position, stop
    return None


def _walk(seg, position: int, stop: int):
    """(position, base offset, last offset, max timestamp) of each batch in ``[position, stop)``,
    read from the mapped headers (one struct read per batch, for the rare timestamp lookups)."""
    view = seg.view(0, stop) if stop else EMPTY
    while position + 61 <= stop:
        base, length, _, _ = _HEADER.unpack_from(view, position)
        last = base + _I32.unpack_from(view, position + _LAST_DELTA_AT)[0]
        max_ts = _I64.unpack_from(view, position + _MAX_TS_AT)[0]
        yield position, base, last, max_ts
        position += 12 + length


def _start_position(seg, timestamp: int) -> int:
    """A position before the first batch whose max timestamp may reach ``timestamp``: after
    the last time-index entry whose timestamp is below it (entries hold max timestamps so far)."""
    if not seg.index.loaded:
        return 0
    ts, rel = seg.index.ts.view(), seg.index.trel.view()
    below = int((ts < timestamp).sum()) if len(ts) else 0
    if below == 0:
        return 0
    return seg.index.lookup(seg.base_offset + int(rel[below - 1]) + 1)


def segment_max_timestamp(seg) -> int:
    """The largest batch timestamp in a loaded segment (Kafka's ``largestTimestamp``): the last
    time-index entry, then a header walk over the batches after it (a few at most: entries are
    ``index.interval.bytes`` apart). -1 for an empty segment."""
    best, position = -1, 0
    if seg.index.ts.n:
        best = int(seg.index.ts.view()[-1])
        position = seg.index.lookup(seg.base_offset + int(seg.index.trel.view()[-1]))
    for _, _, _, max_ts in _walk(seg, position, seg.size):
        best = max(best, max_ts)
    return best


def offset_for_timestamp(log: SegmentedLog, timestamp: int, upper_offset: int | None = None):
    """Kafka's ``fetchOffsetByTimestamp``: ``(timestamp, offset)`` of the first record whose
    timestamp is >= ``timestamp`` below ``upper_offset``, or None."""
    upper = log.end_offset if upper_offset is None else upper_offset
    for i in range(len(log._bases)):
        seg = log._segment_with_index(i)
        if seg.base_offset >= upper:
            return None
        for position, base, last, max_ts in _walk(seg, _start_position(seg, timestamp), seg.size):
            if base >= upper:
                return None
            if max_ts >= timestamp and last >= log.start_offset:
                found = _first_record_at_or_after(seg, position, timestamp, log.start_offset)
                if found is not None:
                    return found
    return None


def _first_record_at_or_after(seg, position: int, timestamp: int, start_offset: int):
    batch = RecordBatch(seg.view(position, seg.size - position), 0)
    for record in batch:  # one batch, decompressed if needed: bounded by max.message.bytes
        if record.timestamp >= timestamp and record.offset >= start_offset:
            return record.timestamp, record.offset
    return None


def max_timestamp_offset(log: SegmentedLog, upper_offset: int | None = None):
    """``(max timestamp, offset of the record carrying it)`` below ``upper_offset`` (ListOffsets
    -3, KIP-734), or None for an empty log. Walks batch headers of every segment."""
    upper = log.end_offset if upper_offset is None else upper_offset
    best = None  # (max_ts, segment, position)
    for i in range(len(log._bases)):
        seg = log._segment_with_index(i)
        for position, base, last, max_ts in _walk(seg, 0, seg.size):
            if base >= upper:
                break
            if best is None or max_ts > best[0]:
                best = (max_ts, seg, position)
    if best is None:
        return None
    max_ts, seg, position = best
    for record in RecordBatch(seg.view(position, seg.size - position), 0):
        if record.timestamp == max_ts:
            return max_ts, record.offset
    # LOG_APPEND_TIME batches carry the time in the header only.
    return max_ts, _I64.unpack_from(seg.view(position, 8), 0)[0] + _I32.unpack_from(
        seg.view(position + _LAST_DELTA_AT, 4), 0)[0]
