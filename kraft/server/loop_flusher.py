"""LoopFlusher: one log's flush cycles run on the asyncio event loop that owns the log, with
only the fdatasync on a ``Syncer``'s native thread.

Why: with a Python flusher thread every fsync costs two GIL hand-offs (the thread takes the
GIL to report, the loop takes it back) and a self-pipe wake-up, and the report can wait
behind the loop's own Python code. Here the loop begins a cycle (snapshot, dup of the
segment's descriptor) as soon as one is due, the native thread fdatasyncs without the GIL
and signals an eventfd the loop watches, and the loop ends the cycle (publish, report). The
schedule is the log's ``GroupCommit``: appends made while a cycle runs are covered by the
next one, started when this one ends.

A cycle that must also write the leader-epoch checkpoint (after an election) runs on a
short-lived Python thread instead, so the loop never waits for the disk.

Scheduling from another thread hops onto the loop. ``settle`` (a synchronous flush on the
loop thread) and ``forget`` (the log is closing) end a running cycle by waiting for its
fdatasync, bounded by one fsync. Construct it on the loop's thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

from kraft.errors import FatalLogError
from kraft.log import hotloops
from kraft.server.eventloop import LoopThread
from kraft.server.turn import turn_queue

_log = logging.getLogger(__name__)

#: A synchronous flush in another thread holds the log's cycle: look again this much later.
_BUSY_RETRY_S = 0.001


class LoopFlusher:
    def __init__(self, loop: asyncio.AbstractEventLoop, syncer_class=None):
        self._loop = loop
        self._syncer = (syncer_class or hotloops.Syncer)()
        self._group = None
        self._cycle = None  # the FlushCycle whose fdatasync the syncer runs
        self._slow: threading.Thread | None = None  # a cycle with an epoch checkpoint
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self._closed = False
        self._turn = turn_queue(loop)
        self._thread = LoopThread(loop)
        loop.add_reader(self._syncer.fileno(), self._synced)

    @property
    def threads(self) -> int:
        return 1

    def on_this_thread(self) -> bool:
        """Cycles end on this thread (GroupCommit.flushes_here): do not block it waiting."""
        return self._on_loop()

    def _on_loop(self) -> bool:
        return self._thread.on_loop()

    # --- GroupCommit's flusher interface ----------------------------------------------------
    def schedule(self, group, due: float) -> None:
        """``group``'s next cycle is due at monotonic ``due`` (may hold the log's lock)."""
        if self._closed:
            return
        if not self._on_loop():
            self._loop.call_soon_threadsafe(self.schedule, group, due)
            return
        self._group = group
        if self._cycle is not None or self._slow is not None:
            return  # the running cycle's end looks at the schedule again
        if due <= time.monotonic():
            self._start()
        elif self._timer is None or due < self._timer_due:
            if self._timer is not None:
                self._timer.cancel()
            # asyncio's clock is time.monotonic().
            self._timer, self._timer_due = self._loop.call_at(due, self._start), due

    def settle(self, group) -> None:
        """End the running cycle now (a synchronous flush follows on this thread)."""
        if self._on_loop():
            self._finish_running()

    def forget(self, group) -> None:
        """The log is closing: end the running cycle and stop the native thread."""
        if self._closed:
            return
        if self._on_loop() or not self._loop.is_running():
            self._shutdown()
            return
        done = threading.Event()

        def shutdown():
            try:
                self._shutdown()
            finally:
                done.set()

        try:
            self._loop.call_soon_threadsafe(shutdown)
        except RuntimeError:  # the loop closed meanwhile
            self._shutdown()
            return
        if not done.wait(10.0):
            _log.warning("event loop did not close the flusher of %s in time", getattr(group, "_name", "?"))
            self._shutdown()

    # --- cycles ------------------------------------------------------------------------------
    def _start(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            # Started before the linger ended (a requested flush): that timer would fire for
            # nothing, one loop wake-up per append.
            timer.cancel()
        group = self._group
        if self._closed or group is None or self._cycle is not None or self._slow is not None:
            return
        try:
            cycle = group.begin_cycle()
        except FatalLogError:
            return  # recorded by the log
        except BaseException as exc:
            _log.exception("flush cycle could not start")
            group.fail(exc)
            return
        if cycle is None:
            if group.next_due() is not None:  # another thread's synchronous flush holds the log
                self._timer, self._timer_due = self._loop.call_later(_BUSY_RETRY_S, self._start), 0.0
            return
        if cycle.epochs is not None:
            self._slow = threading.Thread(target=self._run_slow, args=(group, cycle),
                                          name="kraft-flush-checkpoint", daemon=True)
            self._slow.start()
            return
        self._cycle = cycle
        try:
            self._syncer.submit(cycle.fd)  # the syncer closes it
        except BaseException as exc:
            self._cycle = None
            os.close(cycle.fd)
            group.end_cycle(cycle, 0.0, FatalLogError(f"cannot hand {cycle.path} to the fsync thread: {exc}"))

    def _synced(self) -> None:
        """The eventfd is readable: end the cycle whose fdatasync finished."""
        result = self._syncer.collect()
        if result is not None:
            self._end(result)
            self._again()
        # The flushed report the cycle queued (it ran with the log's flush mutex held) runs
        # now, the mutex released: a follower's next Fetch leaves in this callback.
        self._turn.run()

    def _end(self, result) -> None:
        cycle, self._cycle = self._cycle, None
        err, seconds = result
        error = None if not err else FatalLogError(
            f"fdatasync of {cycle.path} failed: {os.strerror(err)}; the log is unusable (fsync errors are never retried)")
        self._group.end_cycle(cycle, seconds, error)

    def _again(self) -> None:
        group = self._group
        due = None if group is None or self._closed else group.next_due()
        if due is not None:
            self.schedule(group, due)

    def _run_slow(self, group, cycle) -> None:
        began = time.perf_counter()
        error = None
        try:
            os.fdatasync(cycle.fd)
        except OSError as exc:
            error = FatalLogError(f"fdatasync of {cycle.path} failed: {exc}; the log is unusable "
                                  "(fsync errors are never retried)")
        finally:
            os.close(cycle.fd)
        group.end_cycle(cycle, time.perf_counter() - began, error)
        try:
            self._loop.call_soon_threadsafe(self._slow_done)
        except RuntimeError:
            pass  # the loop is closed: nothing more to schedule

    def _slow_done(self) -> None:
        if self._slow is not None and not self._slow.is_alive():
            self._slow.join()
            self._slow = None
            self._again()
        elif self._slow is not None:
            self._loop.call_soon(self._slow_done)  # reported just before the thread ended

    def _finish_running(self) -> None:
        if self._cycle is not None:
            result = self._syncer.wait()
            if result is not None:
                self._end(result)
        if self._slow is not None:
            self._slow.join()
            self._slow = None

    def _shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._finish_running()
        try:
            self._loop.remove_reader(self._syncer.fileno())
        except (RuntimeError, ValueError, OSError):
            pass  # the loop is closed already
        self._syncer.close()
