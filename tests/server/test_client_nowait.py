"""NodeClient (kraft/server/client.py) without awaiting: request_nowait's callbacks, the shared
deadline timer of requests at the default timeout, held requests released later, explicit
timeouts among watched ones, slots handed to waiters, and the fast answer path."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from kraft.client.node_client import NodeClient
from kraft.errors import NetworkError, RequestTimeoutError

from client_fakes import FakeServer, req, resp
from server_helpers import run, settle


async def _connected(c: NodeClient, srv):
    """One answered request: ``c`` is connected (request_nowait sends only then). Returns
    that request as the server got it (its writer is the connection's server side)."""
    warm = asyncio.ensure_future(c.request(req("warm"), 3))
    first = await srv.next_request()
    FakeServer.answer(first, resp(0))
    await warm
    return first


def test_request_nowait_answers_through_the_callback_once_and_refuses_when_it_cannot_send():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port, max_in_flight=2)
        got = []
        assert not c.request_nowait(req("early"), 3, lambda r, e: got.append((r, e)))  # not connected yet
        await _connected(c, srv)

        def boom(resp, exc):
            got.append(("boom", resp.throttle_time_ms))
            raise RuntimeError("a caller's bug")
        assert c.request_nowait(req("a"), 3, boom)
        assert c.request_nowait(req("b"), 3, lambda r, e: got.append((r.throttle_time_ms, e)))
        assert not c.request_nowait(req("c"), 3, lambda r, e: None)  # max_in_flight waiting
        a, b = await srv.next_request(), await srv.next_request()
        FakeServer.answer(b, resp(2))
        FakeServer.answer(a, resp(1))
        assert await settle(lambda: len(got) == 2)
        assert got == [(2, None), ("boom", 1)] and c.connected  # the failing callback left the connection up

        timeouts = []
        assert c.request_nowait(req("slow"), 3, lambda r, e: timeouts.append((r, type(e))), timeout_ms=50)
        await srv.next_request()
        assert await settle(lambda: timeouts == [(None, RequestTimeoutError)])
        assert await settle(lambda: not c.connected)  # closed after a timeout, as request() does
        await c.close()
        await srv.close()
    run(main())


def test_request_nowait_fails_with_a_network_error_when_the_connection_drops():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        await _connected(c, srv)
        got = []
        assert c.request_nowait(req("x"), 3, lambda r, e: got.append((r, e)))
        _, _, writer = await srv.next_request()
        writer.close()  # the server goes away with the request unanswered
        assert await settle(lambda: len(got) == 1)
        assert got[0][0] is None and isinstance(got[0][1], NetworkError)
        await c.close()
        await srv.close()
    run(main())


def test_request_nowait_at_the_default_timeout_expires_through_one_timer():
    """Answered requests never time out later; an unanswered one times out at its own
    deadline (not the first request's), and the connection closes as on any timeout."""
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port, request_timeout_ms=300)
        await _connected(c, srv)
        got = []
        for n in range(5):  # answered at once: their deadlines must not fire
            assert c.request_nowait(req(f"quick{n}"), 3, lambda r, e: got.append((r.throttle_time_ms, e)))
            FakeServer.answer(await srv.next_request(), resp(n))
        assert await settle(lambda: len(got) == 5)
        assert c._deadline_timer is not None and len(c._deadlines) <= 2  # one timer; answered ones pruned
        await asyncio.sleep(0.15)
        late = []
        sent = asyncio.get_running_loop().time()
        assert c.request_nowait(req("late"), 3, lambda r, e: late.append((r, type(e))))
        await srv.next_request()  # never answered
        assert await settle(lambda: late == [(None, RequestTimeoutError)], timeout=3.0)
        assert asyncio.get_running_loop().time() - sent >= 0.29  # its own deadline, not the first one's
        assert got == [(n, None) for n in range(5)]  # nothing answered timed out
        assert await settle(lambda: not c.connected)
        assert not c._deadlines and c._deadline_timer is None
        await c.close()
        await srv.close()
    run(main())


