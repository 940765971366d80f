"""KafkaServer (kraft/server/network.py) with a toy handler: request-order responses,
pipelining, per-connection back-pressure, handler failures, and bad input that closes only
the offending connection (Kafka's SocketServer / ARCHITECTURE.md "Bad input")."""

from __future__ import annotations

import asyncio
import random
import struct
import time

import pytest

from kraft.errors import ErrorCode
from kraft.protocol import ApiVersionsRequest, ProduceRequest, VoteRequest, decode_response, encode_request
from kraft.server.controller_handlers import SERVED_APIS, ControllerHandlers
from kraft.server.network import KafkaServer

from server_helpers import (RawConnection, ToyHandler, api_versions_frame, decode_api_versions, produce_frame, run,
                       settle)


async def _serve(handler=None, **kw):
    handler = handler or ToyHandler()
    server = KafkaServer(handler, "127.0.0.1", 0, listener_name="TEST", **kw)
    await server.start()
    return server, handler


def _with_size(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def _expect_answer(conn: RawConnection, cid: int) -> None:
    frame = await conn.read_frame()
    assert frame is not None, "connection closed instead of answering"
    got, body = decode_api_versions(frame)
    assert (got, body.error_code, body.throttle_time_ms) == (cid, 0, cid)


# --- ordering and pipelining ------------------------------------------------------------------


def test_responses_follow_request_order_when_handlers_complete_out_of_order():
    async def main():
        server, toy = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(b"".join(api_versions_frame(cid, "defer") for cid in (1, 2, 3)))
        await settle(lambda: len(toy.deferred) == 3)
        for cid in (3, 2, 1):  # finish last-first
            toy.resolve(cid)
            await asyncio.sleep(0.01)
        for cid in (1, 2, 3):
            await _expect_answer(conn, cid)
        await conn.close()
        await server.close()
    run(main())


def test_a_slow_request_does_not_delay_handling_of_later_ones():
    async def main():
        server, toy = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(1, "defer") + api_versions_frame(2, "ok"))
        assert await settle(lambda: toy.calls == [1, 2]), toy.calls  # 2 handled while 1 is pending
        toy.resolve(1)
        await _expect_answer(conn, 1)
        await _expect_answer(conn, 2)
        await conn.close()
        await server.close()
    run(main())


def test_many_pipelined_requests_in_one_write_are_all_answered_in_order():
    async def main():
        server, toy = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(b"".join(api_versions_frame(cid) for cid in range(1, 201)))
        for cid in range(1, 201):
            await _expect_answer(conn, cid)
        assert server.requests_total == 200
        await conn.close()
        await server.close()
    run(main())


def test_a_frame_split_across_writes_is_reassembled():
    async def main():
        server, _ = await _serve()
        conn = await RawConnection.open(server.port)
        data = api_versions_frame(7)
        for i in range(len(data)):
            await conn.send(data[i:i + 1])
        await _expect_answer(conn, 7)
        await conn.close()
        await server.close()
    run(main())


def test_handler_returning_none_sends_nothing_and_later_requests_are_still_answered():
    async def main():
        server, _ = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(1, "none") + api_versions_frame(2))
        await _expect_answer(conn, 2)
        await conn.close()
        await server.close()
    run(main())


# --- back-pressure ----------------------------------------------------------------------------


def _in_flight_probe(max_in_flight: int, sent: int = 12):
    async def main():
        server, toy = await _serve(max_in_flight=max_in_flight)
        conn = await RawConnection.open(server.port)
        await conn.send(b"".join(api_versions_frame(cid, "defer") for cid in range(1, sent + 1)))
        await settle(lambda: len(toy.calls) >= sent, timeout=0.3)  # let the reader go as far as it will
        handled_while_blocked = len(toy.calls)
        for cid in range(1, sent + 1):
            await settle(lambda: cid in toy.deferred)
            toy.resolve(cid)
        answers = [decode_api_versions(await conn.read_frame())[0] for _ in range(sent)]
        await conn.close()
        await server.close()
        return handled_while_blocked, answers
    return run(main())


