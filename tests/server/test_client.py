"""NodeClient (kraft/server/client.py): correlation ids, timeouts that close the connection,
connect failures with growing backoff, reconnects, and close() failing what is pending.

Most tests talk to a scripted fake server that decodes requests and lets the test decide
when and how to answer (out of order, late, never, garbage)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import types

import pytest

import kraft.client.node_client as client_module
from kraft.errors import NetworkError, RequestTimeoutError
from kraft.protocol import (ApiVersionsRequest, ApiVersionsResponse, FrameDecoder, decode_request,
                            encode_response)
from kraft.client.node_client import NodeClient
from kraft.server.network import KafkaServer

from server_helpers import ToyHandler, run, settle


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class FakeServer:
    """Queues every decoded request as (header, request, writer); answers only when told."""

    def __init__(self):
        self.requests: asyncio.Queue = asyncio.Queue()
        self.connections = 0
        self.eofs = 0
        self._server = None

    async def start(self, port: int = 0) -> "FakeServer":
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _accept(self, reader, writer):
        self.connections += 1
        decoder = FrameDecoder()
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    break
                for frame in decoder.feed(data):
                    header, request = decode_request(frame)
                    await self.requests.put((header, request, writer))
        except (ConnectionError, OSError):
            pass
        self.eofs += 1
        writer.close()

    async def next_request(self):
        return await asyncio.wait_for(self.requests.get(), 5)

    @staticmethod
    def answer(item, response) -> None:
        header, _, writer = item
        writer.write(encode_response(header, header.api_key, header.api_version, response))

    async def close(self):
        self._server.close()


def _req(name: str) -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name=name, client_software_version="1")


def _resp(tag: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=tag)


def test_responses_are_matched_by_correlation_id_even_when_they_arrive_out_of_order():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        tasks = [asyncio.ensure_future(c.request(_req(n), 3)) for n in ("a", "bb", "ccc")]
        items = [await srv.next_request() for _ in range(3)]
        cids = [h.correlation_id for h, _, _ in items]
        assert len(set(cids)) == 3 and cids == sorted(cids)
        for item in reversed(items):
            FakeServer.answer(item, _resp(len(item[1].client_software_name)))
        results = await asyncio.gather(*tasks)
        assert [r.throttle_time_ms for r in results] == [1, 2, 3]
        assert srv.connections == 1  # pipelined on one connection
        await c.close()
        await srv.close()
    run(main())


def test_a_response_with_an_unknown_correlation_id_is_ignored():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        task = asyncio.ensure_future(c.request(_req("x"), 3))
        item = await srv.next_request()
        stray = (type(item[0])(18, 3, item[0].correlation_id + 1000), None, item[2])
        FakeServer.answer(stray, _resp(666))
        FakeServer.answer(item, _resp(1))
        assert (await task).throttle_time_ms == 1
        await c.close()
        await srv.close()
    run(main())


def test_request_timeout_raises_closes_the_connection_and_a_late_answer_is_never_delivered():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        with pytest.raises(RequestTimeoutError):
            await c.request(_req("first"), 3, timeout_ms=100)
        first = await srv.next_request()
        assert await settle(lambda: srv.eofs == 1), "the timed-out connection was left open"
        assert not c.connected
        FakeServer.answer(first, _resp(111))  # the late answer goes to a dead connection
        task = asyncio.ensure_future(c.request(_req("second"), 3))
        second = await srv.next_request()
        assert srv.connections == 2
        FakeServer.answer(second, _resp(222))
        assert (await task).throttle_time_ms == 222
        await c.close()
        await srv.close()
    run(main())


def test_a_timeout_fails_the_other_requests_on_that_connection_as_network_errors():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        slow = asyncio.ensure_future(c.request(_req("slow"), 3, timeout_ms=5000))
        await srv.next_request()
        with pytest.raises(RequestTimeoutError):
            await c.request(_req("quick"), 3, timeout_ms=50)
        with pytest.raises(NetworkError):
            await asyncio.wait_for(slow, 5)
        await c.close()
        await srv.close()
    run(main())


def test_connection_refused_is_a_network_error_not_a_timeout():
    async def main():
        c = NodeClient("127.0.0.1", _free_port(), retry_backoff_ms=1)
        with pytest.raises(NetworkError) as info:
            await c.request(_req("x"), 3, timeout_ms=2000)
        assert not isinstance(info.value, RequestTimeoutError)
        await c.close()
    run(main())


class _Jitter:
    """A random.Random stand-in: ``uniform`` returns a fixed factor and records its bounds."""

    def __init__(self, factor: float):
        self.factor, self.bounds = factor, []

    def uniform(self, lo, hi):
        self.bounds.append((lo, hi))
        return self.factor


def _backoffs(monkeypatch, factor: float, attempts: int, base_ms=10, max_ms=80) -> tuple[list, _Jitter]:
    """Seconds of backoff the client schedules after each failed connect, on a frozen clock."""
    now = 1000.0
    monkeypatch.setattr(client_module, "time", types.SimpleNamespace(monotonic=lambda: now))
    jitter = _Jitter(factor)

    async def main():
        c = NodeClient("127.0.0.1", _free_port(), retry_backoff_ms=base_ms, retry_backoff_max_ms=max_ms, rng=jitter)
        out = []
        for _ in range(attempts):
            with pytest.raises(NetworkError):
                await c.request(_req("x"), 3, timeout_ms=2000)
            out.append(round(c._next_attempt - now, 6))
        await c.close()
        return out
    return run(main()), jitter


def test_connect_backoff_doubles_per_failure_up_to_the_maximum(monkeypatch):
    backoffs, jitter = _backoffs(monkeypatch, factor=1.0, attempts=6)
    assert backoffs == [0.01, 0.02, 0.04, 0.08, 0.08, 0.08]
    assert jitter.bounds and all(lo < 1 < hi for lo, hi in jitter.bounds)  # jitter comes from the injected rng


def test_connect_backoff_applies_the_injected_jitter(monkeypatch):
    backoffs, _ = _backoffs(monkeypatch, factor=0.8, attempts=3)
    assert backoffs == [0.008, 0.016, 0.032]


def test_connect_backoff_never_exceeds_the_maximum(monkeypatch):
    backoffs, _ = _backoffs(monkeypatch, factor=1.2, attempts=6)
    assert max(backoffs) <= 0.08


def test_reconnects_after_the_server_restarts():
    async def main():
        port = _free_port()
        server = KafkaServer(ToyHandler(), "127.0.0.1", port, listener_name="T")
        await server.start()
        c = NodeClient("127.0.0.1", port, retry_backoff_ms=5, retry_backoff_max_ms=20)
        assert (await c.request(_req("a"), 3)).error_code == 0
        await server.close()
        with pytest.raises(NetworkError):
            await c.request(_req("b"), 3, timeout_ms=1000)
        server = KafkaServer(ToyHandler(), "127.0.0.1", port, listener_name="T")
        await server.start()
        for _ in range(50):  # the first attempts may still hit the backoff
            try:
                resp = await c.request(_req("c"), 3, timeout_ms=1000)
                break
            except NetworkError:
                await asyncio.sleep(0.02)
        else:
            pytest.fail("never reconnected")
        assert resp.error_code == 0
        await c.close()
        await server.close()
    run(main())


def test_close_fails_pending_requests_with_network_error_and_refuses_new_ones():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        pending = [asyncio.ensure_future(c.request(_req(n), 3, timeout_ms=5000)) for n in "ab"]
        await srv.next_request()
        await srv.next_request()
        await c.close()
        for t in pending:
            with pytest.raises(NetworkError):
                await asyncio.wait_for(t, 5)
        with pytest.raises(NetworkError):
            await c.request(_req("c"), 3)
        assert await settle(lambda: srv.eofs == 1)
        await srv.close()
    run(main())


def test_close_during_a_pending_connect_fails_the_request_with_network_error():
    async def main():
        c = NodeClient("127.0.0.1", _free_port(), retry_backoff_ms=3000, retry_backoff_max_ms=3000)
        with pytest.raises(NetworkError):
            await c.request(_req("a"), 3)
        task = asyncio.ensure_future(c.request(_req("b"), 3, timeout_ms=10_000))
        await asyncio.sleep(0.05)  # now sleeping out the 3 s backoff
        await c.close()
        try:
            await asyncio.wait_for(task, 5)
        except NetworkError:
            return
        except asyncio.CancelledError:
            pytest.fail("CancelledError escaped NodeClient.request")
        pytest.fail("the request succeeded after close()")
    run(main())


def test_at_most_max_in_flight_requests_are_on_the_wire():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port, max_in_flight=2)
        tasks = [asyncio.ensure_future(c.request(_req(str(i)), 3)) for i in range(5)]
        first = [await srv.next_request() for _ in range(2)]
        await asyncio.sleep(0.1)
        assert srv.requests.qsize() == 0, "more than max_in_flight requests were sent"
        FakeServer.answer(first[0], _resp(0))
        third = await srv.next_request()  # a slot freed: one more goes out
        await asyncio.sleep(0.05)
        assert srv.requests.qsize() == 0
        for item in [first[1], third]:
            FakeServer.answer(item, _resp(0))
        for _ in range(2):
            FakeServer.answer(await srv.next_request(), _resp(0))
        await asyncio.gather(*tasks)
        await c.close()
        await srv.close()
    run(main())


def test_an_undecodable_response_fails_the_request_and_drops_the_connection():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        task = asyncio.ensure_future(c.request(_req("x"), 3))
        header, _, writer = await srv.next_request()
        writer.write(struct.pack(">ii", 6, header.correlation_id) + b"\xff\xff")  # body cut short
        with pytest.raises(NetworkError):
            await asyncio.wait_for(task, 5)
        assert await settle(lambda: srv.eofs == 1)
        await c.close()
        await srv.close()
    run(main())


def test_server_closing_the_connection_fails_the_pending_request():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        task = asyncio.ensure_future(c.request(_req("x"), 3, timeout_ms=5000))
        _, _, writer = await srv.next_request()
        writer.close()
        with pytest.raises(NetworkError) as info:
            await asyncio.wait_for(task, 5)
        assert not isinstance(info.value, RequestTimeoutError)
        await c.close()
        await srv.close()
    run(main())


def test_a_reused_frame_is_the_same_request_with_a_fresh_correlation_id_each_time():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port, client_id="reuser")
        made = []

        def make(name):
            def build():
                made.append(name)
                return _req(name)
            return build
        tasks = [asyncio.ensure_future(c.request(make("same"), 3, reuse_key="k")) for _ in range(3)]
        tasks.append(asyncio.ensure_future(c.request(make("other"), 3, reuse_key="k2")))
        items = [await srv.next_request() for _ in range(4)]
        assert made == ["same", "other"]  # built once per key, on the first miss only
        assert [i[1].client_software_name for i in items] == ["same", "same", "same", "other"]
        assert len({i[0].correlation_id for i in items}) == 4 and {i[0].client_id for i in items} == {"reuser"}
        for n, item in enumerate(items):
            FakeServer.answer(item, _resp(n))
        assert [r.throttle_time_ms for r in await asyncio.gather(*tasks)] == [0, 1, 2, 3]
        for k in range(40):  # the cache stays bounded
            c._reused_frame(("key", k), _req(str(k)), 3, 1)
        assert len(c._frames) <= client_module._REUSED_FRAMES
        await c.close()
        await srv.close()
    run(main())


async def _connected(c: NodeClient, srv):
    """One answered request: ``c`` is connected (request_nowait sends only then). Returns
    that request as the server got it (its writer is the connection's server side)."""
    warm = asyncio.ensure_future(c.request(_req("warm"), 3))
    first = await srv.next_request()
    FakeServer.answer(first, _resp(0))
    await warm
    return first


def test_request_nowait_answers_through_the_callback_once_and_refuses_when_it_cannot_send():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port, max_in_flight=2)
        got = []
        assert not c.request_nowait(_req("early"), 3, lambda r, e: got.append((r, e)))  # not connected yet
        await _connected(c, srv)

        def boom(resp, exc):
            got.append(("boom", resp.throttle_time_ms))
            raise RuntimeError("a caller's bug")
        assert c.request_nowait(_req("a"), 3, boom)
        assert c.request_nowait(_req("b"), 3, lambda r, e: got.append((r.throttle_time_ms, e)))
        assert not c.request_nowait(_req("c"), 3, lambda r, e: None)  # max_in_flight waiting
        a, b = await srv.next_request(), await srv.next_request()
        FakeServer.answer(b, _resp(2))
        FakeServer.answer(a, _resp(1))
        assert await settle(lambda: len(got) == 2)
        assert got == [(2, None), ("boom", 1)] and c.connected  # the failing callback left the connection up

        timeouts = []
        assert c.request_nowait(_req("slow"), 3, lambda r, e: timeouts.append((r, type(e))), timeout_ms=50)
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
        assert c.request_nowait(_req("x"), 3, lambda r, e: got.append((r, e)))
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
            assert c.request_nowait(_req(f"quick{n}"), 3, lambda r, e: got.append((r.throttle_time_ms, e)))
            FakeServer.answer(await srv.next_request(), _resp(n))
        assert await settle(lambda: len(got) == 5)
        assert c._deadline_timer is not None and len(c._deadlines) <= 2  # one timer; answered ones pruned
        await asyncio.sleep(0.15)
        late = []
        sent = asyncio.get_running_loop().time()
        assert c.request_nowait(_req("late"), 3, lambda r, e: late.append((r, type(e))))
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
        assert c.request_nowait(_req("x"), 3, lambda r, e: got.append((r, e)))
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
        burst = [asyncio.ensure_future(c.request(_req(f"r{n}"), 3)) for n in range(4)]
        items = [await srv.next_request() for _ in range(4)]
        assert [i[1].client_software_name for i in items] == ["r0", "r1", "r2", "r3"]  # in order
        for n, item in enumerate(items):
            FakeServer.answer(item, _resp(n))
        assert [r.throttle_time_ms for r in await asyncio.gather(*burst)] == [0, 1, 2, 3]
        assert len(c._deadlines) >= 1 and c._deadline_timer is not None
        for n in range(200):  # answered entries do not pile up until the timer fires
            one = asyncio.ensure_future(c.request(_req(f"s{n}"), 3))
            FakeServer.answer(await srv.next_request(), _resp(n))
            await one
        assert len(c._deadlines) <= 2
        began = time.monotonic()
        late = asyncio.ensure_future(c.request(_req("late"), 3))
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
        held = c.hold_nowait(_req("gated"), 3, lambda r, e: got.append((r, e)))
        assert held is not None
        await asyncio.sleep(0.4)  # past the request timeout: held, it neither left nor expired
        assert srv.requests.empty() and got == [] and c.connected
        c.release(held)
        FakeServer.answer(await srv.next_request(), _resp(7))
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
        held = c.hold_nowait(_req("gated"), 3, lambda r, e: got.append((r, e)))
        first[2].close()  # the server drops the connection while the request is held
        assert await settle(lambda: len(got) == 1)
        assert got[0][0] is None and isinstance(got[0][1], NetworkError)
        await _connected(c, srv)  # a new connection
        c.release(held)  # belongs to the old one: not written on the new
        await asyncio.sleep(0.05)
        assert srv.requests.empty()
        await c.close()
        assert c.hold_nowait(_req("after close"), 3, lambda r, e: None) is None
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
        slow = asyncio.ensure_future(c.request(_req("slow"), 3, timeout_ms=5000))
        await srv.next_request()  # never answered
        began = time.monotonic()
        quick = asyncio.ensure_future(c.request(_req("quick"), 3, timeout_ms=300))
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
        task = asyncio.ensure_future(c.request(_req("x"), 3, timeout_ms=250))
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
        first = asyncio.ensure_future(c.request(_req("first"), 3))
        item = await srv.next_request()
        gone = asyncio.ensure_future(c.request(_req("gone"), 3))
        await asyncio.sleep(0.01)
        gone.cancel()
        await asyncio.sleep(0.01)
        FakeServer.answer(item, _resp(0))
        await first
        last = asyncio.ensure_future(c.request(_req("last"), 3))
        got = await srv.next_request()
        assert got[1].client_software_name == "last"
        FakeServer.answer(got, _resp(7))
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
        one = asyncio.ensure_future(c.request(_req("a"), 3, fast=fast))
        FakeServer.answer(await srv.next_request(), _resp(1))
        assert await one == "recognised"
        two = asyncio.ensure_future(c.request(_req("b"), 3, fast=fast))
        item = await srv.next_request()
        FakeServer.answer(item, _resp(2))
        assert (await two).throttle_time_ms == 2  # None: decoded as usual
        assert struct.unpack_from(">i", seen[1])[0] == item[0].correlation_id  # from the correlation id on
        await c.close()
        await srv.close()
    run(main())