def test_request_nowait_reports_a_failed_write_later_never_inside_the_call():
    """The caller is executing effects when it sends: a write that fails at once (uvloop
    raises RuntimeError on a transport that closed itself) must reach on_done as a
    NetworkError on a later turn, not raise and not call back inside request_nowait."""
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        await _connected(c, srv)

        class Closed:
            closed = False

            def write(self, data):
                raise RuntimeError("unable to perform operation: the handler is closed")

            def close(self):
                self.closed = True
        real, c._writer = c._writer, Closed()
        got = []
        assert c.request_nowait(req("x"), 3, lambda r, e: got.append((r, e)))
        assert got == []
        assert await settle(lambda: len(got) == 1)
        assert got[0][0] is None and isinstance(got[0][1], NetworkError)
        assert not c.connected
        real.close()
        await c.close()
        await srv.close()
    run(main())


def test_request_at_the_default_timeout_shares_the_deadline_timer_and_times_out_on_its_own_deadline():
    """request() (the awaitable form) at the default timeout: a pipelined burst is watched by
    the one timer; an unanswered request fails at its deadline with RequestTimeoutError."""
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port, request_timeout_ms=300)
        burst = [asyncio.ensure_future(c.request(req(f"r{n}"), 3)) for n in range(4)]
        items = [await srv.next_request() for _ in range(4)]
        assert [i[1].client_software_name for i in items] == ["r0", "r1", "r2", "r3"]  # in order
        for n, item in enumerate(items):
            FakeServer.answer(item, resp(n))
        assert [r.throttle_time_ms for r in await asyncio.gather(*burst)] == [0, 1, 2, 3]
        assert len(c._deadlines) >= 1 and c._deadline_timer is not None
        for n in range(200):  # answered entries do not pile up until the timer fires
            one = asyncio.ensure_future(c.request(req(f"s{n}"), 3))
            FakeServer.answer(await srv.next_request(), resp(n))
            await one
        assert len(c._deadlines) <= 2
        began = time.monotonic()
        late = asyncio.ensure_future(c.request(req("late"), 3))
        await srv.next_request()  # never answered
        with pytest.raises(RequestTimeoutError):
            await late
        assert time.monotonic() - began >= 0.28
        await c.close()
        assert c._deadline_timer is None
        await srv.close()
    run(main())


def test_a_held_request_is_written_only_when_released_and_times_out_from_then():
    """hold_nowait registers and encodes; nothing reaches the server before release (a
    follower's Fetch must not leave before its flush); the timeout counts from the release."""
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port, request_timeout_ms=300)
        await _connected(c, srv)
        got = []
        held = c.hold_nowait(req("gated"), 3, lambda r, e: got.append((r, e)))
        assert held is not None
        await asyncio.sleep(0.4)  # past the request timeout: held, it neither left nor expired
        assert srv.requests.empty() and got == [] and c.connected
        c.release(held)
        FakeServer.answer(await srv.next_request(), resp(7))
        assert await settle(lambda: len(got) == 1)
        assert got[0][0].throttle_time_ms == 7 and got[0][1] is None
        c.release(held)  # answered already: a second release writes nothing
        await asyncio.sleep(0.05)
        assert srv.requests.empty()
        await c.close()
        await srv.close()
    run(main())


def test_a_held_request_fails_with_its_connection_and_is_never_written_on_the_next():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        first = await _connected(c, srv)
        got = []
        held = c.hold_nowait(req("gated"), 3, lambda r, e: got.append((r, e)))
        first[2].close()  # the server drops the connection while the request is held
        assert await settle(lambda: len(got) == 1)
        assert got[0][0] is None and isinstance(got[0][1], NetworkError)
        await _connected(c, srv)  # a new connection
        c.release(held)  # belongs to the old one: not written on the new
        await asyncio.sleep(0.05)
        assert srv.requests.empty()
        await c.close()
        assert c.hold_nowait(req("after close"), 3, lambda r, e: None) is None
        await srv.close()
    run(main())


