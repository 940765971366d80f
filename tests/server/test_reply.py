"""Reply: a future whose callbacks run inline when it completes (asyncio's run a loop turn
later), awaitable, and mapping its result through an answer function."""

import asyncio
import logging

import pytest

from kraft.server.reply import Reply, mapped


def test_callbacks_run_inline_in_order_when_it_completes():
    r, seen = Reply(), []
    r.add_done_callback(lambda x: seen.append(("a", x.result())))
    r.add_done_callback(lambda x: seen.append(("b", x.result())))
    assert not r.done() and seen == []
    r.set_result(7)
    assert seen == [("a", 7), ("b", 7)]  # before set_result returned: no loop turn


def test_a_callback_added_after_completion_runs_at_once():
    r, seen = Reply(), []
    r.set_result("x")
    r.add_done_callback(lambda x: seen.append(x.result()))
    assert seen == ["x"]


def test_a_raising_callback_is_logged_and_the_others_still_run(caplog):
    r, seen = Reply(), []

    def bad(_):
        raise RuntimeError("boom")
    r.add_done_callback(bad)
    r.add_done_callback(lambda x: seen.append(x.result()))
    with caplog.at_level(logging.ERROR, logger="kraft.server.reply"):
        r.set_result(1)
    assert seen == [1] and "boom" in caplog.text


def test_states_follow_asyncio_future_semantics():
    r = Reply()
    with pytest.raises(asyncio.InvalidStateError):
        r.result()
    with pytest.raises(asyncio.InvalidStateError):
        r.exception()
    err = ValueError("bad")
    r.set_exception(err)
    assert r.done() and not r.cancelled() and r.exception() is err
    with pytest.raises(ValueError):
        r.result()
    with pytest.raises(asyncio.InvalidStateError):
        r.set_result(1)  # completes once
    assert r.cancel() is False
    c = Reply()
    assert c.cancel() is True and c.cancelled()
    with pytest.raises(asyncio.CancelledError):
        c.result()


def test_await_a_pending_and_a_done_reply():
    async def main():
        r = Reply()
        asyncio.get_running_loop().call_later(0.01, r.set_result, 5)
        assert await r == 5
        done = Reply()
        done.set_result(6)
        assert await done == 6
        failed = Reply()
        asyncio.get_running_loop().call_soon(failed.set_exception, KeyError("k"))
        with pytest.raises(KeyError):
            await failed
        assert await asyncio.wait_for(_later(9), 1) == 9
    asyncio.run(main())


def _later(value):
    r = Reply()
    asyncio.get_running_loop().call_soon(r.set_result, value)
    return r


def test_cancelling_the_awaiting_task_cancels_the_reply():
    async def main():
        r = Reply()
        task = asyncio.ensure_future(_await(r))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert r.cancelled()
    asyncio.run(main())


async def _await(r):
    return await r


def test_an_answer_function_maps_the_result_inline_and_its_failure_becomes_the_exception():
    seen = []
    doubled = Reply(lambda v: v * 2)
    doubled.add_done_callback(lambda r: seen.append(r.result()))
    doubled.set_result(21)
    assert doubled.result() == 42 and seen == [42]  # mapped before the callbacks ran
    failed = Reply(lambda v: v)
    failed.set_exception(KeyError("k"))
    assert isinstance(failed.exception(), KeyError)  # exceptions are not mapped
    raising = Reply(lambda v: 1 / v)
    raising.set_result(0)
    assert isinstance(raising.exception(), ZeroDivisionError)
    gone = Reply(lambda v: pytest.fail("a cancelled Reply maps nothing"))
    gone.cancel()  # the connection went away
    with pytest.raises(asyncio.InvalidStateError):
        gone.set_result(1)  # the core answering later is an error, as for any done Reply
    assert gone.cancelled()


def test_result_or_gives_the_result_only_when_there_is_one():
    r = Reply()
    assert r.result_or("pending") == "pending"
    r.set_result(None)
    assert r.result_or("x") is None
    failed = Reply()
    failed.set_exception(ValueError())
    assert failed.result_or("no") == "no"
    cancelled = Reply()
    cancelled.cancel()
    assert cancelled.result_or("no") == "no"


def test_mapped_answers_now_or_when_the_shard_answers_and_passes_a_cancel_back():
    make = lambda code, n: ("answer", code, n)  # noqa: E731
    assert mapped((0, 3), make) == ("answer", 0, 3)  # answered at once: no Reply at all
    inner = Reply()
    out = mapped(inner, make)
    assert type(out) is Reply and not out.done()
    inner.set_result((5, 1))
    assert out.result() == ("answer", 5, 1)  # inline, in the call that completed the shard's
    inner2 = Reply()
    out2 = mapped(inner2, make)
    out2.cancel()  # the connection closed: the shard's wait is cancelled (a held add forgotten)
    assert inner2.cancelled()
    inner3 = Reply()
    out3 = mapped(inner3, lambda *a: 1 / 0)
    inner3.set_result((0,))
    assert isinstance(out3.exception(), ZeroDivisionError)  # becomes an error answer in network.py


def test_mapped_reuses_a_bare_reply_and_chains_one_that_is_listened_to():
    make = lambda code, n: ("answer", code, n)  # noqa: E731
    bare = Reply()
    assert mapped(bare, make) is bare  # no second Reply, relay or callbacks per deferred answer
    twice = Reply(lambda v: (v[0] + 1, v[1]))
    out = mapped(twice, make)
    twice.set_result((1, 2))
    assert out.result() == ("answer", 2, 2)  # an answer function already there runs first
    heard = []
    listened = Reply()
    listened.add_done_callback(lambda r: heard.append(r.result()))  # e.g. the txn shard's forget
    out = mapped(listened, make)
    assert out is not listened
    listened.set_result((7, 0))
    assert heard == [(7, 0)] and out.result() == ("answer", 7, 0)  # the listener saw the raw tuple
    done = Reply()
    done.set_result((3, 3))
    assert mapped(done, make).result() == ("answer", 3, 3)
