"""BatchAccumulator: groups the leader's proposals into batches (Kafka internals/BatchAccumulator).

Proposals are whole lists of record values; each proposal lands in one batch (atomic), gets
its offsets at once, and a batch is appended when the linger time has passed since its
first record, or it is full (bytes or record count), or the leader forces a drain. Builds
no bytes itself (the core calls ``kraft.records.build_batch`` when draining) and does no I/O.
"""

from __future__ import annotations

from kraft.errors import RecordTooLargeError

# Upper bound of RecordBatch v2 per-record framing for small records: length varint,
# attributes, timestamp and offset deltas, key -1, value length, header count.
_RECORD_OVERHEAD = 21
_BATCH_OVERHEAD = 61


class PendingBatch:
    __slots__ = ("base_offset", "values", "size", "first_append_ms")

    def __init__(self, base_offset: int, now_ms: int):
        self.base_offset = base_offset
        self.values: list[bytes] = []
        self.size = _BATCH_OVERHEAD
        self.first_append_ms = now_ms


class BatchAccumulator:
    """Invariant: ``next_offset`` = leader end offset + records accumulated but not drained."""

    def __init__(self, epoch: int, next_offset: int, linger_ms: int, max_batch_bytes: int,
                 max_records: int):
        self.epoch = epoch
        self.next_offset = next_offset
        self.linger_ms = linger_ms
        self.max_batch_bytes = max_batch_bytes
        self.max_records = max_records
        self._completed: list[PendingBatch] = []
        self._current: PendingBatch | None = None
        self._force_drain = False

    def append(self, values, now_ms: int) -> int:
        """Add one atomic proposal; returns the offset of its last record."""
        values = list(values)
        if not values:
            raise ValueError("a proposal needs at least one record")
        size = sum(len(v) + _RECORD_OVERHEAD for v in values)
        if size + _BATCH_OVERHEAD > self.max_batch_bytes or len(values) > self.max_records:
            raise RecordTooLargeError(
                f"proposal of {len(values)} records / {size} bytes exceeds one batch "
                f"({self.max_records} records / {self.max_batch_bytes} bytes)")
        cur = self._current
        if cur is not None and (cur.size + size > self.max_batch_bytes
                                or len(cur.values) + len(values) > self.max_records):
            self._completed.append(cur)
            cur = None
        if cur is None:
            cur = self._current = PendingBatch(self.next_offset, now_ms)
        cur.values.extend(values)
        cur.size += size
        self.next_offset += len(values)
        return self.next_offset - 1

    def force_drain(self) -> None:
        self._force_drain = True

    def is_empty(self) -> bool:
        return self._current is None and not self._completed

    def drain_deadline(self) -> int | None:
        """Absolute time at which a drain is due, or None when nothing is pending."""
        if self._completed or (self._force_drain and self._current is not None):
            return -1
        if self._current is None:
            return None
        return self._current.first_append_ms + self.linger_ms

    def drain(self) -> list[PendingBatch]:
        out = self._completed
        if self._current is not None:
            out.append(self._current)
        self._completed, self._current, self._force_drain = [], None, False
        return out
