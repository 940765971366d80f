"""LoopThread answers "am I on the loop's thread?" without asking asyncio (a getpid system
call per ask) once it has seen the loop's thread, and never says yes elsewhere."""

import asyncio
import threading

from kraft.server import eventloop
from kraft.server.eventloop import LoopThread


def test_on_the_loop_yes_elsewhere_no_and_asyncio_asked_only_until_learned(monkeypatch):
    loop = asyncio.new_event_loop()
    check = LoopThread(loop)
    assert check.on_loop() is False  # the loop is not running here

    asked = []
    real = asyncio.get_running_loop
    monkeypatch.setattr(eventloop.asyncio, "get_running_loop", lambda: asked.append(1) or real())

    async def main():
        first = check.on_loop()
        n = len(asked)
        again = [check.on_loop() for _ in range(5)]
        off = []
        t = threading.Thread(target=lambda: off.append(check.on_loop()))
        t.start()
        t.join()
        return first, again, len(asked) - n, off
    try:
        first, again, more_asks, off = loop.run_until_complete(main())
    finally:
        loop.close()
    assert first is True and again == [True] * 5 and more_asks == 0
    assert off == [False]


def test_another_running_loop_is_not_this_one():
    mine = asyncio.new_event_loop()
    check = LoopThread(mine)

    async def main():
        return check.on_loop()
    try:
        assert asyncio.run(main()) is False
    finally:
        mine.close()
