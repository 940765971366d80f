"""What a leader checks before it appends batches a writer built (Kafka's LogValidator, for the
shapes a KRaft log accepts), so the batches can be appended as the bytes that arrived.

``inspect_batches`` is the cheap part, header fields and CRC of every batch (native, no
record decoding), and says whether any batch is compressed. ``validate_records`` is the
part proportional to the payload: it decodes every record (decompressing, bounded by a
byte budget) and checks offsets and values. Callers run ``validate_records`` off the event
loop when ``inspect_batches`` found compression. Pure functions: no I/O, no threads.
"""

from __future__ import annotations

import numpy as np

from kraft.errors import CorruptRecordError, InvalidRecordError, RecordListTooLargeError, RecordTooLargeError
from kraft.records import RecordBatch, assign_offsets, scan_batches
from kraft.records import compression as _compression
from kraft.records.format import Compression

_HEADER_SIZE = 61
_ATTRIBUTES_OFFSET = 21
_ATTR_COMPRESSION = 0x07
_ATTR_CONTROL = 0x20


class BatchesInfo:
    """What ``inspect_batches`` learned: ``records`` in all, and whether any batch is compressed."""

    __slots__ = ("records", "compressed", "batches")

    def __init__(self, records: int, compressed: bool, batches: int):
        self.records = records
        self.compressed = compressed
        self.batches = batches


def inspect_batches(data, *, max_batch_bytes: int, max_batch_records: int = 1 << 31,
                    allow_control: bool = False) -> BatchesInfo:
    """Framing, magic, CRC, size and record count of every batch in ``data``.

    A trailing partial batch is cut off ``data`` as Kafka ignores it. CorruptRecordError
    for anything malformed, no whole batch, or a control batch (unless allowed), RecordTooLargeError for a batch above
    ``max_batch_bytes`` or ``max_batch_records``, InvalidRecordError for a count that does
    not match the offset deltas. ``data`` must be writable: base offsets are renumbered from 0
    in place (writers send every batch at base offset 0; the leader assigns the real ones)."""
    whole = _whole_batches_end(data)
    if whole == 0:
        raise CorruptRecordError("no complete record batch in the request")
    del data[whole:]
    try:
        assign_offsets(data, 0, -1)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"invalid record batch: {exc}") from None
    scan = scan_batches(data)
    if scan.error is not None:
        raise CorruptRecordError("incomplete record batch at the end of the request" if scan.error == "partial"
                                 else f"invalid record batch: {scan.error}")
    n = len(scan)
    if n == 0:
        raise CorruptRecordError("no record batch in the request")
    if int(scan.sizes.max()) > max_batch_bytes:
        raise RecordTooLargeError(f"record batch of {int(scan.sizes.max())} bytes is over the limit of "
                                  f"{max_batch_bytes} bytes")
    view = memoryview(data)
    records = 0
    compressed = False
    for i in range(n):
        pos = int(scan.positions[i])
        attributes = view[pos + _ATTRIBUTES_OFFSET + 1]  # low byte of the int16
        if attributes & _ATTR_CONTROL and not allow_control:
            raise CorruptRecordError("control batches cannot be produced")
        count = int.from_bytes(view[pos + 57 : pos + 61], "big", signed=True)
        span = int(scan.last_offsets[i] - scan.base_offsets[i]) + 1
        if count <= 0 or count != span:
            raise InvalidRecordError(f"batch {i} holds {count} records but its offset deltas span {span}")
        if count > max_batch_records:
            raise RecordTooLargeError(f"record batch of {count} records is over the limit of {max_batch_records}")
        records += count
        compressed = compressed or bool(attributes & _ATTR_COMPRESSION)
    return BatchesInfo(records, compressed, n)


def _whole_batches_end(data) -> int:
    """Where the last whole batch ends (by the Length fields; validity is checked later)."""
    pos, end = 0, len(data)
    while end - pos >= _HEADER_SIZE:
        size = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True) + 12
        if size < _HEADER_SIZE or size > end - pos:
            break
        pos += size
    if end - pos >= _HEADER_SIZE and pos < end:
        size = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True) + 12
        if size < _HEADER_SIZE:
            return end  # a bad length is an error for the scan to report, not a tail to cut
    return pos


def validate_records(data, *, max_decompressed_bytes: int, max_batch_decompressed_bytes: int | None = None,
                     allow_null_values: bool = False) -> None:
    """Decode every record of every batch in ``data`` (already passed ``inspect_batches``):
    offset deltas must run 0..n-1 and, unless allowed, every record needs a value. The
    records of all batches together may decompress to at most ``max_decompressed_bytes``,
    one batch's to at most ``max_batch_decompressed_bytes`` (RecordListTooLargeError
    beyond either; decompression stops at the limit)."""
    per_batch = max_batch_decompressed_bytes or max_decompressed_bytes
    view = memoryview(data)
    pos, end, budget = 0, len(view), max_decompressed_bytes
    while pos < end:
        batch = RecordBatch(view, pos)
        codec = batch.compression
        if codec != Compression.NONE:
            block = _compression.decompress(codec, view[pos + _HEADER_SIZE : pos + batch.size],
                                            min(budget, per_batch))
            budget -= len(block)
            # The same header without the codec bits over the inflated records: the codec's
            # one record parser then checks them (the CRC is not consulted by decode()).
            flat = bytearray(view[pos : pos + _HEADER_SIZE])
            flat[_ATTRIBUTES_OFFSET + 1] &= ~_ATTR_COMPRESSION & 0xFF
            flat += block
            flat[8:12] = (len(flat) - 12).to_bytes(4, "big")
            decoded = RecordBatch(flat, 0).decode()
        else:
            budget -= batch.size - _HEADER_SIZE
            if budget < 0:
                raise RecordListTooLargeError(f"records exceed {max_decompressed_bytes} bytes")
            decoded = batch.decode()
        offsets = np.asarray(decoded.offsets) - batch.base_offset
        if len(offsets) != batch.records_count or not np.array_equal(offsets, np.arange(len(offsets))):
            raise InvalidRecordError("record offset deltas must run 0, 1, 2, ... within a batch")
        if not allow_null_values and len(offsets) and int(np.min(decoded.value_lengths)) < 0:
            raise InvalidRecordError("records need a value (null values are not accepted)")
        pos += batch.size


__all__ = ["BatchesInfo", "inspect_batches", "validate_records"]
