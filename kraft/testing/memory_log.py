"""InMemoryLog: the Raft log port (``kraft.raft.log_port.ReplicatedLog``) in memory, with
Kafka MockLog's failure model, for the simulator and tests.

Real RecordBatch v2 bytes, a leader-epoch cache with Kafka's ``endOffsetFor`` semantics,
snapshots kept as bytes. ``crash()`` models kill -9 with page-cache loss: the unflushed
suffix of the log and any unfrozen snapshot vanish. Truncating below the high watermark
the log was told about raises (that would lose committed data). No files, no threads.
"""

from __future__ import annotations

import bisect

from kraft.errors import CorruptRecordError, InvalidRecordError
from kraft.types import OffsetAndEpoch
from kraft.records import ControlType, assign_offsets, decode_control_key, iter_batches, scan_batches


class InMemorySnapshotWriter:
    def __init__(self, log: "InMemoryLog", snapshot_id: OffsetAndEpoch):
        self.snapshot_id = snapshot_id
        self._log = log
        self._incarnation = log.incarnation
        self._data = bytearray()
        self.frozen = False

    def size_in_bytes(self) -> int:
        return len(self._data)

    def append(self, data: bytes) -> None:
        if self.frozen:
            raise RuntimeError("frozen")
        self._data += data

    def freeze(self) -> None:
        if self._incarnation != self._log.incarnation:
            raise RuntimeError("snapshot writer outlived a crash")
        _validate_snapshot(bytes(self._data))  # as the on-disk writer does before its rename
        self.frozen = True
        self._log._snapshots[self.snapshot_id] = bytes(self._data)


def _validate_snapshot(data: bytes) -> None:
    """Whole valid batches, a SnapshotHeader first and a SnapshotFooter last, like
    ``kraft.log.snapshot`` checks a raw snapshot before making it visible."""
    scan = scan_batches(data)
    if scan.error is not None or not len(scan):
        raise CorruptRecordError(f"snapshot rejected: {scan.error or 'no batches'}")
    batches = list(iter_batches(data))
    for batch, want in ((batches[0], ControlType.SNAPSHOT_HEADER), (batches[-1], ControlType.SNAPSHOT_FOOTER)):
        records = list(batch) if batch.is_control else []
        if len(records) != 1 or decode_control_key(records[0].key) != want:
            raise CorruptRecordError(f"snapshot rejected: no {want.name} where it belongs")


class InMemorySnapshotReader:
    def __init__(self, snapshot_id: OffsetAndEpoch, data: bytes):
        self.snapshot_id = snapshot_id
        self._data = data

    def size_in_bytes(self) -> int:
        return len(self._data)

    def read(self, position: int, max_bytes: int) -> bytes:
        return self._data[position:position + max_bytes]