def test_reader_pauses_when_the_connection_has_too_many_requests_in_flight():
    handled, answers = _in_flight_probe(max_in_flight=2, sent=12)
    assert handled < 12, "the server kept reading although no response could be written"
    assert answers == list(range(1, 13))  # and nothing was lost once the handlers completed


def test_at_most_max_in_flight_requests_are_handled_concurrently():
    handled, _ = _in_flight_probe(max_in_flight=2, sent=12)
    assert handled <= 2


# --- handler failures --------------------------------------------------------------------------


def test_handler_exception_is_answered_with_unknown_server_error_and_the_connection_stays_open():
    async def main():
        server, _ = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(1, "raise") + api_versions_frame(2))
        cid, body = decode_api_versions(await conn.read_frame())
        assert (cid, body.error_code) == (1, ErrorCode.UNKNOWN_SERVER_ERROR)
        await _expect_answer(conn, 2)
        assert server.rejected_total == 0
        await conn.close()
        await server.close()
    run(main())


def test_kraft_error_from_a_handler_is_answered_with_its_own_code():
    async def main():
        server, _ = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(1, "kraft-error"))
        cid, body = decode_api_versions(await conn.read_frame())
        assert (cid, body.error_code) == (1, 6)
        await conn.close()
        await server.close()
    run(main())


def test_awaitable_that_fails_is_answered_with_an_error_in_its_place():
    async def main():
        server, toy = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(1, "defer-raise") + api_versions_frame(2))
        await settle(lambda: 1 in toy.deferred)
        toy.resolve(1)
        cid, body = decode_api_versions(await conn.read_frame())
        assert (cid, body.error_code) == (1, ErrorCode.UNKNOWN_SERVER_ERROR)
        await _expect_answer(conn, 2)
        await conn.close()
        await server.close()
    run(main())


def test_handler_exception_without_an_error_field_closes_only_that_connection():
    async def main():
        server, _ = await _serve()
        bad = await RawConnection.open(server.port)
        good = await RawConnection.open(server.port)
        await bad.send(produce_frame(1, "raise"))  # ProduceResponse v3 has no top-level error_code
        assert await bad.is_closed_by_peer()
        assert server.rejected_total == 1
        await good.send(api_versions_frame(5))
        await _expect_answer(good, 5)
        await bad.close()
        await good.close()
        await server.close()
    run(main())


# --- bad input ---------------------------------------------------------------------------------


def _header(api_key, version, cid=1, client=b"x", tagged=False):
    return struct.pack(">hhih", api_key, version, cid, len(client)) + client + (b"\x00" if tagged else b"")


def _truncated_body():
    frame = api_versions_frame(1)[4:]
    return _with_size(frame[:-3])


def _trailing_bytes():
    return _with_size(api_versions_frame(1)[4:] + b"\x00\x00")


def _random_bytes():
    rng = random.Random(1234)
    body = bytes(rng.randrange(256) for _ in range(200))
    return _with_size(body)


BAD_INPUT = {
    "negative size": struct.pack(">i", -5) + b"\x00" * 8,
    "oversize frame": struct.pack(">i", 4096) + b"\x00" * 16,
    "too short for a header": _with_size(b"\x00\x12\x00"),
    "unknown api key": _with_size(_header(999, 0)),
    "unsupported version": _with_size(_header(VoteRequest.API_KEY, 99, tagged=True) + b"\x00" * 20),
    "undecodable body": _truncated_body(),
    "trailing bytes": _trailing_bytes(),
    "random bytes": _random_bytes(),
    "bad client id length": _with_size(struct.pack(">hhih", 18, 0, 1, 500) + b"abc"),
}


