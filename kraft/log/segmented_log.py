"""``SegmentedLog``: one partition's log directory — segments, append with group commit,
read, roll, truncate, delete below a snapshot, and the leader-epoch cache beside it.

Threading: one owner thread (the server's event loop) calls every public method; the
log's flusher (its own thread, a ``SharedFlusher``'s, or a ``SharedLoopFlusher`` whose cycles
run on the event loop around a native fdatasync thread) only fdatasyncs and reports.
``_lock`` guards what both touch.
Durability contract:

* ``append`` returns as soon as the bytes are in the page cache. An offset is *flushed*
  once ``fdatasync`` covering it has returned; ``flushed_offset`` only then moves past it
  and ``on_flushed(offset)`` is called (from the flusher thread; hop threads in it).
* Structural changes are durable before they return: a roll fsyncs the old segment, its
  indexes and the epoch checkpoint before the new file exists (and fsyncs the directory);
  truncation and deletion fsync the directory after removing files. Hence every segment but
  the last is complete on disk at all times, which is what lets recovery treat damage
  before the tail as corruption rather than as a torn write.
* Any write or fsync error makes the log fatal: every later call raises FatalLogError and
  ``on_fatal`` is called once. Nothing is retried.

Not here: record encoding (``kraft.records``), Raft rules (the Raft adapter checks the high
watermark before truncating), snapshots (``kraft.log.snapshot``), asyncio.
"""

from __future__ import annotations

import bisect
import os
import random
import struct
import threading
import time

from kraft import records
from kraft.errors import (
    CorruptRecordError,
    FatalLogError,
    OffsetOutOfRangeError,
    StorageError,
)
from kraft.log import files, recovery
from kraft.log.append_checks import checked_batches
from kraft.log.config import LogConfig
from kraft.log.epoch_cache import LeaderEpochCache
from kraft.log.group_commit import GroupCommit
from kraft.log.log_flushing import LogFlushing
from kraft.log.log_results import LogAppendInfo
from kraft.log.recovery import RecoveryReport
from kraft.log.segment import MAX_SEGMENT_SIZE, LogSegment
from kraft.types import OffsetAndEpoch