class InMemoryLog:
    """Invariants: ``start_offset <= flushed <= end_offset`` (flushed counted from start);
    ``_bases``/``_positions`` index every batch of ``_buf`` in offset order; the epoch cache
    has strictly increasing epochs and start offsets."""

    def __init__(self):
        self._buf = bytearray()
        self._bases: list[int] = []
        self._positions: list[int] = []
        self._start = 0
        self._end = 0
        self._flushed = 0
        self._hw = 0
        self._epochs: list[int] = []  # leader-epoch cache: epoch ...
        self._epoch_starts: list[int] = []  # ... and the offset where it starts
        self._snapshots: dict[OffsetAndEpoch, bytes] = {}
        self.incarnation = 0

    # --- offsets ---------------------------------------------------------------------
    def start_offset(self) -> int:
        return self._start

    def end_offset(self) -> int:
        return self._end

    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def high_watermark(self) -> int:
        return self._hw

    def last_fetched_epoch(self) -> int:
        if self._epochs:
            return self._epochs[-1]
        latest = self.latest_snapshot_id()
        return latest.epoch if latest is not None else 0

    def _cache_end_offset_for(self, epoch: int):
        """Kafka LeaderEpochFileCache.endOffsetFor; None for UNDEFINED."""
        epochs = self._epochs
        if epoch < 0 or not epochs:
            return None
        if epoch == epochs[-1]:
            return OffsetAndEpoch(self._end, epoch)
        i = bisect.bisect_right(epochs, epoch)  # first epoch above the requested one
        if i == len(epochs):
            return None
        if i == 0:
            return OffsetAndEpoch(self._epoch_starts[0], epoch)
        return OffsetAndEpoch(self._epoch_starts[i], epochs[i - 1])

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found = self._cache_end_offset_for(epoch)
        if found is None:
            return OffsetAndEpoch(self._end, self.last_fetched_epoch())
        earliest = self.earliest_snapshot_id()
        if earliest is not None and found.offset == earliest.offset and found.epoch > earliest.epoch:
            return earliest
        return found

    def epoch_cache(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._epoch_starts))

    # --- appends --------------------------------------------------------------------
    def _index(self, buf, base_pos: int) -> None:
        for batch in iter_batches(buf):
            self._bases.append(batch.base_offset)
            self._positions.append(base_pos + batch.position)
            epoch = batch.partition_leader_epoch
            if not self._epochs or epoch > self._epochs[-1]:
                self._epochs.append(epoch)
                self._epoch_starts.append(batch.base_offset)
            self._end = batch.next_offset

    def append_as_leader(self, data: bytes, epoch: int) -> tuple[int, int]:
        if self._epochs and epoch < self._epochs[-1]:
            raise InvalidRecordError(f"leader epoch {epoch} below the log's {self._epochs[-1]}")
        buf = bytearray(data)
        first = self._end
        nxt = assign_offsets(buf, first, epoch)
        pos = len(self._buf)
        self._buf += buf
        self._index(buf, pos)
        return first, nxt - 1

    def append_as_follower(self, data: bytes) -> tuple[int, int]:
        scan = scan_batches(data)
        if scan.error is not None and scan.error != "partial":
            raise CorruptRecordError(f"fetched data rejected: {scan.error}")
        n = len(scan)
        if n == 0:
            return -1, -1
        expected = self._end
        latest = self._epochs[-1] if self._epochs else -1
        for i in range(n):
            base, epoch = int(scan.base_offsets[i]), int(scan.partition_leader_epochs[i])
            if base != expected:
                raise InvalidRecordError(f"batch at {base}, expected {expected}")
            if epoch < latest:
                raise InvalidRecordError(f"batch epoch {epoch} below {latest}")
            latest, expected = epoch, int(scan.last_offsets[i]) + 1
        first = self._end
        pos = len(self._buf)
        self._buf += memoryview(data)[:scan.valid_end]
        self._index(memoryview(self._buf)[pos:], pos)
        return first, self._end - 1

    # --- reads ------------------------------------------------------------------------
    def read(self, start_offset: int, max_bytes: int) -> bytes:
        if start_offset >= self._end:
            return b""
        if start_offset < self._start:
            raise ValueError(f"read at {start_offset} below log start {self._start}")
        positions = self._positions
        i = bisect.bisect_right(self._bases, start_offset) - 1
        pos = positions[i]
        k = bisect.bisect_right(positions, pos + max_bytes)
        end = positions[k] if k < len(positions) else len(self._buf)
        if end - pos > max_bytes and k - 1 > i:
            end = positions[k - 1]
        return bytes(self._buf[pos:end])

    def batches(self) -> list:
        return list(iter_batches(bytes(self._buf)))

    # --- truncation & durability --------------------------------------------------------
    def _cut(self, offset: int) -> None:
        """Drop every batch holding an offset >= ``offset`` (no HW check)."""
        if offset >= self._end:
            return
        i = bisect.bisect_left(self._bases, offset)
        if i > 0:
            prev_pos = self._positions[i - 1]
            nxt = self._positions[i] if i < len(self._positions) else len(self._buf)
            prev = next(iter_batches(bytes(self._buf[prev_pos:nxt])))
            if prev.last_offset >= offset:
                i -= 1
        cut_pos = self._positions[i] if i < len(self._positions) else len(self._buf)
        new_end = self._bases[i] if i < len(self._bases) else self._end
        del self._buf[cut_pos:]
        del self._bases[i:]
        del self._positions[i:]
        self._end = new_end
        while self._epoch_starts and self._epoch_starts[-1] >= new_end:
            self._epochs.pop()
            self._epoch_starts.pop()
        self._flushed = min(self._flushed, new_end)

    def truncate_to(self, offset: int) -> None:
        if offset < self._hw:
            raise RuntimeError(f"truncation to {offset} below the high watermark {self._hw}")
        if offset < self._start:
            # Kafka's UnifiedLog.truncateTo below the first segment: truncate fully and start there.
            self._buf = bytearray()
            self._bases, self._positions = [], []
            self._epochs, self._epoch_starts = [], []
            self._start = self._end = self._flushed = offset
            return
        self._cut(offset)

    def update_high_watermark(self, offset: int) -> None:
        if offset > self._end:
            raise RuntimeError(f"high watermark {offset} past the log end {self._end}")
        self._hw = max(self._hw, offset)

    def flush(self, up_to: int) -> None:
        self._flushed = max(self._flushed, min(up_to, self._end))

    def crash(self) -> None:
        """Kill -9 with page-cache loss: the unflushed suffix and unfrozen snapshots vanish."""
        self.incarnation += 1
        self._cut(self._flushed)
        self._hw = min(self._hw, self._end)

    # --- snapshots ------------------------------------------------------------------------
    def create_snapshot(self, snapshot_id: OffsetAndEpoch):
        if snapshot_id in self._snapshots:
            return None
        return InMemorySnapshotWriter(self, snapshot_id)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch):
        data = self._snapshots.get(snapshot_id)
        return None if data is None else InMemorySnapshotReader(snapshot_id, data)

    def snapshot_ids(self) -> list[OffsetAndEpoch]:
        return sorted(self._snapshots, key=lambda s: (s.offset, s.epoch))

    def latest_snapshot_id(self):
        if not self._snapshots:
            return None
        return max(self._snapshots, key=lambda s: (s.offset, s.epoch))

    def earliest_snapshot_id(self):
        if not self._snapshots:
            return None
        return min(self._snapshots, key=lambda s: (s.offset, s.epoch))

    def _forget_snapshots_before(self, snapshot_id: OffsetAndEpoch) -> None:
        for sid in list(self._snapshots):
            if sid.offset < snapshot_id.offset:
                del self._snapshots[sid]

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> bool:
        if snapshot_id not in self._snapshots or snapshot_id.offset > self._hw:
            return False
        if snapshot_id.offset > self._end or snapshot_id.offset <= self._start:
            return False
        k = bisect.bisect_right(self._bases, snapshot_id.offset) - 1  # batch holding the offset
        if k >= 0 and self._bases[k] < snapshot_id.offset:
            k += 1 if self._next_of(k) <= snapshot_id.offset else 0
        if k > 0:
            cut = self._positions[k] if k < len(self._positions) else len(self._buf)
            del self._buf[:cut]
            del self._bases[:k]
            del self._positions[:k]
            self._positions = [p - cut for p in self._positions]
        # Kafka's maybeIncrementLogStartOffset(snapshot end): the start may fall inside a batch.
        self._start = snapshot_id.offset
        # Epoch cache truncated from the start: keep the entry covering the new start.
        while len(self._epochs) > 1 and self._epoch_starts[1] <= self._start:
            self._epochs.pop(0)
            self._epoch_starts.pop(0)
        if self._epochs and self._epoch_starts[0] < self._start:
            self._epoch_starts[0] = self._start
        self._forget_snapshots_before(snapshot_id)
        return True

    def _next_of(self, k: int) -> int:
        nxt = self._positions[k + 1] if k + 1 < len(self._positions) else len(self._buf)
        return next(iter_batches(bytes(self._buf[self._positions[k]:nxt]))).next_offset

    def truncate_to_latest_snapshot(self) -> bool:
        latest = self.latest_snapshot_id()
        latest_epoch = self._epochs[-1] if self._epochs else 0  # Kafka: log.latestEpoch.getOrElse(0)
        if latest is None or not (latest.epoch > latest_epoch
                                  or (latest.epoch == latest_epoch and latest.offset > self._end)):
            return False
        self._buf = bytearray()
        self._bases, self._positions = [], []
        self._epochs, self._epoch_starts = [], []
        self._start = self._end = self._flushed = latest.offset
        self._forget_snapshots_before(latest)
        return True