@pytest.mark.parametrize("payload", list(BAD_INPUT.values()), ids=list(BAD_INPUT))
def test_bad_input_closes_only_that_connection(payload):
    async def main():
        server, toy = await _serve(max_frame_bytes=1024)
        good = await RawConnection.open(server.port)
        bad = await RawConnection.open(server.port)
        await bad.send(payload)
        assert await bad.is_closed_by_peer(), "the server kept a connection that sent bad input"
        assert server.rejected_total == 1
        assert toy.calls == []
        await good.send(api_versions_frame(9))
        await _expect_answer(good, 9)
        third = await RawConnection.open(server.port)  # and it still accepts new ones
        await third.send(api_versions_frame(10))
        await _expect_answer(third, 10)
        for c in (good, bad, third):
            await c.close()
        await server.close()
    run(main())


def test_valid_requests_before_a_bad_frame_on_the_same_connection_are_handled():
    async def main():
        server, toy = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(1))
        await _expect_answer(conn, 1)
        await conn.send(struct.pack(">i", -1))
        assert await conn.is_closed_by_peer()
        assert (toy.calls, server.requests_total, server.rejected_total) == ([1], 1, 1)
        await conn.close()
        await server.close()
    run(main())


def test_many_bad_connections_are_counted_and_the_server_survives():
    async def main():
        server, _ = await _serve(max_frame_bytes=1024)
        for payload in BAD_INPUT.values():
            conn = await RawConnection.open(server.port)
            await conn.send(payload)
            assert await conn.is_closed_by_peer()
            await conn.close()
        assert server.rejected_total == len(BAD_INPUT)
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(3))
        await _expect_answer(conn, 3)
        await conn.close()
        await server.close()
    run(main())


def test_client_disconnecting_with_requests_in_flight_does_not_hurt_the_server():
    async def main():
        server, toy = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(b"".join(api_versions_frame(cid, "defer") for cid in (1, 2)))
        await settle(lambda: len(toy.deferred) == 2)
        await conn.close()
        await asyncio.sleep(0.05)
        for cid in (1, 2):
            if not toy.deferred[cid].done():
                toy.resolve(cid)
        other = await RawConnection.open(server.port)
        await other.send(api_versions_frame(3))
        await _expect_answer(other, 3)
        await other.close()
        await server.close()
    run(main())


# --- ApiVersions on the controller listener ------------------------------------------------------


def test_api_versions_at_an_unsupported_version_is_answered_at_v0_with_unsupported_version():
    async def main():
        server, _ = await _serve(ControllerHandlers(driver=None, endpoints=[]))
        conn = await RawConnection.open(server.port)
        # v9 is flexible ("3+"): header v2, a body we cannot know (it is not parsed).
        await conn.send(_with_size(_header(ApiVersionsRequest.API_KEY, 9, cid=42, tagged=True) + b"\x01\x02\x03"))
        frame = await conn.read_frame()
        assert frame is not None
        header, body = decode_response(frame, ApiVersionsRequest.API_KEY, 0)
        assert header.correlation_id == 42
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(a.api_key, a.min_version, a.max_version) for a in body.api_keys] == \
            [(18, ApiVersionsRequest.MIN_VERSION, ApiVersionsRequest.MAX_VERSION)]
        assert server.rejected_total == 0
        # The client negotiates down on the same connection.
        await conn.send(api_versions_frame(43, version=3))
        cid, body = decode_api_versions(await conn.read_frame())
        assert (cid, body.error_code) == (43, 0)
        assert {a.api_key for a in body.api_keys} == set(SERVED_APIS)
        await conn.close()
        await server.close()
    run(main())


def test_produce_v3_encodes_and_is_dispatched_to_the_handler():
    """Sanity check of the toy setup used above (a request type without a top-level error)."""
    async def main():
        server, toy = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(encode_request(ProduceRequest(acks=1, timeout_ms=5, topic_data=[]), 3, 11, "ok"))
        frame = await conn.read_frame()
        header, body = decode_response(frame, ProduceRequest.API_KEY, 3)
        assert (header.correlation_id, body.throttle_time_ms, toy.calls) == (11, 11, [11])
        await conn.close()
        await server.close()
    run(main())


def test_close_with_idle_connections_closes_them():
    async def main():
        server, _ = await _serve()
        conns = [await RawConnection.open(server.port) for _ in range(3)]
        await conns[0].send(api_versions_frame(1))
        await _expect_answer(conns[0], 1)
        await asyncio.wait_for(server.close(), 5)
        for c in conns:
            assert await c.is_closed_by_peer()
            await c.close()
    run(main())


