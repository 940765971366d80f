"""GroupCommit: when a log flushes, and the thread that does it.

It keeps the schedule of one log's flushes: the time of the first change not yet flushed
(the linger clock), whether a flush was asked for, and a smoothed fsync time. Its thread
sleeps until the log has unflushed changes, lets them accumulate for the linger
(``append.linger.ms`` less the recent fsync time, so an append is durable within the
linger when the disk keeps up) unless a flush was requested, then calls the log's
``flush_cycle``: every change made while a cycle runs is covered by the next one.

The log hands in its lock (the schedule is read and changed under it), its flush cycle
(whole, and split into a begin and an end around the fdatasync) and a "has the log
failed" test. This module knows nothing else of the
log, and what a flush does (fdatasync, checkpoints, reporting) is the log's. An error in a
cycle ends the thread; the log has already made itself fatal (fsync errors are never
retried).

With a ``SharedFlusher`` (many logs, few threads) there is no thread here: ``mark_dirty`` and
``request`` hand the flusher the time the next cycle is due and its threads call
``run_due``; the schedule and the cycle are the same. A ``SharedLoopFlusher`` is scheduled the same
way but runs the split cycle (``begin_cycle``, fdatasync on its native thread, ``end_cycle``)
on the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, NamedTuple

from kraft.errors import FatalLogError

_log = logging.getLogger(__name__)


class FlushCycle(NamedTuple):
    """What a flush cycle snapshot at its start: ``fd`` (a dup the syncing side closes) is
    fdatasynced, then ``target`` is published. ``epochs``: the epoch checkpoint to write
    (entries, version) when it changed; ``counts``: bytes and batches appended so far."""

    fd: int
    path: str
    target: int
    epochs: tuple | None
    counts: tuple


class GroupCommit:
    """Every method but the thread's own loop is called with the log's lock held, except
    ``start`` and ``stop``."""

    def __init__(self, name: str, lock: threading.RLock, flush_cycle: tuple[Callable, Callable, Callable],
                 failed: Callable[[], bool], on_thread_error: Callable[[BaseException], None],
                 linger_ms: float, background: bool = True, flusher=None, flush_messages: int | None = None,
                 end_offset: int = 0):
        self._name = name
        self._lock = lock
        self._wake = threading.Condition(lock)
        # The whole cycle, its start (-> FlushCycle, or None if one runs and blocking is
        # false) and its end (after the fdatasync of the cycle's fd).
        self._flush_cycle, self._begin, self._end = flush_cycle
        self._failed = failed
        self._on_thread_error = on_thread_error
        self._linger_s = linger_ms / 1000.0
        self._dirty_since: float | None = None  # monotonic time of the first unflushed change
        self._requested = False
        self._stopping = False
        self._flush_messages = flush_messages  # request a flush once this many offsets are unflushed
        self._cycle_offset = end_offset  # the end offset the last cycle covers
        self.fsync_estimate = 0.0  # seconds, smoothed over recent flushes
        self._flusher = flusher if background else None  # a SharedFlusher runs the cycles
        self._thread = threading.Thread(target=self._run, name=f"kraft-flusher:{name}", daemon=True) \
            if background and flusher is None else None

    @property
    def background(self) -> bool:
        return self._thread is not None or self._flusher is not None

    @property
    def dirty(self) -> bool:
        """Something changed since the last flush cycle began."""
        return self._dirty_since is not None

    def start(self) -> None:
        if self._thread is not None:
            self._thread.start()

    def reconfigure(self, linger_ms: float, flush_messages: int | None) -> None:
        """New linger and message count (log's lock held); the next schedule uses them."""
        self._linger_s = linger_ms / 1000.0
        self._flush_messages = flush_messages

    # --- what the log tells the schedule (log's lock held) ------------------------------------
    def mark_dirty(self, end_offset: int = 0) -> None:
        """A change needs the next flush; the first one starts the linger clock."""
        if self._flush_messages is not None and end_offset - self._cycle_offset >= self._flush_messages:
            self._dirty_since = self._dirty_since or time.monotonic()
            self.request()
            return
        if self._dirty_since is None:
            self._dirty_since = time.monotonic()
            if self._flusher is not None:
                self._flusher.schedule(self, self._dirty_since + max(0.0, self._linger_s - self.fsync_estimate))
            else:
                self._wake.notify()

    def request(self) -> None:
        """Flush as soon as possible instead of after the linger (if anything is unflushed)."""
        if self._dirty_since is not None:
            self._requested = True
            if self._flusher is not None:
                self._flusher.schedule(self, time.monotonic())
            else:
                self._wake.notify()

    def cycle_started(self, end_offset: int = 0) -> None:
        """A flush cycle took its snapshot of the log: later changes are for the next one."""
        self._cycle_offset = end_offset
        self._dirty_since = None
        self._requested = False

    def next_due(self) -> float | None:
        """Monotonic time the next cycle should start; None if nothing is unflushed."""
        if self._dirty_since is None:
            return None
        if self._requested:
            return time.monotonic()
        return self._dirty_since + max(0.0, self._linger_s - self.fsync_estimate)

    def observe_fsync(self, seconds: float) -> None:
        # The flusher starts this much before the linger ends.
        self.fsync_estimate += 0.3 * (seconds - self.fsync_estimate)

    def wake_all(self) -> None:
        """The log failed or is closing: let the thread see it."""
        self._wake.notify_all()

    # --- the thread -------------------------------------------------------------------------
    def fail(self, exc: BaseException) -> None:
        """A flusher could not run a cycle: the log becomes fatal (writers must not wait)."""
        self._on_thread_error(exc)

    def stop(self) -> None:
        """End the thread after its current cycle (call without the log's lock)."""
        with self._lock:
            self._stopping = True
            self._wake.notify_all()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join()
        if self._flusher is not None:
            self._flusher.forget(self)

    def run_due(self) -> None:
        """A shared flusher's thread: run the cycle if the log still needs one."""
        with self._lock:
            if self._stopping or self._dirty_since is None or self._failed():
                return
        self._cycle()

    # --- a flusher that runs the cycle in two halves (SharedLoopFlusher) ---------------------------
    def begin_cycle(self) -> FlushCycle | None:
        """Start a cycle if one is due and none runs; None otherwise. Without the log's lock."""
        with self._lock:
            if self._stopping or self._dirty_since is None or self._failed():
                return None
        return self._begin(False)

    def end_cycle(self, cycle: FlushCycle, seconds: float, error: BaseException | None) -> bool:
        """End a cycle after its fdatasync; False if the log is now fatal."""
        try:
            self._end(cycle, seconds, error)
            return True
        except FatalLogError:
            return False
        except BaseException as exc:  # as in _cycle: writers must not wait forever
            _log.exception("flush cycle of %s failed", self._name)
            self._on_thread_error(exc)
            return False

    def flushes_here(self) -> bool:
        """Would waiting on this thread for the flusher wait forever (its cycles end on this
        thread: a SharedLoopFlusher's loop)? Then flush inline instead."""
        here = getattr(self._flusher, "on_this_thread", None)
        return here is not None and here()

    def settle(self) -> None:
        """Before a synchronous flush: a flusher whose cycles end on this thread ends its
        running one now (else the flush would wait for it forever)."""
        settle = getattr(self._flusher, "settle", None)
        if settle is not None:
            settle(self)

    def _wait_for_work(self) -> bool:
        """Block until a flush is due; False when the thread should exit."""
        with self._lock:
            while True:
                if self._failed():
                    return False
                if self._dirty_since is not None:
                    # The linger is a latency budget: start early by the expected fsync time
                    # so the first unflushed change is durable within it.
                    start_by = self._dirty_since + max(0.0, self._linger_s - self.fsync_estimate)
                    remaining = start_by - time.monotonic()
                    if self._requested or self._stopping or remaining <= 0:
                        return True
                    self._wake.wait(remaining)
                elif self._stopping:
                    return False
                else:
                    self._wake.wait()

    def _run(self) -> None:
        while self._wait_for_work():
            if not self._cycle():
                return

    def _cycle(self) -> bool:
        """One flush cycle; False if the log is now fatal."""
        try:
            self._flush_cycle()
            return True
        except FatalLogError:
            return False  # already recorded by the log and reported to on_fatal
        except BaseException as exc:  # a bug must not leave writers waiting forever
            _log.exception("flusher of %s failed", self._name)
            self._on_thread_error(exc)
            return False
