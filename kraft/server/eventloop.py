"""Choose the event loop in one place: uvloop when installed, asyncio's otherwise.

Must not start anything; callers run their own coroutine with :func:`run`.
"""

from __future__ import annotations

import asyncio
import sys
import threading

try:
    import uvloop as _uvloop
except ImportError:  # optional speed-up
    _uvloop = None


class LoopThread:
    """``on_loop()``: is the caller on ``loop``'s thread? ``asyncio.get_running_loop()`` makes
    a getpid system call each time (CPython 3.11's fork check), several per write on the
    paths that ask; once the loop's thread has been seen, this compares thread ids."""

    __slots__ = ("_loop", "_ident")

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._ident: int | None = None

    def on_loop(self) -> bool:
        ident = self._ident
        if ident is not None:
            return threading.get_ident() == ident
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False
        if here:
            self._ident = threading.get_ident()
        return here


def loop_name() -> str:
    return "uvloop" if _uvloop is not None else "asyncio"


def new_event_loop() -> asyncio.AbstractEventLoop:
    return _uvloop.new_event_loop() if _uvloop is not None else asyncio.new_event_loop()


# A thread that wakes up (the flusher after an fsync, the batch validator) waits for the GIL
# up to the switch interval while the loop thread runs Python; CPython's default of 5 ms
# would put that wait straight into commit latency.
SWITCH_INTERVAL_S = 0.0005


def run(coro):
    """asyncio.run with the chosen loop."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    loop = new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
