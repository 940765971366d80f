"""BatchAccumulator: groups the leader's proposals into batches (Kafka internals/BatchAccumulator).

Two kinds of proposal, each atomic and given its offsets at once:

* a list of record values (the controller's records): values of proposals that arrive within
  the linger time share one batch, built by the core (``kraft.records.build_batch``) when
  it drains;
* whole RecordBatch v2 batches already built by a writer (a Produce request): kept as the
  bytes that arrived; the log patches their base offset and leader epoch in place when the
  core appends them, so their records are never decoded or re-encoded here.

A drain is due when the linger time has passed since the first pending record, a batch is
full (bytes or record count), or the leader forces it. Everything drained is appended in
one log append (and so one flush). Builds no bytes itself and does no I/O.
"""

from __future__ import annotations

from kraft.errors import RecordTooLargeError

# Upper bound of RecordBatch v2 per-record framing for small records: length varint,
# attributes, timestamp and offset deltas, key -1, value length, header count.
_RECORD_OVERHEAD = 21
_BATCH_OVERHEAD = 61


class PendingBatch:
    """Values to be built into one batch starting at ``base_offset``."""

    __slots__ = ("base_offset", "values", "size", "first_append_ms")

    def __init__(self, base_offset: int, now_ms: int):
        self.base_offset = base_offset
        self.values: list[bytes] = []
        self.size = _BATCH_OVERHEAD
        self.first_append_ms = now_ms


class BuiltBatches:
    """RecordBatch v2 bytes proposed as they are (offsets assigned by the log on append)."""

    __slots__ = ("base_offset", "data", "records")

    def __init__(self, base_offset: int, data, records: int):
        self.base_offset = base_offset
        self.data = data
        self.records = records


class BatchAccumulator:
    """Invariant: ``next_offset`` = leader end offset + records accumulated but not drained."""

    def __init__(self, epoch: int, next_offset: int, linger_ms: int, max_batch_bytes: int,
                 max_records: int):
        self.epoch = epoch
        self.next_offset = next_offset
        self.linger_ms = linger_ms
        self.max_batch_bytes = max_batch_bytes
        self.max_records = max_records
        self._completed: list = []  # PendingBatch / BuiltBatches in offset order
        self._current: PendingBatch | None = None
        self._first_pending_ms: int | None = None
        self._built_bytes = 0
        self._full = False  # a value batch filled up, or built batches reached a batch's size
        self._force_drain = False
        #: bytes of everything accumulated and not drained yet (values with their framing)
        self.pending_bytes = 0

    def append(self, values, now_ms: int) -> int:
        """Add one atomic proposal of record values; returns the offset of its last record."""
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
            self._full = True
            cur = None
        if cur is None:
            cur = self._current = PendingBatch(self.next_offset, now_ms)
        self._note_pending(now_ms)
        cur.values.extend(values)
        cur.size += size
        self.pending_bytes += size
        self.next_offset += len(values)
        return self.next_offset - 1

    def append_batches(self, data, records: int, now_ms: int) -> int:
        """Add whole, validated batches holding ``records`` records in all (their offset
        deltas run 0..n-1 per batch); returns the offset of the last record. The caller
        checked each batch against ``max_batch_bytes``."""
        if records <= 0:
            raise ValueError("a proposal needs at least one record")
        if self._current is not None:  # keep offset order: values before are built first
            self._completed.append(self._current)
            self._current = None
        self._completed.append(BuiltBatches(self.next_offset, data, records))
        self._built_bytes += len(data)
        self.pending_bytes += len(data)
        if self._built_bytes >= self.max_batch_bytes:
            self._full = True
        self._note_pending(now_ms)
        self.next_offset += records
        return self.next_offset - 1

    def _note_pending(self, now_ms: int) -> None:
        if self._first_pending_ms is None:
            self._first_pending_ms = now_ms

    def force_drain(self) -> None:
        self._force_drain = True

    def is_empty(self) -> bool:
        return self._current is None and not self._completed

    def drain_deadline(self) -> int | None:
        """Absolute time at which a drain is due, or None when nothing is pending. Built
        batches wait for the linger like values do, so writers arriving together share one
        append and one flush."""
        if self._first_pending_ms is None:
            return None
        if self._full or self._force_drain:
            return -1
        return self._first_pending_ms + self.linger_ms

    def drain(self) -> list:
        """Everything pending, in offset order: PendingBatch and BuiltBatches items."""
        out = self._completed
        if self._current is not None:
            out.append(self._current)
        self._completed, self._current, self._force_drain = [], None, False
        self._first_pending_ms = None
        self._built_bytes = 0
        self.pending_bytes = 0
        self._full = False
        return out
