"""Opening a log directory: find the segments, CRC-scan the ones after the clean point,
truncate a torn or corrupt tail, rebuild indexes, and bring the leader-epoch cache in line
with what is really on disk.

Why only the tail may be repaired: ``SegmentedLog`` fsyncs a segment (and the epoch
checkpoint) before it creates the next one, and deletes later segments durably before it
truncates an earlier one, so every segment but the last is complete on disk whatever the
moment of a crash. Invalid data in an earlier segment therefore is real corruption of data
that may have been acknowledged; it is reported as :class:`LogCorruptionError`, never
"repaired" by dropping it. This module only loads; it does not append or flush.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
from dataclasses import dataclass, field

import numpy as np

from kraft.errors import LogCorruptionError
from kraft.log import files, hotloops, segment_swap
from kraft.log.checkpoint import LeaderEpochCheckpointFile
from kraft.log.epoch_cache import LeaderEpochCache
from kraft.log.index import IndexCorruptError
from kraft.log.segment import LogSegment
from kraft.records.results import BatchScan

_log = logging.getLogger(__name__)
_INT32_MAX = (1 << 31) - 1


@dataclass
class RecoveryReport:
    """What opening the log found and did (for logs, metrics and tests)."""

    segments: int = 0
    scanned_segments: int = 0
    scanned_bytes: int = 0
    #: Bytes cut from the tail segment, and why ("partial" for a torn write).
    truncated_bytes: int = 0
    truncation_reason: str | None = None
    indexes_rebuilt: list = field(default_factory=list)
    removed_files: list = field(default_factory=list)
    epoch_checkpoint_rewritten: bool = False


def list_segment_offsets(directory: str, report: RecoveryReport) -> list[int]:
    """Base offsets of the ``.log`` files; index files without a ``.log`` and our own
    leftover temp files are removed (they are never the only copy of anything)."""
    logs, indexes = set(), []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:  # a new log (checked first: opening thousands, a stat each added up)
        os.makedirs(directory, exist_ok=True)
        names = []
    for name in names:
        parsed = files.parse_segment_name(name)
        if parsed is None:
            if name == files.LEADER_EPOCH_CHECKPOINT + files.TEMP_SUFFIX:
                os.unlink(os.path.join(directory, name))
                report.removed_files.append(name)
            continue
        base, kind = parsed
        if kind == "log":
            logs.add(base)
        else:
            indexes.append((base, name))
    for base, name in indexes:
        if base not in logs:
            os.unlink(os.path.join(directory, name))
            report.removed_files.append(name)
    return sorted(logs)


_AT_POSITION = re.compile(r"\s+at position \d+$")


def _reason(scan_error: str) -> str:
    """A scan error without its trailing "at position N" (the caller says where, once)."""
    return _AT_POSITION.sub("", scan_error)


def _next_offset_of(scan, keep: int, base_offset: int) -> int:
    """The offset the first rejected batch should have had: right after the last kept one."""
    return int(scan.last_offsets[keep - 1]) + 1 if keep > 0 else base_offset


def corruption_message(path: str, reason: str, offset: int, position: int, size: int, why: str) -> str:
    """Every refusal to open a log is one sentence: file, offset, byte position, what to do."""
    where = "" if " offset " in f" {reason} " else f" in the batch expected at offset {offset}"
    return (f"{path}: {reason}{where} (byte {position} of {size}); {why}, so kraft "
            "will not drop it: restore this log directory from a healthy replica (stop the node, move the "
            "directory away, format it again and restart so it catches up from the leader)")


def ensure_index(segment: LogSegment, upper_offset: int) -> bool:
    """Load a closed segment's index, rebuilding it from a scan if it is missing or fails
    its sanity check. ``upper_offset`` is the next segment's base offset. Returns True if
    it was rebuilt. Raises LogCorruptionError if the rebuild scan finds invalid data."""
    try:
        segment.index.load(segment.size, upper_offset - 1 - segment.base_offset)
        return False
    except IndexCorruptError as exc:
        _log.warning("%s: %s; rebuilding it", segment.path, exc)
    scan = segment.scan()
    if scan.error is not None:
        raise LogCorruptionError(corruption_message(
            segment.path, _reason(scan.error), _next_offset_of(scan, len(scan), segment.base_offset),
            scan.valid_end, segment.size, "it was found while rebuilding the index of a segment that is not the tail"))
    segment.index.rebuild(scan.positions, scan.last_offsets, scan.max_timestamps, scan.sizes)
    return True


def _out_of_range(segment: LogSegment, scan, upper_offset: int | None):
    """``(batch index, reason)`` of the first batch whose offsets cannot belong in this
    segment, or None. BaseOffset is outside the CRC, so a flipped bit there shows up here."""
    if not len(scan):
        return None
    bases, lasts = scan.base_offsets, scan.last_offsets
    bad = (bases < segment.base_offset) | (lasts - segment.base_offset > _INT32_MAX)
    if upper_offset is not None:
        bad |= lasts >= upper_offset
    hits = np.flatnonzero(bad)
    if not len(hits):
        return None
    i = int(hits[0])
    first, last = int(bases[i]), int(lasts[i])
    if first < segment.base_offset:
        return i, f"batch offset {first} below the segment base offset"
    if last - segment.base_offset > _INT32_MAX:
        return i, f"offset {last} too far above the segment base offset"
    return i, f"offset {last} reaches into the next segment (base {upper_offset})"


def order_violation(scan, expected_first: int | None, previous_epoch: int):
    """``(batch index, reason)`` of the first batch that breaks the strict order of a log
    written by kraft — offsets contiguous from ``expected_first``, leader epochs never
    decreasing from ``previous_epoch`` — or None. BaseOffset and PartitionLeaderEpoch are
    outside the CRC, so this is what catches damage to them."""
    i, kind = hotloops.order_violation(
        np.ascontiguousarray(scan.base_offsets, np.int64), np.ascontiguousarray(scan.last_offsets, np.int64),
        np.ascontiguousarray(scan.partition_leader_epochs, np.int32),
        -1 if expected_first is None else expected_first, previous_epoch)
    if i < 0:
        return None
    base = int(scan.base_offsets[i])
    if kind == 1:
        want = expected_first if i == 0 else int(scan.last_offsets[i - 1]) + 1
        return i, f"batch at offset {base} where offset {want} was expected"
    before = max([previous_epoch, *scan.partition_leader_epochs[:i].tolist()])
    return i, f"leader epoch {int(scan.partition_leader_epochs[i])} after epoch {before} at offset {base}"


def recover_segments(directory: str, segments: list[LogSegment], scan_from: int, epochs,
                     report: RecoveryReport, strict: bool = True) -> None:
    """CRC-scan ``segments[scan_from:]``: set each one's ``next_offset``, rebuild its index,
    assign the epochs found to ``epochs`` (a LeaderEpochCache) and truncate an invalid tail.
    ``strict`` also requires contiguous offsets and non-decreasing epochs."""
    last = len(segments) - 1
    previous_epoch = epochs.latest_epoch if epochs.latest_epoch is not None else -1
    for i in range(scan_from, last + 1):
        seg = segments[i]
        upper = segments[i + 1].base_offset if i < last else None
        scan = seg.scan()
        report.scanned_segments += 1
        report.scanned_bytes += seg.size
        problem, valid_end, keep = scan.error, scan.valid_end, len(scan)
        # BaseOffset and PartitionLeaderEpoch are outside the CRC: damage to them shows up as
        # offsets that do not fit the segment or (strict logs) break the order. Like any other
        # damage it is an error before the tail and cut off at the tail.
        found = [v for v in (_out_of_range(seg, scan, upper),) if v is not None]
        if strict:
            expected = seg.base_offset if i == scan_from else segments[i - 1].next_offset
            if i > scan_from and seg.base_offset != expected:
                raise LogCorruptionError(f"{seg.path}: segment starts at offset {seg.base_offset} but "
                                         f"the previous one ends at {expected}")
            violation = order_violation(scan, seg.base_offset, previous_epoch)
            if violation is not None:
                found.append(violation)
        if found:
            keep, problem = min(found, key=lambda v: v[0])
            valid_end = int(scan.positions[keep])
        if problem is not None:
            if i < last:
                raise LogCorruptionError(corruption_message(
                    seg.path, _reason(problem), _next_offset_of(scan, keep, seg.base_offset), valid_end, seg.size,
                    f"{last - i} later segment{'s' if last - i > 1 else ''} follow{'' if last - i > 1 else 's'} "
                    "it, so the data was complete once"))
            _log.warning("%s: %s in the batch expected at offset %d (byte %d); truncating %d bytes of the tail",
                         seg.path, _reason(problem), _next_offset_of(scan, keep, seg.base_offset), valid_end,
                         seg.size - valid_end)
            report.truncated_bytes = seg.size - valid_end
            report.truncation_reason = problem
            if keep < len(scan):
                scan = _prefix(scan, keep, valid_end)
            seg.index.loaded = False  # rebuilt below from the scan
            next_offset = int(scan.last_offsets[-1]) + 1 if len(scan) else seg.base_offset
            seg.truncate_at(valid_end, next_offset)
            files.fdatasync(seg.fd, seg.path)
        seg.next_offset = int(scan.last_offsets[-1]) + 1 if len(scan) else seg.base_offset
        if len(scan):
            first_ts = int(scan.max_timestamps[0])
            seg.rolling_timestamp_ms = first_ts if first_ts >= 0 else None
            previous_epoch = max(previous_epoch, int(scan.partition_leader_epochs.max()))
        if seg.index.rebuild(scan.positions, scan.last_offsets, scan.max_timestamps, scan.sizes):
            report.indexes_rebuilt.append(seg.base_offset)
        epochs.assign_batches(scan.partition_leader_epochs, scan.base_offsets)


def _prefix(scan, n: int, valid_end: int) -> BatchScan:
    return BatchScan(scan.positions[:n], scan.base_offsets[:n], scan.last_offsets[:n],
                     scan.partition_leader_epochs[:n], scan.max_timestamps[:n], scan.sizes[:n],
                     valid_end=valid_end, error=None)


def load_epochs(directory: str, epochs):
    """Read ``leader-epoch-checkpoint`` into ``epochs``. Returns the entries read, None if
    the file does not exist (the caller then scans every segment). A malformed file raises
    StateFileError naming it."""
    checkpoint = LeaderEpochCheckpointFile(os.path.join(directory, files.LEADER_EPOCH_CHECKPOINT))
    entries = checkpoint.read(missing=None)
    if entries is None:
        return None
    for epoch, start in entries:
        epochs.assign(epoch, start)
    return entries


def true_next_offset(seg: LogSegment) -> int:
    """The real next offset of a closed segment whose index was just loaded: CRC-scan
    from its last index entry to the end of the file."""
    start = int(seg.index.pos.data[seg.index.pos.n - 1]) if seg.index.pos.n else 0
    scan = seg.scan(start)
    if scan.error is not None:
        raise LogCorruptionError(corruption_message(
            seg.path, _reason(scan.error), _next_offset_of(scan, len(scan), seg.base_offset), scan.valid_end,
            seg.size, "it is not the tail segment"))
    return int(scan.last_offsets[-1]) + 1 if len(scan) else seg.base_offset


_MAX_TIMESTAMP_AT = 35  # RecordBatch v2: offset 8, length 4, epoch 4, magic 1, crc 4, attributes 2, delta 4, base ts 8
_TIMESTAMP = np.dtype(">i8")


def _first_batch_max_timestamp(seg: LogSegment) -> int | None:
    """The first batch's max timestamp (what a segment rolls by age against), from its header."""
    raw = os.pread(seg.fd, 8, _MAX_TIMESTAMP_AT) if seg.size >= _MAX_TIMESTAMP_AT + 8 else b""
    if len(raw) < 8:
        return None
    ts = int(np.frombuffer(raw, _TIMESTAMP)[0])
    return ts if ts >= 0 else None


