"""Work deferred to the end of the current I/O callback instead of the next loop turn.

A write at one in flight used to cross seven loop turns on the leader: the append waited a
turn (so that requests read together share one append), each connection's answers waited a
turn (so that answers made together share one write), and a finished fsync reported a turn
later (its report ran with the log's flush mutex held). Every turn is an epoll_wait and a
pass through asyncio's Python on every node, on the path of every write.

``TurnQueue.soon(fn, *args)`` keeps the batching and drops the turn: the callbacks that read
from the network or the fsync thread (``KafkaServer``'s connections, the Raft driver's
response callback, ``SharedLoopFlusher``) call ``run()`` once they are done, and everything queued
meanwhile runs then, in order, including (for a few generations) what that queues. Work queued anywhere else runs on
the next turn as before (``soon`` schedules a ``run`` with ``call_soon``), so nothing waits
for an I/O event that may never come.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import weakref

log = logging.getLogger(__name__)

# An append, the answers it completes, the writes of those answers: three generations is the
# deepest chain on the write path; one more for slack.
_GENERATIONS = 4
_QUEUES: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TurnQueue]" = weakref.WeakKeyDictionary()


class TurnQueue:
    __slots__ = ("_loop", "_q", "_writes", "_scheduled", "_running", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._q: collections.deque = collections.deque()
        self._writes: collections.deque = collections.deque()
        self._scheduled = False
        self._running = False

    def soon(self, fn, *args) -> None:
        """Run ``fn(*args)`` at the end of the current I/O callback (or on the next turn)."""
        self._q.append((fn, args))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run_scheduled)

    def soon_write(self, fn) -> None:
        """Like ``soon``, for a call that writes answers already made: it runs ahead of the
        other queued work of its generation (a follower waits on its Fetch answer, not on
        the commit this node applies meanwhile)."""
        self._writes.append(fn)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._run_scheduled)

    def run(self) -> None:
        """Run what is queued now (writes first), then what that queued, for a few
        generations; the rest goes to the next turn (a call that keeps queueing itself
        must not hold the loop)."""
        if self._running:
            return  # the running pass takes what was queued
        q, writes = self._q, self._writes
        if not q and not writes:
            return
        self._running = True
        try:
            for _ in range(_GENERATIONS):
                n, w = len(q), len(writes)
                if not n and not w:
                    return
                for _ in range(w):
                    _call(writes.popleft(), ())
                for _ in range(n):
                    fn, args = q.popleft()
                    _call(fn, args)
            if (q or writes) and not self._scheduled:
                self._scheduled = True
                self._loop.call_soon(self._run_scheduled)
        finally:
            self._running = False

    def _run_scheduled(self) -> None:
        self._scheduled = False
        self.run()


def _call(fn, args) -> None:
    try:
        fn(*args)
    except Exception:  # as asyncio does for a failing callback: report, go on
        log.exception("deferred call %r failed", fn)


def turn_queue(loop: asyncio.AbstractEventLoop) -> TurnQueue:
    """The loop's one TurnQueue."""
    q = _QUEUES.get(loop)
    if q is None:
        q = _QUEUES[loop] = TurnQueue(loop)
    return q