def test_an_explicit_timeout_shorter_than_the_watched_ones_fails_at_its_own_deadline():
    """Requests at any timeout share the one deadline timer while their deadlines come in
    order; a shorter one sent after longer ones cannot (the timer is armed for the oldest),
    so it must still fail at its own deadline, naming its own timeout."""
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port, request_timeout_ms=10000)
        await _connected(c, srv)
        slow = asyncio.ensure_future(c.request(req("slow"), 3, timeout_ms=5000))
        await srv.next_request()  # never answered
        began = time.monotonic()
        quick = asyncio.ensure_future(c.request(req("quick"), 3, timeout_ms=300))
        await srv.next_request()  # never answered
        with pytest.raises(RequestTimeoutError) as info:
            await asyncio.wait_for(quick, 3)
        assert 0.28 <= time.monotonic() - began < 3
        assert "300 ms" in str(info.value)
        with pytest.raises(NetworkError):  # the timeout closed the connection under it
            await asyncio.wait_for(slow, 3)
        await c.close()
        await srv.close()
    run(main())


def test_a_watched_explicit_timeout_names_its_own_timeout_when_it_expires():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port, request_timeout_ms=10000)
        began = time.monotonic()
        task = asyncio.ensure_future(c.request(req("x"), 3, timeout_ms=250))
        await srv.next_request()
        assert c._deadlines and c._deadlines[-1][2] == 0.25  # watched, not a timer of its own
        with pytest.raises(RequestTimeoutError) as info:
            await asyncio.wait_for(task, 3)
        assert 0.23 <= time.monotonic() - began < 3 and "250 ms" in str(info.value)
        await c.close()
        await srv.close()
    run(main())


def test_a_cancelled_waiter_for_a_slot_does_not_lose_the_slot():
    """max_in_flight=1: one request in flight, one waiting for the slot and cancelled while
    it waits: the slot must still reach the next request (a lost slot hangs every later one)."""
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port, max_in_flight=1)
        first = asyncio.ensure_future(c.request(req("first"), 3))
        item = await srv.next_request()
        gone = asyncio.ensure_future(c.request(req("gone"), 3))
        await asyncio.sleep(0.01)
        gone.cancel()
        await asyncio.sleep(0.01)
        FakeServer.answer(item, resp(0))
        await first
        last = asyncio.ensure_future(c.request(req("last"), 3))
        got = await srv.next_request()
        assert got[1].client_software_name == "last"
        FakeServer.answer(got, resp(7))
        assert (await asyncio.wait_for(last, 3)).throttle_time_ms == 7
        assert gone.cancelled() and c._free == 1
        await c.close()
        await srv.close()
    run(main())


def test_a_slot_handed_to_a_waiter_cancelled_before_it_ran_goes_on_to_the_next():
    async def main():
        c = NodeClient("127.0.0.1", 1, max_in_flight=1)
        loop = asyncio.get_running_loop()
        c._free = 0  # the one slot is taken
        handed = asyncio.ensure_future(c._wait_for_slot(loop))
        after = asyncio.ensure_future(c._wait_for_slot(loop))
        await asyncio.sleep(0)
        c._hand_over_slot()  # to "handed", which is cancelled before it runs
        handed.cancel()
        await asyncio.sleep(0.01)
        assert handed.cancelled() and after.done() and not after.cancelled()
        assert c._free == 0 and not c._slot_waiters
    run(main())


def test_fast_sees_the_answer_first_and_none_means_decode_it():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        seen = []

        def fast(frame):
            seen.append(bytes(frame))
            return "recognised" if len(seen) == 1 else None
        one = asyncio.ensure_future(c.request(req("a"), 3, fast=fast))
        FakeServer.answer(await srv.next_request(), resp(1))
        assert await one == "recognised"
        two = asyncio.ensure_future(c.request(req("b"), 3, fast=fast))
        item = await srv.next_request()
        FakeServer.answer(item, resp(2))
        assert (await two).throttle_time_ms == 2  # None: decoded as usual
        assert struct.unpack_from(">i", seen[1])[0] == item[0].correlation_id  # from the correlation id on
        await c.close()
        await srv.close()
    run(main())
