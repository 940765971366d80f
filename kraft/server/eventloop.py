"""Choose the event loop in one place: uvloop when installed, asyncio's otherwise.

Must not start anything; callers run their own coroutine with :func:`run`.
"""

from __future__ import annotations

import asyncio

try:
    import uvloop as _uvloop
except ImportError:  # optional speed-up
    _uvloop = None


def loop_name() -> str:
    return "uvloop" if _uvloop is not None else "asyncio"


def new_event_loop() -> asyncio.AbstractEventLoop:
    return _uvloop.new_event_loop() if _uvloop is not None else asyncio.new_event_loop()


def run(coro):
    """asyncio.run with the chosen loop."""
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