_INT32_MAX = (1 << 31) - 1
_BASE_OFFSET = struct.Struct(">q")


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class SegmentedLog(LogFlushing):
    """Use :meth:`open`. Invariants: ``start_offset <= end_offset``; ``flushed_offset <=
    end_offset`` (a truncation lowers it; only a completed fdatasync raises it)."""

    def __init__(self, directory, config, segments, epoch_cache, start_offset, report,
                 on_flushed, on_fatal, clock_ms, on_flush_stats=None, flusher=None):
        self.directory = directory
        self.config = config
        self.epoch_cache: LeaderEpochCache = epoch_cache
        self.recovery: RecoveryReport = report
        self._segments: list[LogSegment] = segments  # ascending base offsets; last = active
        self._bases = [s.base_offset for s in segments]
        self._start = start_offset
        self._end = segments[-1].next_offset
        self._on_flushed = on_flushed
        self._on_fatal = on_fatal
        self._on_flush_stats = on_flush_stats
        self._appended = [0, 0]  # bytes and batches appended since open (for flush stats)
        self._flushed_counts = (0, 0)
        self._clock_ms = clock_ms
        self._lock = threading.RLock()
        self._flushed_cond = threading.Condition(self._lock)  # flush waiters wait here
        self._flush_mutex = threading.Lock()  # one flush cycle at a time
        self._checkpoint_lock = threading.Lock()  # one epoch-checkpoint writer at a time
        self._flushed = self._end
        self._trunc_low = self._end  # lowest end set by a truncation during the running flush
        self._closing = False
        self._closed = False
        self._retired: list[tuple[float, list[str]]] = []  # (unlink at, monotonic; *.deleted paths)
        self._fatal: FatalLogError | None = None
        self._group = GroupCommit(directory, self._lock, (self._flush_once, self._flush_begin, self._flush_end),
                                  lambda: self._fatal is not None,
                                  lambda exc: self._set_fatal(FatalLogError(f"flusher thread failed: {exc!r}")),
                                  config.append_linger_ms, config.background_flush, flusher,
                                  config.flush_interval_messages, self._end)
        self._group.start()

    # --- opening -------------------------------------------------------------------------------
    @classmethod
    def open(cls, directory: str, config: LogConfig | None = None, *, recovery_point: int | None = None,
             log_start_offset: int | None = None, on_flushed=None, on_fatal=None, clock_ms=None,
             on_flush_stats=None, flusher=None, clean: bool = False, sync: bool = True):
        """Open (creating if needed) the log in ``directory`` and recover it.

        ``recovery_point``: offset below which the caller knows the log was flushed (Kafka's
        recovery-point checkpoint); segments from the one containing it onwards are CRC-
        scanned. None scans every segment (what Kafka does for the metadata log). The tail
        segment is always scanned. ``log_start_offset``: the persisted log start (e.g. the
        earliest snapshot's end offset); at least the first segment's base offset.
        ``on_flushed(offset)``, ``on_fatal(FatalLogError)`` and ``on_flush_stats(FlushStats)``
        are called from the flusher thread (or the thread that flushed); ``flusher``: a
        ``SharedFlusher`` whose threads run this log's flush cycles instead of one of its own.
        ``clean``: the log was closed by a clean shutdown (its log directory's
        ``.kafka_cleanshutdown``): nothing is scanned or fsynced (``recovery._load_clean``).
        ``sync=False``: the recovered tail is not fdatasynced here; the caller makes it durable
        (``files.sync_file_system``) before anything reads or reports this log.
        Raises LogCorruptionError for invalid data before the tail segment, StateFileError
        for a malformed leader-epoch-checkpoint."""
        config = config or LogConfig()
        clock_ms = clock_ms or _wall_clock_ms
        segments, cache, start, report = recovery.load_log(directory, config, recovery_point,
                                                           log_start_offset, clock_ms(), clean, sync)
        end = segments[-1].next_offset
        log = cls(directory, config, segments, cache, min(start, end), report, on_flushed,
                  on_fatal, clock_ms, on_flush_stats, flusher)
        if start > end:  # everything on disk is below the persisted start: drop it
            log.truncate_fully_and_start_at(start)
        return log

    # --- offsets and state ---------------------------------------------------------------------
    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        """The next offset to be appended (Kafka's log end offset)."""
        return self._end

    @property
    def flushed_offset(self) -> int:
        """Every offset below this is durable on disk."""
        return self._flushed

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's ``endOffsetFor(epoch, logEndOffset)``; ``OffsetAndEpoch(-1, -1)`` when undefined."""
        return self.epoch_cache.end_offset_for_epoch(epoch, self._end)

    def epoch_for_offset(self, offset: int) -> int | None:
        return self.epoch_cache.epoch_for_offset(offset)

    def _check_usable(self) -> None:
        if self._fatal is not None:
            raise FatalLogError(f"log {self.directory} is unusable: {self._fatal}") from self._fatal
        if self._closed or self._closing:
            raise StorageError(f"log {self.directory} is closed")

    def _set_fatal(self, exc: FatalLogError) -> None:
        with self._lock:
            if self._fatal is not None:
                return
            self._fatal = exc
            self._group.wake_all()
            self._flushed_cond.notify_all()
        if self._on_fatal is not None:
            self._on_fatal(exc)

    def _mark_dirty(self) -> None:
        """Under ``_lock``: something needs the next flush; start the linger clock."""
        self._group.mark_dirty(self._end)

    # --- append --------------------------------------------------------------------------------
    def append(self, batches, *, assign_offsets: bool = True, leader_epoch: int | None = None,
               ignore_partial_tail: bool = False) -> LogAppendInfo | None:
        """Append whole batches; returns without waiting for the disk.

        Leader path (``assign_offsets=True``, ``leader_epoch`` required): base offsets are
        rewritten to continue the log and every batch gets ``leader_epoch`` (a bytearray is
        patched in place and kept to serve reads of the tail, so the caller must not change it
        afterwards; anything else is copied first). Follower path: offsets and epochs are
        kept; the first offset must be ``end_offset`` (>= without ``strict_order``; else
        UnexpectedAppendOffsetError). Invalid bytes (framing, CRC, offsets; with
        ``strict_order`` also gaps and decreasing epochs) raise CorruptRecordError, a batch above
        ``max_batch_bytes`` RecordTooLargeError; in both cases the log is unchanged.
        ``ignore_partial_tail``: a fetch response may end inside a batch; drop that tail
        (returns None if no whole batch is left) instead of rejecting the append."""
        if assign_offsets:
            if leader_epoch is None or leader_epoch < 0:
                raise ValueError("the leader path needs leader_epoch >= 0")
            buf = batches if isinstance(batches, bytearray) else bytearray(batches)
        else:
            buf = batches
        if not len(buf):
            raise CorruptRecordError("empty append")
        with self._lock:
            self._check_usable()
            if assign_offsets:
                records.assign_offsets(buf, self._end, leader_epoch)
            checked = checked_batches(buf, self._end, self.config, self.epoch_cache.latest_epoch,
                                      self.directory, ignore_partial_tail)
            if checked is None:
                return None
            buf, scan, max_timestamp = checked
            first, last = scan.first_offset, scan.last_offset
            try:
                seg = self._segment_for_append(len(buf), first, last, max_timestamp)
                position = seg.size
                # The patched buffer is the log's: read-only, the tail memo keeps it uncopied.
                seg.append(memoryview(buf).toreadonly() if assign_offsets else buf, scan, self._clock_ms)
            except FatalLogError as exc:
                self._set_fatal(exc)
                raise
            self._end = last + 1
            self._appended[0] += len(buf)
            self._appended[1] += len(scan)
            # A new epoch reaches the checkpoint file with the next flush (or roll), before
            # that flush is reported.
            latest = self.epoch_cache.latest_epoch
            if scan.max_epoch > (-1 if latest is None else latest):  # else nothing to assign
                self.epoch_cache.assign_batches(scan.partition_leader_epochs, scan.base_offsets)
            self._mark_dirty()
        return LogAppendInfo(first, last, len(scan), len(buf), max_timestamp, seg.base_offset, position)

    def _segment_for_append(self, size: int, first: int, last: int, max_timestamp: int) -> LogSegment:
        seg = self._segments[-1]
        if seg.size == 0:
            if last - seg.base_offset > _INT32_MAX or first < seg.base_offset:
                self._replace_empty_active(first)
            return self._segments[-1]
        cfg = self.config
        # Kafka's age rule: the incoming batch's timestamp against the segment's first
        # batch timestamp, or the wall clock against the creation time without timestamps.
        if seg.rolling_timestamp_ms is not None:
            waited = max_timestamp - seg.rolling_timestamp_ms
        else:
            waited = self._clock_ms() - seg.created_ms
        if (seg.size + size > cfg.segment_bytes
                or seg.size + size > MAX_SEGMENT_SIZE
                or waited > cfg.segment_ms - seg.roll_jitter_ms
                or seg.index.full(cfg.segment_index_bytes)
                or last - seg.base_offset > _INT32_MAX):
            self._roll_locked(first)
        return self._segments[-1]

    def _replace_empty_active(self, base: int) -> None:
        old = self._segments.pop()
        self._bases.pop()
        old.delete()
        files.fsync_dir(self.directory)
        self._add_segment(base)

    def _add_segment(self, base: int) -> None:
        cfg = self.config
        seg = LogSegment.create(self.directory, base, cfg.index_interval_bytes, self._clock_ms())
        if cfg.segment_jitter_ms:  # Kafka's LogConfig.randomSegmentJitter
            seg.roll_jitter_ms = random.randrange(min(cfg.segment_jitter_ms, cfg.segment_ms))
        files.fsync_dir(self.directory)
        self._segments.append(seg)
        self._bases.append(base)

    def reconfigure(self, config: LogConfig) -> None:
        """Use ``config`` from now on (Kafka's ``UnifiedLog.updateConfig``): the next append rolls
        by its sizes and ages, new segments take its index interval and jitter, and the flusher
        its linger and message count."""
        with self._lock:
            self.config = config
            self._group.reconfigure(config.append_linger_ms, config.flush_interval_messages)

    def roll(self) -> None:
        """Start a new segment at ``end_offset`` (no-op if the active one is empty)."""
        with self._lock:
            self._check_usable()
            if self._segments[-1].size:
                self._roll_locked(self._end)

    def _roll_locked(self, new_base: int) -> None:
        try:
            self._segments[-1].sync()
            if self.epoch_cache.dirty:
                self._write_epoch_checkpoint(self.epoch_cache.entries(), self.epoch_cache.version)
            self._add_segment(new_base)
        except FatalLogError as exc:
            self._set_fatal(exc)
            raise

    # --- compaction ------------------------------------------------------------------------------
    def cleanable_segments(self, upper: int) -> tuple[list, int]:
        """The closed segments wholly below ``upper`` and the offset they end at (the next
        segment's base): what the cleaner may rewrite."""
        with self._lock:
            out, end = [], self._bases[0]
            for i in range(len(self._segments) - 1):
                if self._bases[i + 1] > upper:
                    break
                out.append(self._segments[i])
                end = self._bases[i + 1]
            return out, (end if out else min(upper, self._bases[0]))

    def replace_closed_segments(self, old: list, new: LogSegment, swap_path: str) -> bool:
        """Owner thread: put the cleaned segment ``new`` (still at ``swap_path`` on disk) in
        place of the consecutive closed segments ``old`` (``segment_swap`` step 3). False,
        changing nothing, when they are no longer this log's."""
        from kraft.log.segment_swap import rename_into_place
        with self._lock:
            if self._closed or self._fatal is not None or not old:
                return False
            try:
                i = next(k for k, s in enumerate(self._segments) if s is old[0])
            except StopIteration:
                return False
            if self._segments[i:i + len(old)] != old or i + len(old) >= len(self._segments):
                return False
            rename_into_place(old, swap_path, new.path)
            self._segments[i:i + len(old)] = [new]
            self._bases[i:i + len(old)] = [new.base_offset]
            for seg in old:
                seg.close()
            return True

    def write_epoch_checkpoint(self) -> bool:
        """Write the leader-epoch checkpoint now if it changed since it was last written; the
        next flush then has only the data to sync. Any thread (a broker that became leader of
        many partitions writes theirs side by side instead of one flusher cycle each).
        Returns whether it wrote."""
        with self._lock:
            self._check_usable()
            cache = self.epoch_cache
            if not cache.dirty:
                return False
            entries, version = cache.entries(), cache.version
        try:
            self._write_epoch_checkpoint(entries, version)
        except FatalLogError as exc:
            self._set_fatal(exc)
            raise
        return True

    def _write_epoch_checkpoint(self, entries, version: int) -> None:
        with self._checkpoint_lock:
            if version > self.epoch_cache.written_version:  # never let an older snapshot win
                self.epoch_cache.write(entries)
                self.epoch_cache.written_version = version

    # --- read ----------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches starting with the one containing ``offset`` (or the first after it,
        across gaps), at most ``max_bytes`` unless the first batch alone is larger (then just
        it), never crossing a segment. ``b""`` at the end offset. OffsetOutOfRangeError
        outside ``[start_offset, end_offset]``."""
        self._check_usable()
        if offset == self._end:
            return b""
        if offset < self._start or offset > self._end:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self._start}, {self._end}] of {self.directory}")
        i = bisect.bisect_right(self._bases, offset) - 1
        while i < len(self._segments):
            seg = self._segment_with_index(i)
            position = seg.translate(offset)
            if position is not None:
                return seg.read_checked(position, max_bytes)
            i += 1
        return b""

    def _segment_with_index(self, i: int) -> LogSegment:
        seg = self._segments[i]
        if not seg.index.loaded:
            upper = self._bases[i + 1] if i + 1 < len(self._bases) else seg.next_offset
            if recovery.ensure_index(seg, upper):
                self.recovery.indexes_rebuilt.append(seg.base_offset)
            seg.next_offset = recovery.true_next_offset(seg)
        return seg

    # --- truncation and deletion ---------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (a batch is never split, so
        the new end may be below ``offset`` when it falls inside a batch). Durable on
        return: later segments are deleted (directory fsynced) before the tail is cut and
        fdatasynced. The epoch cache drops entries at or after the new end. Returns the new
        end offset. OffsetOutOfRangeError below ``start_offset``."""
        with self._lock:
            self._check_usable()
            if offset >= self._end:
                # Kafka still trims the cache: a leader may have assigned an epoch at the
                # end offset and then lost leadership before appending anything.
                if self.epoch_cache.truncate_from_end(self._end):
                    self._mark_dirty()
                return self._end
            if offset < self._start:
                raise OffsetOutOfRangeError(f"cannot truncate {self.directory} to {offset}, "
                                            f"below the log start offset {self._start}")
            try:
                self._delete_segments_from(bisect.bisect_right(self._bases, offset))
                seg = self._segment_with_index(len(self._segments) - 1)
                position = seg.translate(offset)
                if position is not None:
                    (cut,) = _BASE_OFFSET.unpack(seg.pread(8, position))
                    seg.truncate_at(position, cut)
                    # Durable on return: a crash must not bring back the removed suffix
                    # (Raft truncates a divergent suffix and relies on it staying gone).
                    files.fdatasync(seg.fd, seg.path)
            except FatalLogError as exc:
                self._set_fatal(exc)
                raise
            self._end = seg.next_offset
            self.epoch_cache.truncate_from_end(self._end)
            self._flushed = min(self._flushed, self._end)
            self._trunc_low = min(self._trunc_low, self._end)
            self._mark_dirty()
            return self._end

    def _delete_segments_from(self, i: int) -> None:
        """Delete ``segments[i:]``, newest first, then fsync the directory."""
        if i >= len(self._segments):
            return
        doomed = self._segments[i:]
        del self._segments[i:], self._bases[i:]
        for seg in reversed(doomed):
            seg.delete()
        files.fsync_dir(self.directory)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the (empty) log at ``offset`` — for a follower
        that installed a snapshot beyond its log. Durable on return."""
        with self._lock:
            self._check_usable()
            try:
                self._delete_segments_from(0)
                self._add_segment(offset)
                self.epoch_cache.clear()
                self._write_epoch_checkpoint(self.epoch_cache.entries(), self.epoch_cache.version)
            except FatalLogError as exc:
                self._set_fatal(exc)
                raise
            self._start = self._end = self._flushed = self._trunc_low = offset

    def delete_below(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (at most ``end_offset``) and delete the
        segments wholly below it, oldest first (after a snapshot at ``offset``). The epoch
        cache is truncated from the start. Returns the number of segments deleted."""
        with self._lock:
            self._check_usable()
            if offset > self._end:
                raise OffsetOutOfRangeError(f"cannot move the start of {self.directory} to {offset}, "
                                            f"beyond its end offset {self._end}")
            self._start = max(self._start, offset)
            try:
                active = self._segments[-1]
                if self._start == self._end and active.size and active.base_offset < self._end:
                    self._roll_locked(self._end)  # so the last data segment can go too
                n = 0
                while n + 1 < len(self._bases) and self._bases[n + 1] <= self._start:
                    n += 1
                doomed = self._segments[:n]
                del self._segments[:n], self._bases[:n]
                delay = self.config.file_delete_delay_ms
                for seg in doomed:
                    if delay > 0:
                        self._retired.append((time.monotonic() + delay / 1000, seg.retire()))
                    else:
                        seg.delete()
                if doomed:
                    files.fsync_dir(self.directory)
                self._unlink_retired(time.monotonic())
            except FatalLogError as exc:
                self._set_fatal(exc)
                raise
            if self.epoch_cache.truncate_from_start(self._start):
                self._mark_dirty()
            return len(doomed)

    def unlink_retired(self) -> int:
        """Unlink the ``*.deleted`` files of removed segments whose ``file.delete.delay.ms``
        has passed (called by the retention pass); returns how many segments went."""
        with self._lock:
            return self._unlink_retired(time.monotonic())

    def _unlink_retired(self, now: float) -> int:
        due = [paths for at, paths in self._retired if at <= now]
        if not due:
            return 0
        self._retired = [(at, paths) for at, paths in self._retired if at > now]
        for paths in due:
            for path in paths:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
        return len(due)

    def assign_epoch_start(self, epoch: int, start_offset: int | None = None) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (default: the end offset), like
        Kafka's ``initializeLeaderEpoch`` for a new leader."""
        with self._lock:
            if self.epoch_cache.assign(epoch, self._end if start_offset is None else start_offset):
                self._mark_dirty()

    # --- closing -------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the flusher, flush everything (log, indexes, epoch checkpoint) unless the
        log is fatal, and close the files. Idempotent."""
        if self._closed:
            return
        with self._lock:
            self._closing = True
        self._group.stop()
        try:
            if self._fatal is None:
                self._segments[-1].index.sync()
                self._flush_once()
        finally:
            self._closed = True
            for seg in self._segments:
                seg.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return (f"SegmentedLog({self.directory!r}, start={self._start}, end={self._end}, "
                f"flushed={self._flushed}, segments={len(self._segments)})")

