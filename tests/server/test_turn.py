"""TurnQueue: work queued during an I/O callback runs when that callback calls run(), in
order and for a few generations; what is left, or queued elsewhere, runs on the next turn."""

import asyncio
import logging

from kraft.server.turn import _GENERATIONS, TurnQueue, turn_queue


def test_run_runs_the_queue_now_in_order_including_what_it_queues():
    async def main():
        q, seen = TurnQueue(asyncio.get_running_loop()), []
        q.soon(seen.append, 1)
        q.soon(lambda: (seen.append(2), q.soon(seen.append, 3)))
        assert seen == []
        q.run()
        assert seen == [1, 2, 3]  # no loop turn in between
    asyncio.run(main())


def test_queued_work_without_a_run_happens_on_the_next_turn():
    async def main():
        q, seen = TurnQueue(asyncio.get_running_loop()), []
        q.soon(seen.append, "x")
        await asyncio.sleep(0)
        assert seen == ["x"]
    asyncio.run(main())


def test_a_call_that_keeps_queueing_itself_does_not_hold_the_loop():
    async def main():
        loop = asyncio.get_running_loop()
        q, calls = TurnQueue(loop), []

        def again():
            calls.append(1)
            q.soon(again)
        q.soon(again)
        q.run()  # returns: bounded generations, the rest goes to later turns
        assert len(calls) == _GENERATIONS
        other = loop.create_future()
        loop.call_soon(other.set_result, True)
        assert await asyncio.wait_for(other, 1)  # the loop still runs other callbacks
        assert len(calls) > _GENERATIONS
        q._q.clear()
    asyncio.run(main())


def test_a_failing_call_is_logged_and_the_rest_still_run(caplog):
    async def main():
        q, seen = TurnQueue(asyncio.get_running_loop()), []
        q.soon(lambda: 1 / 0)
        q.soon(seen.append, "after")
        with caplog.at_level(logging.ERROR, logger="kraft.server.turn"):
            q.run()
        assert seen == ["after"] and "ZeroDivisionError" in caplog.text
    asyncio.run(main())


def test_run_inside_a_run_leaves_the_work_to_the_running_pass():
    async def main():
        q, seen = TurnQueue(asyncio.get_running_loop()), []

        def outer():
            q.soon(seen.append, "inner")
            q.run()  # no-op: the running pass takes it, after this call returns
            seen.append("outer done")
        q.soon(outer)
        q.run()
        assert seen == ["outer done", "inner"]
    asyncio.run(main())


def test_one_queue_per_loop():
    async def main():
        loop = asyncio.get_running_loop()
        assert turn_queue(loop) is turn_queue(loop)
        return turn_queue(loop)
    first = asyncio.run(main())
    assert asyncio.run(main()) is not first


def test_writes_run_ahead_of_the_other_work_of_their_generation():
    async def main():
        q, seen = TurnQueue(asyncio.get_running_loop()), []
        q.soon(seen.append, "apply")  # queued first (a commit to apply)
        q.soon_write(lambda: seen.append("write"))  # an answer made after it
        q.soon(lambda: q.soon_write(lambda: seen.append("later write")))
        q.run()
        assert seen == ["write", "apply", "later write"]
    asyncio.run(main())
