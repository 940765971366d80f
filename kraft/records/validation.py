"""What a leader checks before it appends batches a writer built (Kafka's LogValidator, for the
shapes a KRaft log accepts), so the batches can be appended as the bytes that arrived.

``inspect_batches`` is one native pass (``check_writer_batches``): framing, magic, CRC,
counts and limits of every batch and every record of the uncompressed ones, and the topic's
record rules (``RecordRules``: a key on a compacted topic, CreateTime timestamps within
``message.timestamp.before/after.max.ms``). It says whether any batch is compressed;
``validate_compressed`` then inflates those within a byte budget and runs the same record
checks over the inflated records. Callers run ``validate_compressed`` off the event loop. A
broken rule is Kafka's ``RecordValidationException`` (``RecordValidationError``, its record
errors listed in Python on that error path only). Pure functions: no I/O, no threads.
"""

from __future__ import annotations

from typing import NamedTuple

from kraft.errors import (CorruptRecordError, ErrorCode, InvalidRecordError, RecordListTooLargeError,
                          RecordTooLargeError, RecordValidationError)
from kraft.records import RecordBatch, check_writer_batches, crc32c
from kraft.records import compression as _compression
from kraft.records.format import Compression

_HEADER_SIZE = 61
_ATTRIBUTES_LOW = 22  # low byte of the int16 Attributes
_ATTR_COMPRESSION = 0x07
_ERRORS = {1: CorruptRecordError, 2: InvalidRecordError, 3: RecordTooLargeError}
_NO_KEY, _BAD_TIMESTAMP = 4, 5
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


class RecordRules(NamedTuple):
    """A topic's rules for the records a writer sends (Kafka's LogValidator)."""

    #: cleanup.policy has compact: every record needs a key
    require_keys: bool = False
    #: CreateTime timestamps (other than -1) must lie within [min, max]
    min_timestamp: int = _I64_MIN
    max_timestamp: int = _I64_MAX
    #: "topic-partition", for Kafka's message
    partition: str = ""

    @classmethod
    def of(cls, *, compact: bool, now_ms: int | None, before_ms: int, after_ms: int, partition: str):
        """``now_ms`` None: no timestamp bounds (a LogAppendTime topic)."""
        if now_ms is None:
            return cls(compact, partition=partition)
        return cls(compact, max(_I64_MIN, now_ms - before_ms), min(_I64_MAX, now_ms + after_ms), partition)


NO_RULES = RecordRules()


def _rule_error(data, position: int, rules: RecordRules) -> RecordValidationError:
    """Kafka's record errors for the batch at ``position`` (uncompressed): every record without a
    key or out of the time bounds, and the exception ``processRecordErrors`` would throw."""
    errors, bad_time = [], False
    for index, record in enumerate(RecordBatch(data, position)):
        if rules.require_keys and record.key is None:
            errors.append((index, "Compacted topic cannot accept message without key in topic partition "
                                  f"{rules.partition}"))
        elif record.timestamp != -1 and not rules.min_timestamp <= record.timestamp <= rules.max_timestamp:
            bad_time = True
            errors.append((index, f"Timestamp {record.timestamp} of message with offset {record.offset} is out of "
                                  f"range. The timestamp should be within [{rules.min_timestamp}, "
                                  f"{rules.max_timestamp}]"))
    if bad_time:
        return RecordValidationError(ErrorCode.INVALID_TIMESTAMP,
                                     "One or more records have been rejected due to invalid timestamp", errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    return RecordValidationError(ErrorCode.INVALID_RECORD,
                                 f"One or more records have been rejected due to {len(errors)} record errors in "
                                 f"total, and only showing the first three errors at most: [{shown}]", errors)


class BatchesInfo:
    """What ``inspect_batches`` learned: ``records`` in all, and whether any batch is compressed."""

    __slots__ = ("compressed", "records")

    def __init__(self, records: int, compressed: bool):
        self.records = records
        self.compressed = compressed


def inspect_batches(data: bytearray, *, max_batch_bytes: int, max_batch_records: int = 1 << 31,
                    allow_control: bool = False, allow_null_values: bool = False,
                    rules: RecordRules = NO_RULES) -> BatchesInfo:
    """Check every batch in ``data`` and every record of its uncompressed batches.

    A trailing partial batch is cut off ``data`` (Kafka ignores it). CorruptRecordError for
    anything malformed, no whole batch, or a control batch (unless allowed);
    RecordTooLargeError for a batch above ``max_batch_bytes`` or ``max_batch_records``;
    InvalidRecordError for counts or offset deltas that do not agree, or a null value
    (unless allowed); RecordValidationError for records the topic's ``rules`` refuse."""
    outcome, records, compressed, whole_end, message = check_writer_batches(
        data, max_batch_bytes, max_batch_records, allow_control, allow_null_values, *rules[:3])
    if outcome in (_NO_KEY, _BAD_TIMESTAMP):
        raise _rule_error(data, whole_end, rules)
    if outcome:
        raise _ERRORS[outcome](f"invalid record batch: {message}")
    if whole_end == 0:
        raise CorruptRecordError("no complete record batch in the request")
    del data[whole_end:]
    return BatchesInfo(records, compressed)


def validate_compressed(data, *, max_decompressed_bytes: int, max_batch_decompressed_bytes: int | None = None,
                        allow_null_values: bool = False, rules: RecordRules = NO_RULES) -> None:
    """The records of every compressed batch in ``data`` (which passed ``inspect_batches``):
    the same checks as for uncompressed ones. All batches together may inflate to at most
    ``max_decompressed_bytes``, one batch to at most ``max_batch_decompressed_bytes``
    (RecordListTooLargeError beyond either; decompression stops at the limit)."""
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
            # The same header without the codec bits over the inflated records, checked by
            # the one record walker (CRC and size limits do not apply to this copy).
            flat = bytearray(view[pos : pos + _HEADER_SIZE])
            flat[_ATTRIBUTES_LOW] &= ~_ATTR_COMPRESSION & 0xFF
            flat += block
            flat[8:12] = (len(flat) - 12).to_bytes(4, "big")
            _recompute_crc(flat)
            outcome, _, _, _, message = check_writer_batches(flat, 1 << 62, 1 << 31, True, allow_null_values,
                                                             *rules[:3])
            if outcome in (_NO_KEY, _BAD_TIMESTAMP):
                raise _rule_error(flat, 0, rules)
            if outcome:
                raise _ERRORS[outcome](f"invalid compressed records: {message}")
        pos += batch.size
    if budget < 0:
        raise RecordListTooLargeError(f"records exceed {max_decompressed_bytes} bytes")


def _recompute_crc(batch: bytearray) -> None:
    batch[17:21] = crc32c(memoryview(batch)[21:]).to_bytes(4, "big")


__all__ = ["BatchesInfo", "NO_RULES", "RecordRules", "inspect_batches", "validate_compressed"]