def test_close_returns_while_a_handler_is_still_pending():
    async def main():
        server, toy = await _serve()
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(1, "defer"))
        await settle(lambda: toy.deferred)
        try:
            await asyncio.wait_for(server.close(), 2)
        finally:
            if not toy.deferred[1].done():
                toy.resolve(1)  # let the test end either way
            await conn.close()
    run(main())


# --- connection limits (Kafka's max.connections.per.ip and connections.max.idle.ms) ----------------


async def _open(port, n):
    return [await RawConnection.open(port) for _ in range(n)]


async def _answers(conn, cid) -> bool:
    await conn.send(api_versions_frame(cid))
    frame = await conn.read_frame()
    return frame is not None and decode_api_versions(frame)[0] == cid


def test_a_connection_over_the_per_ip_cap_is_closed_at_once_and_the_others_keep_serving():
    async def main():
        server, _ = await _serve(max_connections_per_ip=2)
        first = await _open(server.port, 2)
        extra = await RawConnection.open(server.port)
        assert await extra.is_closed_by_peer()
        assert server.refused_total == 1
        for i, conn in enumerate(first):
            assert await _answers(conn, i + 1)
        await first[0].close()
        # The slot is free again once a connection ends.
        assert await settle(lambda: server.caps._open_by_address.get("127.0.0.1") == 1)
        again = await RawConnection.open(server.port)
        assert await _answers(again, 9)
        for conn in (first[1], extra, again):
            await conn.close()
        await server.close()
    run(main())


def test_a_per_ip_override_replaces_the_cap_for_that_host_name():
    async def main():
        # "localhost" is resolved at start, as Kafka resolves override host names.
        server, _ = await _serve(max_connections_per_ip=0, max_connections_per_ip_overrides={"localhost": 1})
        ok = await RawConnection.open(server.port)
        assert await _answers(ok, 1)
        refused = await RawConnection.open(server.port)
        assert await refused.is_closed_by_peer()
        assert server.refused_total == 1
        await ok.close()
        await refused.close()
        await server.close()
    run(main())


def test_an_idle_connection_is_closed_after_connections_max_idle_ms():
    async def main():
        server, _ = await _serve(connections_max_idle_ms=50)
        conn = await RawConnection.open(server.port)
        assert await _answers(conn, 1)
        assert await conn.is_closed_by_peer()
        assert server.idle_closed_total == 1
        await conn.close()
        await server.close()
    run(main())


def test_a_connection_with_a_request_in_flight_is_not_idle():
    async def main():
        server, toy = await _serve(connections_max_idle_ms=30)
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(1, "defer"))
        await settle(lambda: 1 in toy.deferred)
        # Many idle periods pass while the handler works; the connection must survive them.
        assert not await conn.is_closed_by_peer(timeout=0.3)
        toy.resolve(1)
        await _expect_answer(conn, 1)
        assert server.idle_closed_total == 0
        assert await conn.is_closed_by_peer()  # idle once answered
        await conn.close()
        await server.close()
    run(main())


def test_idle_expiry_is_off_when_connections_max_idle_ms_is_negative():
    async def main():
        server, _ = await _serve(connections_max_idle_ms=-1)
        conn = await RawConnection.open(server.port)
        assert not await conn.is_closed_by_peer(timeout=0.2)
        assert await _answers(conn, 1)
        await conn.close()
        await server.close()
    run(main())