def _load_clean(segments: list) -> bool:
    """After a clean shutdown (Kafka's ``.kafka_cleanshutdown``): every segment was flushed and
    its index written and synced, so nothing is CRC-scanned or fsynced. The tail segment's
    index is loaded and only the bytes after its last entry are read to find the end. False
    (the caller then recovers as after a crash) if the tail does not hold up."""
    tail = segments[-1]
    for i in range(len(segments) - 1):  # an upper bound until their index is loaded
        segments[i].next_offset = segments[i + 1].base_offset
    try:
        tail.index.load(tail.size, _INT32_MAX)
    except IndexCorruptError as exc:
        _log.warning("%s: %s after a clean shutdown; recovering it as after a crash", tail.path, exc)
        return False
    scan = tail.scan(tail.index.last_entry_position())
    if scan.error is not None or scan.valid_end != tail.size:
        _log.warning("%s: invalid bytes after its last index entry after a clean shutdown; recovering it as "
                     "after a crash", tail.path)
        tail.index.loaded = False
        return False
    tail.next_offset = int(scan.last_offsets[-1]) + 1 if len(scan) else tail.base_offset
    tail.index.resume(scan)
    tail.rolling_timestamp_ms = _first_batch_max_timestamp(tail)
    return True


def load_log(directory: str, config, recovery_point, log_start_offset, now_ms: int, clean: bool = False,
             sync: bool = True):
    """Open every segment of ``directory`` (creating the first if there is none), CRC-scan
    from the clean point, rebuild indexes and the epoch cache, and make the recovered tail
    durable (``sync=False``: the caller does, before the log is used). ``clean``: the log was
    closed by a clean shutdown (nothing to scan or flush, see ``_load_clean``). Returns
    ``(segments, epoch cache, start offset, report)``; see ``SegmentedLog.open`` for the
    arguments and errors."""
    report = RecoveryReport()
    segment_swap.recover_leftovers(directory, report.removed_files)
    bases = list_segment_offsets(directory, report)
    interval = config.index_interval_bytes
    segments = [LogSegment.open(directory, b, interval) for b in bases]
    cache = LeaderEpochCache(directory)
    try:
        if clean and segments:
            checkpoint = load_epochs(directory, cache)
            if checkpoint is not None and _load_clean(segments):
                return _finish(segments, cache, checkpoint, log_start_offset, report)
            cache = LeaderEpochCache(directory)
        created = not segments
        if created:
            segments = [LogSegment.create(directory, log_start_offset or 0, interval, now_ms)]
            files.fsync_dir(directory)
        checkpoint = load_epochs(directory, cache)
        scan_from = 0
        if recovery_point is not None and checkpoint is not None:  # without it, scan all
            scan_from = max(0, bisect.bisect_right(bases, recovery_point) - 1)
        scan_from = min(scan_from, len(segments) - 1)
        for i in range(scan_from):  # an upper bound until their index is loaded
            segments[i].next_offset = segments[i + 1].base_offset
        cache.truncate_from_end(segments[scan_from].base_offset)
        recover_segments(directory, segments, scan_from, cache, report, config.strict_order)
        if sync and not created:
            files.fdatasync(segments[-1].fd, segments[-1].path)  # recovered bytes may be cache-only
        return _finish(segments, cache, checkpoint, log_start_offset, report)
    except BaseException:
        for seg in segments:
            seg.close()
        raise


def _finish(segments, cache, checkpoint, log_start_offset, report):
    report.segments = len(segments)
    start = max(segments[0].base_offset, log_start_offset or 0)
    cache.truncate_from_end(segments[-1].next_offset)
    cache.truncate_from_start(start)
    # No file and nothing to say (a new log): none is written; the first epoch makes one.
    if (checkpoint is None and cache.entries()) or (checkpoint is not None and cache.entries() != checkpoint):
        cache.write()
        report.epoch_checkpoint_rewritten = True
    cache.written_version = cache.version
    return segments, cache, start, report
