"""SharedFlusher: a few threads that run the flush cycles of many logs, so a broker with
thousands of partitions does not run thousands of flusher threads.

Each log keeps its own schedule (``GroupCommit``: linger clock, requests, fsync estimate) and
its own flush cycle; with a shared flusher the schedule hands the time its next cycle is due
to ``schedule`` instead of waking a thread of its own. The threads here take the log due
first, run its cycle (which fdatasyncs and reports, so acknowledgements still follow the
fsync that covers them), and go on to the next. Appends made to a log while its cycle runs
make it due again and are covered by its next cycle: group commit per log, and one thread
serves every log of a directory in turn.

Lock order: a log's lock may be held when ``schedule`` is called (it takes this module's
lock briefly); the threads never hold this module's lock while they call into a log. Knows
nothing of logs beyond ``group.run_due()``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time


class SharedFlusher:
    def __init__(self, name: str, threads: int = 2):
        if threads < 1:
            raise ValueError("a shared flusher needs at least one thread")
        self.name = name
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # threads wait here for a due log
        self._idle = threading.Condition(self._lock)  # forget() waits here for a running cycle
        self._heap: list = []  # (due, seq, group); stale entries are skipped
        self._due: dict = {}  # group -> the due time of its live heap entry
        self._running: dict = {}  # group -> cycles running now
        self._seq = itertools.count()
        self._stopping = False
        self._threads = [threading.Thread(target=self._run, name=f"kraft-flusher:{name}:{i}", daemon=True)
                         for i in range(threads)]
        for t in self._threads:
            t.start()

    @property
    def threads(self) -> int:
        return len(self._threads)

    def schedule(self, group, due: float) -> None:
        """``group``'s next cycle should start at monotonic time ``due`` (an earlier time wins)."""
        with self._lock:
            current = self._due.get(group)
            if current is not None and current <= due:
                return
            self._due[group] = due
            heapq.heappush(self._heap, (due, next(self._seq), group))
            if self._heap[0][2] is group:
                self._work.notify()

    def forget(self, group) -> None:
        """Drop ``group``'s pending cycle and wait until none of its cycles is running (its
        log is closing). Call without the log's lock."""
        with self._lock:
            self._due.pop(group, None)
            while group in self._running:
                self._idle.wait()

    def stop(self) -> None:
        """End the threads (after the cycles they are running). Logs flush themselves on close."""
        with self._lock:
            self._stopping = True
            self._work.notify_all()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join()

    def _next(self):
        """The next due group, marked running; None when stopping."""
        with self._lock:
            while not self._stopping:
                if not self._heap:
                    self._work.wait()
                    continue
                due, _, group = self._heap[0]
                if self._due.get(group) != due:
                    heapq.heappop(self._heap)  # stale: forgotten or rescheduled earlier
                    continue
                wait = due - time.monotonic()
                if wait > 0:
                    self._work.wait(wait)
                    continue
                heapq.heappop(self._heap)
                del self._due[group]
                self._running[group] = self._running.get(group, 0) + 1
                if self._heap:
                    self._work.notify()  # another thread may take the next one meanwhile
                return group
            return None

    def _run(self) -> None:
        while True:
            group = self._next()
            if group is None:
                return
            try:
                group.run_due()
            finally:
                with self._lock:
                    n = self._running[group] - 1
                    if n:
                        self._running[group] = n
                    else:
                        del self._running[group]
                    self._idle.notify_all()
