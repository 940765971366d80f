"""How a ``SegmentedLog`` becomes durable: one flush cycle at a time (begin under the log's
lock, ``fdatasync`` of a dup of the active segment's fd with the GIL released, end: epoch
checkpoint, publish ``flushed_offset``, report), run by the log's flusher thread, by a
``SharedLoopFlusher`` around a native fdatasync thread, or in the caller's thread (``flush``,
``wait_for_flush``). Appends that arrive while a cycle runs share the next one (group commit,
``kraft.log.group_commit``). Kept apart from segments, append, read and truncation, which only
mark the log dirty and lower ``_trunc_low``; the state both sides use lives on the log and is
guarded by its ``_lock``.
"""

from __future__ import annotations

import os
import time

from kraft.errors import FatalLogError
from kraft.log import files
from kraft.log.group_commit import FlushCycle
from kraft.log.log_results import FlushStats


class LogFlushing:
    """The flushing half of ``SegmentedLog`` (a base class: it uses the log's ``_lock``,
    ``_group``, ``_segments``, ``_end``, ``_flushed`` and the hooks set in its ``__init__``)."""

    def set_flush_listener(self, on_flushed) -> None:
        """``on_flushed(offset)`` is called with the new flushed offset after each flush
        that moves it (from the flusher thread). It must not call ``flush``."""
        self._on_flushed = on_flushed

    def request_flush(self) -> None:
        """Ask for a flush now instead of after the linger (inline without a flusher)."""
        if not self._group.background:
            self.flush()
            return
        if not self._group.dirty:
            # A cycle has begun since the last change (read without the lock: only this
            # thread makes changes, so "clean" cannot be stale): nothing left to ask for.
            return
        with self._lock:
            self._group.request()

    def flush(self) -> int:
        """Flush synchronously in the calling thread; returns the flushed offset."""
        self._flush_once()
        return self._flushed

    def wait_for_flush(self, offset: int | None = None, timeout: float | None = None) -> bool:
        """Block until ``flushed_offset >= offset`` (default: the current end offset); False
        on timeout. Raises FatalLogError if the log failed. When no flush is running the
        caller runs one itself: it blocks anyway, and handing the fsync to the flusher thread
        would cost a thread wake-up each way (Kafka's metadata log also flushes in the
        caller's thread)."""
        target = self._end if offset is None else offset
        if not self._group.background or self._group.flushes_here():
            return self.flush() >= target
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if self._flushed >= target:
                    return True
                if self._fatal is not None:
                    raise FatalLogError(f"log {self.directory} is unusable: {self._fatal}") from self._fatal
                dirty = self._group.dirty
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if dirty and self._flush_mutex.acquire(blocking=False):
                self._flush_mutex.release()
                self._flush_once()  # may queue behind a flusher cycle that just began: harmless
                continue
            with self._lock:
                if self._flushed >= target:
                    return True
                self._group.request()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._flushed_cond.wait(remaining)

    def _flush_once(self) -> None:
        """One flush cycle in the calling thread: begin, fdatasync (GIL released), end."""
        self._group.settle()  # a cycle the event loop runs must end before this one begins
        cycle = self._flush_begin(blocking=True)
        began = time.perf_counter()
        error = None
        try:
            files.fdatasync(cycle.fd, cycle.path)
        except FatalLogError as exc:
            error = exc
        finally:
            os.close(cycle.fd)
        self._flush_end(cycle, time.perf_counter() - began, error)

    def _flush_begin(self, blocking: bool):
        """Take the one-cycle-at-a-time mutex (None if busy and not ``blocking``), snapshot,
        and return a ``FlushCycle`` whose ``fd`` (a dup: truncation may close the segment's)
        the caller fdatasyncs and closes, then hands to ``_flush_end`` (``SharedLoopFlusher``)."""
        if not self._flush_mutex.acquire(blocking):
            return None
        try:
            with self._lock:
                if self._fatal is not None:
                    raise self._fatal
                seg = self._segments[-1]
                target = self._end
                try:
                    seg.index.persist()  # a few entries at most; keeps the files current for tools
                except FatalLogError as exc:
                    self._set_fatal(exc)
                    raise
                cache = self.epoch_cache
                cycle = FlushCycle(os.dup(seg.fd), seg.path, target,
                                   (cache.entries(), cache.version) if cache.dirty else None, tuple(self._appended))
                self._group.cycle_started(target)
                self._trunc_low = target
            return cycle
        except BaseException:
            self._flush_mutex.release()
            raise

    def _flush_end(self, cycle, fsync_seconds: float, error: FatalLogError | None) -> None:
        """End the cycle ``_flush_begin`` started, after its fdatasync (``error`` if it
        failed): write the epoch checkpoint if it changed, publish, report."""
        try:
            try:
                if error is not None:
                    raise error
                self._group.observe_fsync(fsync_seconds)
                if cycle.epochs is not None:
                    self._write_epoch_checkpoint(*cycle.epochs)
            except FatalLogError as exc:
                self._set_fatal(exc)
                raise
            with self._lock:
                flushed = min(cycle.target, self._trunc_low)
                advanced = flushed > self._flushed
                if advanced:
                    self._flushed = flushed
                self._flushed_cond.notify_all()
            if advanced and self._on_flushed is not None:
                self._on_flushed(flushed)
            if self._on_flush_stats is not None:
                done, counts = self._flushed_counts, cycle.counts
                self._flushed_counts = counts
                self._on_flush_stats(FlushStats(fsync_seconds, counts[0] - done[0], counts[1] - done[1], flushed))
        finally:
            self._flush_mutex.release()
