"""An in-memory partition log for the replication simulator: the surface of ``SegmentedLog``
that the broker's replication cores use (``leader_replication``, ``replica_fetcher``,
``follower_log``), with the real leader-epoch cache (``LeaderEpochCache`` without a file, so
``end_offset_for_epoch`` answers exactly as on disk) and the real batch codec (offsets and
epochs patched by ``assign_offsets``, appends checked by ``scan_batches``).

Failure model: ``flush`` makes everything durable; ``crash(lose_unflushed=True)`` is a power
loss (the unflushed suffix vanishes, and with it the epoch entries that start there);
``crash(False)`` is a process kill (the page cache survives). The replication-offset
checkpoint (HW) lives beside the log in ``SimPartitionLogs`` and is written when the
simulator says so. Each record's value is kept per offset (``values``) for the invariants.
No files, no threads, no clock.
"""

from __future__ import annotations

import bisect

from kraft.broker.partition_logs import PartitionLog
from kraft.errors import CorruptRecordError, OffsetOutOfRangeError
from kraft.log.epoch_cache import LeaderEpochCache
from kraft.log.log_results import LogAppendInfo, UnexpectedAppendOffsetError
from kraft.records import assign_offsets, iter_batches, scan_batches


class SimPartitionLog:
    """Invariants: ``_bases`` / ``_batches`` hold whole batches in offset order covering
    ``[start_offset, end_offset)``; ``values[o - start]`` is the value at offset ``o``;
    ``flushed_offset <= end_offset``."""

    directory = "<memory>"

    def __init__(self):
        self._bases: list[int] = []
        self._batches: list[bytes] = []
        self._start = 0
        self._end = 0
        self._flushed = 0
        self.epoch_cache = LeaderEpochCache(None)
        self.values: list[bytes] = []  # one per offset from start_offset
        #: the lowest end offset since the checks last looked (they re-read from here)
        self.low_mark = 0

    # --- offsets ---------------------------------------------------------------------------------
    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._end

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def latest_epoch(self):
        return self.epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int):
        return self.epoch_cache.end_offset_for_epoch(epoch, self._end)

    def epoch_for_offset(self, offset: int):
        return self.epoch_cache.epoch_for_offset(offset)

    def value_at(self, offset: int):
        i = offset - self._start
        return self.values[i] if 0 <= i < len(self.values) else None

    # --- appends ---------------------------------------------------------------------------------
    def append(self, batches, *, assign_offsets: bool = True, leader_epoch: int | None = None,
               ignore_partial_tail: bool = False):
        if assign_offsets:
            if leader_epoch is None or leader_epoch < 0:
                raise ValueError("the leader path needs leader_epoch >= 0")
            buf = bytearray(batches)
        else:
            buf = bytes(batches)
        if not len(buf):
            raise CorruptRecordError("empty append")
        if assign_offsets:
            _assign(buf, self._end, leader_epoch)
        scan = scan_batches(buf)
        if scan.error == "partial" and ignore_partial_tail:
            if not len(scan):
                return None
            buf = buf[:scan.valid_end]
        elif scan.error is not None:
            raise CorruptRecordError(f"rejected append: {scan.error}")
        first, last = int(scan.base_offsets[0]), int(scan.last_offsets[-1])
        if first != self._end:  # the simulator's logs never have gaps: stricter than on disk
            raise UnexpectedAppendOffsetError(f"append at offset {first} but the log end offset is {self._end}")
        for batch in iter_batches(bytes(buf)):
            self._bases.append(batch.base_offset)
            self._batches.append(bytes(buf[batch.position:batch.position + batch.size]))
            self.values.extend(bytes(v) if v is not None else b"" for v in batch.values())
        self._end = last + 1
        self.epoch_cache.assign_batches(scan.partition_leader_epochs, scan.base_offsets)
        return LogAppendInfo(first, last, len(scan), len(buf), 0, 0, 0)

    def assign_epoch_start(self, epoch: int, start_offset: int | None = None) -> None:
        self.epoch_cache.assign(epoch, self._end if start_offset is None else start_offset)

    # --- reads -----------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` (the first
        always)."""
        if offset < self._start or offset > self._end:
            raise OffsetOutOfRangeError(f"offset {offset} outside [{self._start}, {self._end}]")
        i = bisect.bisect_right(self._bases, offset) - 1
        out, size = [], 0
        for raw in self._batches[max(i, 0):]:
            if out and size + len(raw) > max_bytes:
                break
            out.append(raw)
            size += len(raw)
        return b"".join(out)

    # --- truncation ------------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        if offset >= self._end:
            self.epoch_cache.truncate_from_end(self._end)
            return self._end
        if offset < self._start:
            raise OffsetOutOfRangeError(f"cannot truncate to {offset}, below the log start {self._start}")
        i = bisect.bisect_right(self._bases, offset) - 1
        if i >= 0 and self._bases[i] < offset and _next_offset(self._batches[i]) > offset:
            pass  # the batch holding ``offset`` goes too (a batch is never split)
        elif i >= 0 and self._bases[i] < offset:
            i += 1
        i = max(i, 0)
        new_end = self._bases[i] if i < len(self._bases) else self._end
        del self._bases[i:], self._batches[i:]
        del self.values[new_end - self._start:]
        self._end = new_end
        self.low_mark = min(self.low_mark, new_end)
        self._flushed = min(self._flushed, new_end)
        self.epoch_cache.truncate_from_end(new_end)
        return new_end

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._bases, self._batches, self.values = [], [], []
        self._start = self._end = self._flushed = offset
        self.low_mark = min(self.low_mark, offset)
        self.epoch_cache.clear()

    def delete_below(self, offset: int) -> int:
        raise NotImplementedError("the simulator keeps whole logs (no retention)")

    # --- durability ------------------------------------------------------------------------------
    def request_flush(self) -> None:
        pass  # the simulator flushes on its own schedule

    def flush(self) -> int:
        self._flushed = self._end
        return self._flushed

    def crash(self, lose_unflushed: bool) -> None:
        if lose_unflushed and self._flushed < self._end:
            self.truncate_to(self._flushed)
        # Epoch entries assigned at the end (a leader that appended nothing) were never flushed.
        self.epoch_cache.truncate_from_end(self._end)


def _assign(buf: bytearray, base: int, epoch: int) -> None:
    assign_offsets(buf, base, epoch)


def _next_offset(raw: bytes) -> int:
    return next(iter_batches(raw)).next_offset


class SimPartitionLogs:
    """The ``PartitionLogs`` port (``get``, ``create``, iteration) over ``SimPartitionLog``s,
    with the replication-offset checkpoint (HW per partition) as a separate "file"."""

    def __init__(self):
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self.hw_checkpoint: dict[tuple[str, int], int] = {}
        self.changes = 0  # as PartitionLogs.changes: a log made here

    def get(self, topic: str, partition: int):
        return self._logs.get((topic, partition))

    def __iter__(self):
        return iter(list(self._logs.values()))

    def __len__(self) -> int:
        return len(self._logs)

    def create(self, topic: str, partition: int, topic_id) -> PartitionLog:
        plog = self._logs.get((topic, partition))
        if plog is None:
            plog = self._logs[(topic, partition)] = PartitionLog(topic, partition, topic_id, SimPartitionLog(),
                                                                 "<memory>", 0)
            self.changes += 1
        return plog

    def checkpoint_high_watermarks(self) -> None:
        self.hw_checkpoint = {(p.topic, p.partition): p.high_watermark for p in self._logs.values()}

    def crash(self, lose_unflushed: bool) -> "SimPartitionLogs":
        """The logs a restarted process opens: the same data (less the unflushed tail on a
        power loss), HWs from the last checkpoint, clamped to the log end."""
        out = SimPartitionLogs()
        out.hw_checkpoint = dict(self.hw_checkpoint)
        for key, plog in self._logs.items():
            plog.log.crash(lose_unflushed)
            out._logs[key] = PartitionLog(plog.topic, plog.partition, plog.topic_id, plog.log, "<memory>",
                                          self.hw_checkpoint.get(key, 0))
        return out
