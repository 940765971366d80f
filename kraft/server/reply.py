"""Reply: the answer to one request, a future whose callbacks run the moment it completes.

asyncio.Future runs every done-callback on a later loop turn (``call_soon``). On the request
path that costs a turn per link: a parked Fetch answered by an append went core -> driver
future -> version fit -> connection, three turns (three epoll_waits and as many passes
through the loop's Python) before its bytes left, on every write. A Reply runs its callbacks
inline, so an answer reaches its connection in the turn it was made, and the connection's
one flush per turn sends it.

Callbacks must be short and must not raise (a raising one is logged, the rest still run);
they run on the thread that completes the Reply, which is always the loop thread here.
``await reply`` works (through an asyncio future made only when something awaits).
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)

_PENDING, _RESULT, _EXCEPTION, _CANCELLED = range(4)


class Reply:
    """``Reply(answer)``: ``set_result(v)`` completes it with ``answer(v)`` (an exception
    from ``answer`` completes it with that exception), so a request's answer is mapped (a
    version fit, say) without a second Reply chained to the first."""

    __slots__ = ("_state", "_value", "_callbacks", "_answer")

    def __init__(self, answer=None):
        self._state = _PENDING
        self._value = None
        self._callbacks: list | None = None
        self._answer = answer

    # --- reading ------------------------------------------------------------------------------
    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def result(self):
        state = self._state
        if state == _RESULT:
            return self._value
        if state == _EXCEPTION:
            raise self._value
        if state == _CANCELLED:
            raise asyncio.CancelledError()
        raise asyncio.InvalidStateError("Reply is not done")

    def exception(self) -> BaseException | None:
        state = self._state
        if state == _CANCELLED:
            raise asyncio.CancelledError()
        if state == _PENDING:
            raise asyncio.InvalidStateError("Reply is not done")
        return self._value if state == _EXCEPTION else None

    def add_done_callback(self, fn) -> None:
        """``fn(self)`` once done: now if it is done already."""
        if self._state != _PENDING:
            _call(fn, self)
        elif self._callbacks is None:
            self._callbacks = [fn]
        else:
            self._callbacks.append(fn)

    # --- completing ---------------------------------------------------------------------------
    def set_result(self, value) -> None:
        answer = self._answer
        if answer is not None and self._state == _PENDING:
            try:
                value = answer(value)
            except Exception as e:  # becomes an error response in network.py
                self._finish(_EXCEPTION, e)
                return
        self._finish(_RESULT, value)

    def result_or(self, default):
        """The result if it completed with one, else ``default`` (one call where the
        request path asks "answered already?")."""
        return self._value if self._state == _RESULT else default

    def set_exception(self, exc: BaseException) -> None:
        self._finish(_EXCEPTION, exc)

    def cancel(self) -> bool:
        if self._state != _PENDING:
            return False
        self._finish(_CANCELLED, None)
        return True

    def _finish(self, state: int, value) -> None:
        if self._state != _PENDING:
            raise asyncio.InvalidStateError("Reply is already done")
        self._state, self._value = state, value
        callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            for fn in callbacks:
                _call(fn, self)

    # --- awaiting -----------------------------------------------------------------------------
    def __await__(self):
        if self._state == _PENDING:
            waiter = asyncio.get_running_loop().create_future()
            self.add_done_callback(lambda r: relay(r, waiter))
            try:
                yield from waiter.__await__()
            except asyncio.CancelledError:
                self.cancel()  # like awaiting an asyncio future: the awaiter's cancel cancels it
                raise
        return self.result()

    def __repr__(self) -> str:
        return f"<Reply {('pending', 'result', 'exception', 'cancelled')[self._state]}>"


def mapped(result, make):
    """``make(*result)`` now, or, when ``result`` is a pending Reply of such a tuple, that
    Reply itself, from now completed with ``make(*answer)``: its answer function is composed
    with ``make`` instead of a second Reply chained by callback (a Reply, a relay and two
    callbacks per deferred answer cost about as much as the offset commit it carried).
    Cancelling it (its connection closed) cancels what the coordinator waits on, as before.
    A Reply already done, or one something else already listens to, is chained instead."""
    if type(result) is not Reply:
        return make(*result)
    if result._state == _PENDING and result._callbacks is None:
        inner = result._answer
        result._answer = (lambda answer: make(*answer)) if inner is None else (lambda v: make(*inner(v)))
        return result
    out = Reply(lambda answer: make(*answer))
    result.add_done_callback(lambda r: relay(r, out))
    out.add_done_callback(lambda o: result.cancel() if o.cancelled() else None)
    return out


def relay(done, out) -> None:
    """Pass the outcome of ``done`` (a finished Reply or asyncio future) on to ``out`` (either
    kind), unless ``out`` is done already; a cancellation is passed on as one."""
    if out.done():
        return
    if done.cancelled():
        out.cancel()
    elif done.exception() is not None:
        out.set_exception(done.exception())
    else:
        out.set_result(done.result())


def _call(fn, reply: Reply) -> None:
    try:
        fn(reply)
    except Exception:
        log.exception("callback %r of %r failed", fn, reply)