def test_a_large_records_answer_is_spliced_into_the_write_and_the_next_answer_follows_it():
    """A Fetch answer holding a records value of SPLICE_BYTES or more leaves as a writev of
    the frame's bytes and the value itself (encode_response(splice=True)); the client reads
    the same bytes, and a pipelined answer after it is intact."""
    from kraft.protocol.primitives import SPLICE_BYTES
    from kraft.raft.rpcs import fetch_request, fetch_response

    big = bytes(random.Random(5).getrandbits(8) for _ in range(SPLICE_BYTES * 5 + 3))

    class Handler:
        def handle(self, ctx, request):
            records = big if ctx.header.correlation_id == 1 else b"small"
            return fetch_response(0, 1, 5, high_watermark=10, log_start_offset=0, records=records)

    async def main():
        server = KafkaServer(Handler(), "127.0.0.1", 0, listener_name="TEST")
        await server.start()
        conn = await RawConnection.open(server.port)
        await conn.send(b"".join(encode_request(fetch_request(2, 5, 0, 0), 17, cid) for cid in (1, 2)))
        answers = []
        for _ in range(2):
            frame = await conn.read_frame()
            assert frame is not None, "connection closed instead of answering"
            answers.append(decode_response(frame, 1, 17))
        await conn.close()
        await server.close()
        return answers

    (h1, r1), (h2, r2) = run(main())
    assert (h1.correlation_id, h2.correlation_id) == (1, 2)
    assert bytes(r1.responses[0].partitions[0].records) == big
    assert bytes(r2.responses[0].partitions[0].records) == b"small"


def test_a_flood_of_bad_connections_is_counted_not_logged_line_by_line(caplog):
    """Each rejected connection is counted; past REJECT_LOG_BURST in a second they get no
    line each (a flood of hostile frames must not fill the disk with log lines), and the
    next second's first rejection sums up the ones left out."""
    from kraft.server import network

    async def reject_one(server):
        conn = await RawConnection.open(server.port)
        await conn.send(b"\xff\xff\xff\xff")  # a negative frame size
        assert await conn.is_closed_by_peer()
        await conn.close()

    async def main():
        server, _ = await _serve(max_frame_bytes=1024)
        if time.monotonic() % 1 > 0.5:  # start early in a second: the flood fits in one
            await asyncio.sleep(1 - time.monotonic() % 1)
        first = int(time.monotonic())
        for _ in range(40):
            await reject_one(server)
        seconds = int(time.monotonic()) - first + 1
        await asyncio.sleep(1.05 - time.monotonic() % 1)  # the next second
        await reject_one(server)
        assert server.rejected_total == 41
        conn = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(3))
        await _expect_answer(conn, 3)
        await conn.close()
        await server.close()
        return seconds

    with caplog.at_level("WARNING", logger="kraft.network"):
        seconds = run(main())
    messages = [r.getMessage() for r in caplog.records]
    logged = sum(m.startswith("closing connection") for m in messages)
    unlogged = sum(int(m.split()[0]) for m in messages if "without a line each" in m)
    assert logged <= network.REJECT_LOG_BURST * (seconds + 1)  # + the one in the next second
    assert logged + unlogged == 41  # every rejection is either a line or in a sum
    if 40 > network.REJECT_LOG_BURST * seconds:  # (a machine that slow spreads the flood out)
        assert unlogged > 0
        assert any("counted (kraft_rejected_connections_total), not logged" in m for m in messages)


# --- quota throttling (KIP-219) -----------------------------------------------------------------


def test_a_muted_connection_answers_what_it_read_then_reads_nothing_until_the_mute_ends():
    class Muting(ToyHandler):
        def handle(self, ctx, request):
            if ctx.header.correlation_id == 1:
                ctx.mute_for(2000)
            return super().handle(ctx, request)

    async def main():
        server, toy = await _serve(Muting())
        conn = await RawConnection.open(server.port)
        other = await RawConnection.open(server.port)
        await conn.send(api_versions_frame(1, "ok"))
        await _expect_answer(conn, 1)  # the throttled answer leaves at once
        await conn.send(api_versions_frame(2, "ok"))
        await other.send(api_versions_frame(7, "ok"))
        await _expect_answer(other, 7)  # other connections are not muted
        await asyncio.sleep(0.2)
        assert toy.calls == [1, 7]  # request 2 was not read yet (muted for 2 s)
        await _expect_answer(conn, 2)  # ...and is served once the mute ends
        assert toy.calls == [1, 7, 2]
        await conn.close()
        await other.close()
        await server.close()
    run(main())
