"""What a set of batches must satisfy before ``SegmentedLog.append`` writes any of it: whole
valid batches (framing, CRC, increasing offsets), starting at or after the log end (exactly
at it, with no gaps and no decreasing epoch, under ``strict_order``), no batch above
``max_batch_bytes``, and not more than a segment can hold. Each failure raises before the
log changes. Storage mechanics stay in ``segmented_log``."""

from __future__ import annotations

from kraft import records
from kraft.errors import CorruptRecordError, RecordTooLargeError
from kraft.log import recovery
from kraft.log.log_results import UnexpectedAppendOffsetError
from kraft.log.segment import MAX_SEGMENT_SIZE


def checked_batches(buf, end: int, config, latest_epoch: int | None, directory: str,
                    ignore_partial_tail: bool):
    """(the bytes to write, their scan, max timestamp) for an append at log end ``end``, or
    None when ``ignore_partial_tail`` drops the only (partial) batch. Reads only the scan's
    scalars: the native scan then builds no arrays (an append is usually one batch)."""
    scan = records.scan_batches(buf)
    if scan.error == "partial" and ignore_partial_tail:
        if not len(scan):
            return None
        buf = memoryview(buf)[: scan.valid_end]
    elif scan.error is not None:
        raise CorruptRecordError(f"rejected append to {directory}: {scan.error}")
    first = scan.first_offset
    if first < end or (config.strict_order and first != end):
        raise UnexpectedAppendOffsetError(f"append at offset {first} but the log end offset is {end}")
    previous_epoch = -1 if latest_epoch is None else latest_epoch
    if config.strict_order and not scan.is_ordered(end, previous_epoch):
        violation = recovery.order_violation(scan, end, previous_epoch)
        raise CorruptRecordError(f"rejected append to {directory}: {violation[1]}")
    limit = config.max_batch_bytes
    if limit is not None and scan.max_size > limit:
        raise RecordTooLargeError(f"batch of {scan.max_size} bytes over max.message.bytes {limit}")
    if len(buf) > MAX_SEGMENT_SIZE:
        raise RecordTooLargeError(f"append of {len(buf)} bytes does not fit in a segment")
    return buf, scan, scan.max_timestamp
