"""NodeClient (kraft/server/client.py): correlation ids, timeouts that close the connection,
connect failures with growing backoff, reconnects, and close() failing what is pending
(request_nowait and the deadline timers: test_client_nowait.py).

Most tests talk to a scripted fake server (client_fakes.FakeServer)."""

from __future__ import annotations

import asyncio
import struct
import types

import pytest

import kraft.client.node_client as client_module
from kraft.errors import NetworkError, RequestTimeoutError
from kraft.client.node_client import NodeClient
from kraft.server.network import KafkaServer

from client_fakes import FakeServer, free_port, req, resp
from server_helpers import ToyHandler, run, settle


def test_responses_are_matched_by_correlation_id_even_when_they_arrive_out_of_order():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        tasks = [asyncio.ensure_future(c.request(req(n), 3)) for n in ("a", "bb", "ccc")]
        items = [await srv.next_request() for _ in range(3)]
        cids = [h.correlation_id for h, _, _ in items]
        assert len(set(cids)) == 3 and cids == sorted(cids)
        for item in reversed(items):
            FakeServer.answer(item, resp(len(item[1].client_software_name)))
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
        task = asyncio.ensure_future(c.request(req("x"), 3))
        item = await srv.next_request()
        stray = (type(item[0])(18, 3, item[0].correlation_id + 1000), None, item[2])
        FakeServer.answer(stray, resp(666))
        FakeServer.answer(item, resp(1))
        assert (await task).throttle_time_ms == 1
        await c.close()
        await srv.close()
    run(main())


def test_request_timeout_raises_closes_the_connection_and_a_late_answer_is_never_delivered():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        with pytest.raises(RequestTimeoutError):
            await c.request(req("first"), 3, timeout_ms=100)
        first = await srv.next_request()
        assert await settle(lambda: srv.eofs == 1), "the timed-out connection was left open"
        assert not c.connected
        FakeServer.answer(first, resp(111))  # the late answer goes to a dead connection
        task = asyncio.ensure_future(c.request(req("second"), 3))
        second = await srv.next_request()
        assert srv.connections == 2
        FakeServer.answer(second, resp(222))
        assert (await task).throttle_time_ms == 222
        await c.close()
        await srv.close()
    run(main())


def test_a_timeout_fails_the_other_requests_on_that_connection_as_network_errors():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        slow = asyncio.ensure_future(c.request(req("slow"), 3, timeout_ms=5000))
        await srv.next_request()
        with pytest.raises(RequestTimeoutError):
            await c.request(req("quick"), 3, timeout_ms=50)
        with pytest.raises(NetworkError):
            await asyncio.wait_for(slow, 5)
        await c.close()
        await srv.close()
    run(main())


def test_connection_refused_is_a_network_error_not_a_timeout():
    async def main():
        c = NodeClient("127.0.0.1", free_port(), retry_backoff_ms=1)
        with pytest.raises(NetworkError) as info:
            await c.request(req("x"), 3, timeout_ms=2000)
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
        c = NodeClient("127.0.0.1", free_port(), retry_backoff_ms=base_ms, retry_backoff_max_ms=max_ms, rng=jitter)
        out = []
        for _ in range(attempts):
            with pytest.raises(NetworkError):
                await c.request(req("x"), 3, timeout_ms=2000)
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
        port = free_port()
        server = KafkaServer(ToyHandler(), "127.0.0.1", port, listener_name="T")
        await server.start()
        c = NodeClient("127.0.0.1", port, retry_backoff_ms=5, retry_backoff_max_ms=20)
        assert (await c.request(req("a"), 3)).error_code == 0
        await server.close()
        with pytest.raises(NetworkError):
            await c.request(req("b"), 3, timeout_ms=1000)
        server = KafkaServer(ToyHandler(), "127.0.0.1", port, listener_name="T")
        await server.start()
        for _ in range(50):  # the first attempts may still hit the backoff
            try:
                answer = await c.request(req("c"), 3, timeout_ms=1000)
                break
            except NetworkError:
                await asyncio.sleep(0.02)
        else:
            pytest.fail("never reconnected")
        assert answer.error_code == 0
        await c.close()
        await server.close()
    run(main())


def test_close_fails_pending_requests_with_network_error_and_refuses_new_ones():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        pending = [asyncio.ensure_future(c.request(req(n), 3, timeout_ms=5000)) for n in "ab"]
        await srv.next_request()
        await srv.next_request()
        await c.close()
        for t in pending:
            with pytest.raises(NetworkError):
                await asyncio.wait_for(t, 5)
        with pytest.raises(NetworkError):
            await c.request(req("c"), 3)
        assert await settle(lambda: srv.eofs == 1)
        await srv.close()
    run(main())


def test_close_during_a_pending_connect_fails_the_request_with_network_error():
    async def main():
        c = NodeClient("127.0.0.1", free_port(), retry_backoff_ms=3000, retry_backoff_max_ms=3000)
        with pytest.raises(NetworkError):
            await c.request(req("a"), 3)
        task = asyncio.ensure_future(c.request(req("b"), 3, timeout_ms=10_000))
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
        tasks = [asyncio.ensure_future(c.request(req(str(i)), 3)) for i in range(5)]
        first = [await srv.next_request() for _ in range(2)]
        await asyncio.sleep(0.1)
        assert srv.requests.qsize() == 0, "more than max_in_flight requests were sent"
        FakeServer.answer(first[0], resp(0))
        third = await srv.next_request()  # a slot freed: one more goes out
        await asyncio.sleep(0.05)
        assert srv.requests.qsize() == 0
        for item in [first[1], third]:
            FakeServer.answer(item, resp(0))
        for _ in range(2):
            FakeServer.answer(await srv.next_request(), resp(0))
        await asyncio.gather(*tasks)
        await c.close()
        await srv.close()
    run(main())


def test_an_undecodable_response_fails_the_request_and_drops_the_connection():
    async def main():
        srv = await FakeServer().start()
        c = NodeClient("127.0.0.1", srv.port)
        task = asyncio.ensure_future(c.request(req("x"), 3))
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
        task = asyncio.ensure_future(c.request(req("x"), 3, timeout_ms=5000))
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
                return req(name)
            return build
        tasks = [asyncio.ensure_future(c.request(make("same"), 3, reuse_key="k")) for _ in range(3)]
        tasks.append(asyncio.ensure_future(c.request(make("other"), 3, reuse_key="k2")))
        items = [await srv.next_request() for _ in range(4)]
        assert made == ["same", "other"]  # built once per key, on the first miss only
        assert [i[1].client_software_name for i in items] == ["same", "same", "same", "other"]
        assert len({i[0].correlation_id for i in items}) == 4 and {i[0].client_id for i in items} == {"reuser"}
        for n, item in enumerate(items):
            FakeServer.answer(item, resp(n))
        assert [r.throttle_time_ms for r in await asyncio.gather(*tasks)] == [0, 1, 2, 3]
        for k in range(40):  # the cache stays bounded
            c._reused_frame(("key", k), req(str(k)), 3, 1)
        assert len(c._frames) <= client_module._REUSED_FRAMES
        await c.close()
        await srv.close()
    run(main())
