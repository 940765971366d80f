"""CommitWaiters: writers waiting for their offsets to commit, in proposal order.

A waiter is a future plus, optionally, a deadline and a function that turns the outcome
(committed, not leader any more, timed out) into the future's result, such as a Produce
answer. That keeps the write path to one future per request: no timer, task or callback
chain of its own. One loop timer covers the earliest deadline. Runs on the loop thread only.
"""

from __future__ import annotations

import asyncio
import collections

from kraft.errors import ErrorCode, KraftError, RequestTimeoutError


class CommitWaiters:
    """Invariant: waiters are in offset order (offsets only grow), so a commit completes a
    prefix of them."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None):
        self._q: collections.deque = collections.deque()  # [last_offset, fut, deadline, result_of]
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")

    def add(self, last_offset: int, fut: asyncio.Future, deadline: float | None = None,
            result_of=None) -> None:
        """Complete ``fut`` once ``last_offset`` is committed. ``result_of(error_code)`` makes
        its result (ErrorCode.NONE on commit); without it the result is the high watermark and
        a failure is an exception. ``deadline`` (loop time) ends the wait with
        REQUEST_TIMED_OUT."""
        self._q.append([last_offset, fut, deadline, result_of])
        if deadline is not None and deadline < self._timer_at:
            self._arm(deadline)

    def committed(self, high_watermark: int) -> None:
        q = self._q
        while q and q[0][0] < high_watermark:
            _, fut, _, result_of = q.popleft()
            if not fut.done():
                fut.set_result(high_watermark if result_of is None else result_of(ErrorCode.NONE))

    def fail_all(self, exc: KraftError) -> None:
        q, self._q = self._q, collections.deque()
        for _, fut, _, result_of in q:
            _fail(fut, result_of, exc)

    def expire(self, now: float) -> None:
        """Answer every waiter whose deadline passed (REQUEST_TIMED_OUT); the write may still
        commit later: a timeout is indeterminate."""
        keep = collections.deque()
        earliest = float("inf")
        for item in self._q:
            deadline = item[2]
            if item[1].done():
                continue
            if deadline is not None and deadline <= now:
                _fail(item[1], item[3], RequestTimeoutError("not committed within the request's timeout"))
            else:
                keep.append(item)
                if deadline is not None and deadline < earliest:
                    earliest = deadline
        self._q = keep
        self._timer_at = float("inf")
        if earliest != float("inf"):
            self._arm(earliest)

    def _arm(self, deadline: float) -> None:
        loop = self._loop or asyncio.get_running_loop()
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.expire((self._loop or asyncio.get_running_loop()).time())

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def __len__(self) -> int:
        return len(self._q)


def _fail(fut: asyncio.Future, result_of, exc: KraftError) -> None:
    if fut.done():
        return
    if result_of is None:
        fut.set_exception(exc)
    else:
        fut.set_result(result_of(exc.code))
