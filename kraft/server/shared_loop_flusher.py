"""SharedLoopFlusher: the flush cycles of many logs (every partition log of a directory, or the
metadata log alone) run on the event loop, their fdatasyncs on a few native ``Syncer`` threads
that never take the GIL.

Why: with ``SharedFlusher`` (Python threads) each acks=all write cost its leader two Python
threads' wake-ups and GIL hand-offs per fsync (measured: ~9 voluntary context switches per
write per thread, a fifth of the leader's CPU at one write in flight), and a report waited for
the GIL behind the loop's own Python. Here the loop begins a due log's cycle (snapshot, dup of
the segment's descriptor), a free syncer fdatasyncs it and signals its eventfd, and the loop
ends the cycle (publish, report) in the same callback that reads the eventfd. At most
``threads`` fdatasyncs run at once (Kafka's log flusher has one thread per directory; two
let a second partition's fsync overlap the first). Each log keeps its own schedule
(``GroupCommit``); appends made while its cycle runs are covered by its next cycle, started
when this one ends. The metadata log uses one with a single syncer (it has one log).

A cycle that also writes the leader-epoch checkpoint runs on a short-lived Python thread, so
the loop never waits for the disk; at most ``threads`` such threads at once (a leader election
moves the epoch of thousands of partitions together). ``schedule`` from another thread (a log
made or recovered off the loop) hops onto the loop. ``settle`` (a synchronous flush on the loop thread) and
``forget`` (the log is closing) end that log's running cycle by waiting for its fdatasync,
bounded by one fsync; ``stop`` ends the syncers once its logs are closed. Construct it on
the loop's thread.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import logging
import os
import threading
import time
import weakref

from kraft.errors import FatalLogError
from kraft.log import hotloops
from kraft.server.eventloop import LoopThread
from kraft.server.turn import turn_queue

_log = logging.getLogger(__name__)

#: A synchronous flush in another thread holds a log's cycle: look again this much later.
_BUSY_RETRY_S = 0.001
_SLOW = -1  # _running value of a log whose cycle runs on a Python thread (epoch checkpoint)


class SharedLoopFlusher:
    def __init__(self, loop: asyncio.AbstractEventLoop, threads: int = 2, syncer_class=None):
        if threads < 1:
            raise ValueError("a shared flusher needs at least one syncer")
        self._loop = loop
        cls = syncer_class or hotloops.Syncer
        self._syncers = [cls() for _ in range(threads)]
        self._cycles: list = [None] * threads  # (group, FlushCycle) running on each syncer
        self._free = list(range(threads - 1, -1, -1))
        self._running: dict = {}  # group -> syncer index, or _SLOW
        self._slow: dict = {}  # group -> its checkpoint thread (at most ``threads`` at once)
        self._slow_waiting: collections.deque = collections.deque()  # (group, cycle) for a thread
        self._due: dict = {}  # group -> the due time of its live heap entry
        self._heap: list = []  # (due, seq, group); stale entries are skipped
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self._closed = False
        # Logs closing or closed: no cycle is started or scheduled for them again (GroupCommit
        # refuses to begin one once stopping, and its next_due would ask again every ms).
        self._forgotten = weakref.WeakSet()
        self._turn = turn_queue(loop)
        self._thread = LoopThread(loop)
        for i, s in enumerate(self._syncers):
            loop.add_reader(s.fileno(), self._synced, i)

    @property
    def threads(self) -> int:
        return len(self._syncers)

    def on_this_thread(self) -> bool:
        """Cycles end on this thread (GroupCommit.flushes_here): do not block it waiting."""
        return self._thread.on_loop()

    # --- GroupCommit's flusher interface ----------------------------------------------------
    def schedule(self, group, due: float) -> None:
        """``group``'s next cycle is due at monotonic ``due`` (may hold the log's lock)."""
        if self._closed or group in self._forgotten:
            return
        if not self._thread.on_loop():
            try:
                self._loop.call_soon_threadsafe(self.schedule, group, due)
            except RuntimeError:
                pass  # the loop closed: the log flushes itself on close
            return
        current = self._due.get(group)
        if current is not None and current <= due:
            return
        self._due[group] = due
        heapq.heappush(self._heap, (due, next(self._seq), group))
        self._dispatch()

    def settle(self, group) -> None:
        """End ``group``'s running cycle now (a synchronous flush follows on this thread)."""
        if self._thread.on_loop():
            self._finish(group)

    def forget(self, group) -> None:
        """``group``'s log is closing: no more cycles for it, and its running one is ended."""
        if self._closed:
            return
        self._forgotten.add(group)
        if self._thread.on_loop() or not self._loop.is_running():
            self._due.pop(group, None)
            self._finish(group)
            return
        done = threading.Event()

        def on_loop():
            try:
                self._due.pop(group, None)
                self._finish(group)
            finally:
                done.set()

        try:
            self._loop.call_soon_threadsafe(on_loop)
        except RuntimeError:  # the loop closed meanwhile
            self._finish(group)
            return
        if not done.wait(10.0):
            _log.warning("event loop did not end the flush cycle of %s in time", getattr(group, "_name", "?"))

    def stop(self) -> None:
        """End every running cycle and the syncer threads (the logs flushed themselves on close)."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for group in list(self._running):
            self._finish(group)
        for s in self._syncers:
            try:
                self._loop.remove_reader(s.fileno())
            except (RuntimeError, ValueError, OSError):
                pass  # the loop is closed already
            s.close()

    # --- cycles ------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        """Start every due log's cycle a free syncer can take; arm the timer for the next."""
        heap, due_of = self._heap, self._due
        now = time.monotonic()
        while heap and not self._closed:
            due, _, group = heap[0]
            if due_of.get(group) != due:
                heapq.heappop(heap)  # stale: forgotten or rescheduled earlier
                continue
            if group in self._running:
                heapq.heappop(heap)  # its running cycle's end looks at the schedule again
                del due_of[group]
                continue
            if due > now:
                if self._timer is None or due < self._timer_due:
                    if self._timer is not None:
                        self._timer.cancel()
                    # asyncio's clock is time.monotonic().
                    self._timer, self._timer_due = self._loop.call_at(due, self._on_timer), due
                return
            if not self._free:
                return  # a syncer finishing dispatches again
            heapq.heappop(heap)
            del due_of[group]
            self._start(group)
        if not heap and self._timer is not None:
            # Nothing is due any more (a requested flush started what the linger timer was
            # armed for): that timer would wake the loop for nothing, once per append.
            self._timer.cancel()
            self._timer = None

    def _on_timer(self) -> None:
        self._timer = None
        self._dispatch()

    def _start(self, group) -> None:
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
                self._loop.call_later(_BUSY_RETRY_S, self._retry, group)
            return
        if cycle.epochs is not None:
            self._running[group] = _SLOW
            if len(self._slow) < len(self._syncers):
                self._spawn_slow(group, cycle)
            else:
                self._slow_waiting.append((group, cycle))
            return
        i = self._free.pop()
        self._running[group] = i
        self._cycles[i] = (group, cycle)
        try:
            self._syncers[i].submit(cycle.fd)  # the syncer closes it
        except BaseException as exc:
            self._cycles[i] = None
            del self._running[group]
            self._free.append(i)
            os.close(cycle.fd)
            group.end_cycle(cycle, 0.0, FatalLogError(f"cannot hand {cycle.path} to the fsync thread: {exc}"))

    def _retry(self, group) -> None:
        if group in self._forgotten:
            return
        due = group.next_due()
        if due is not None:
            self.schedule(group, due)

    def _synced(self, i: int) -> None:
        """Syncer ``i``'s eventfd is readable: end the cycle whose fdatasync finished."""
        result = self._syncers[i].collect()
        if result is not None:
            self._end(i, result)
        self._dispatch()
        # The flushed reports the cycle queued (it ran with the log's flush mutex held) run
        # now, the mutex released.
        self._turn.run()

    def _end(self, i: int, result) -> None:
        group, cycle = self._cycles[i]
        self._cycles[i] = None
        del self._running[group]
        self._free.append(i)
        err, seconds = result
        error = None if not err else FatalLogError(
            f"fdatasync of {cycle.path} failed: {os.strerror(err)}; the log is unusable (fsync errors are never retried)")
        group.end_cycle(cycle, seconds, error)
        self._retry(group)

    def _finish(self, group) -> None:
        """Wait for ``group``'s running cycle, if any, and end it (on the loop thread)."""
        where = self._running.get(group)
        if where is None:
            return
        if where == _SLOW:
            t = self._slow.get(group)
            if t is not None:
                t.join()
                self._slow_done(group)
                return
            for item in self._slow_waiting:  # not started yet: run it here, now
                if item[0] is group:
                    self._slow_waiting.remove(item)
                    self._sync_slow(group, item[1])
                    del self._running[group]
                    self._retry(group)
                    return
            return
        result = self._syncers[where].wait()
        if result is not None:
            self._end(where, result)

    def _spawn_slow(self, group, cycle) -> None:
        t = self._slow[group] = threading.Thread(target=self._run_slow, args=(group, cycle),
                                                 name="kraft-flush-checkpoint", daemon=True)
        t.start()

    def _run_slow(self, group, cycle) -> None:
        self._sync_slow(group, cycle)
        try:
            self._loop.call_soon_threadsafe(self._slow_done, group)
        except RuntimeError:
            pass  # the loop is closed: nothing more to schedule

    @staticmethod
    def _sync_slow(group, cycle) -> None:
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

    def _slow_done(self, group) -> None:
        t = self._slow.get(group)
        if t is None:
            return  # ended already (by _finish)
        if t.is_alive():
            self._loop.call_soon(self._slow_done, group)  # reported just before the thread ended
            return
        t.join()
        del self._slow[group]
        self._running.pop(group, None)
        if self._slow_waiting and not self._closed:
            self._spawn_slow(*self._slow_waiting.popleft())
        self._retry(group)
        self._dispatch()
