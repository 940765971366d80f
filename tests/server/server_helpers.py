"""Helpers shared by the server-layer unit tests: running coroutines with a bound, a raw
Kafka-framed socket for poking servers byte by byte, and a toy request handler whose
behaviour each request picks through its header's client id."""

from __future__ import annotations

import asyncio
import struct

from kraft.errors import KraftError
from kraft.protocol import (ApiVersionsRequest, ApiVersionsResponse, ProduceRequest, ProduceResponse,
                            decode_response, encode_request)

WAIT = 5.0  # seconds: bounds a wait, never asserted on


def run(coro, timeout: float = 20.0):
    """asyncio.run with an overall bound so a hung test fails instead of hanging CI."""
    async def bounded():
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


async def settle(predicate, timeout: float = WAIT, interval: float = 0.005):
    """Wait until ``predicate()`` is true (or the bound passes); returns its last value."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(interval)
    return predicate()


def api_versions_frame(cid: int, client_id: str = "ok", version: int = 3) -> bytes:
    return encode_request(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                          version, cid, client_id)


def produce_frame(cid: int, client_id: str = "ok", version: int = 3) -> bytes:
    return encode_request(ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[]), version, cid, client_id)


class RawConnection:
    """A client socket that writes arbitrary bytes and reads whole frames."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, host: str = "127.0.0.1") -> "RawConnection":
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self, timeout: float = WAIT) -> bytes | None:
        """The next response frame without its size prefix; None at end of stream."""
        try:
            head = await asyncio.wait_for(self.reader.readexactly(4), timeout)
        except asyncio.IncompleteReadError:
            return None
        (size,) = struct.unpack(">i", head)
        return await asyncio.wait_for(self.reader.readexactly(size), timeout)

    async def is_closed_by_peer(self, timeout: float = WAIT) -> bool:
        """True if the peer closes the connection (EOF or reset) within ``timeout``."""
        try:
            data = await asyncio.wait_for(self.reader.read(1 << 16), timeout)
        except asyncio.TimeoutError:  # first: since 3.11 it is the builtin, an OSError
            return False
        except (ConnectionError, OSError):
            return True
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


def decode_api_versions(frame: bytes, version: int = 3) -> tuple[int, ApiVersionsResponse]:
    header, body = decode_response(frame, ApiVersionsRequest.API_KEY, version)
    return header.correlation_id, body


class ToyHandler:
    """``handle`` reacts to the request's client id:

    * ``ok``: answer at once (ApiVersions: throttle_time_ms = correlation id);
    * ``defer``: return a future, kept in ``deferred[cid]``, that the test resolves;
    * ``raise``: raise RuntimeError; ``kraft-error``: raise a KraftError with code 6;
    * ``defer-raise``: return a future that fails with RuntimeError when resolved;
    * ``none``: return None (no answer); ``close``: CLOSE_CONNECTION (no answer, then close).
    Every call is recorded in ``calls`` (correlation ids)."""

    def __init__(self):
        self.calls: list[int] = []
        self.deferred: dict[int, asyncio.Future] = {}
        self._failing: set[int] = set()

    def answer(self, ctx, request):
        cid = ctx.header.correlation_id
        if isinstance(request, ProduceRequest):
            return ProduceResponse(responses=[], throttle_time_ms=cid)
        return ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=cid)

    def handle(self, ctx, request):
        cid = ctx.header.correlation_id
        self.calls.append(cid)
        mode = ctx.header.client_id
        if mode == "raise":
            raise RuntimeError("toy handler bug")
        if mode == "kraft-error":
            err = KraftError("not the leader")
            err.code = 6
            raise err
        if mode == "none":
            return None
        if mode == "close":
            from kraft.protocol.framing import CLOSE_CONNECTION
            return CLOSE_CONNECTION
        if mode in ("defer", "defer-raise"):
            fut = asyncio.get_running_loop().create_future()
            self.deferred[cid] = fut
            if mode == "defer-raise":
                self._failing.add(cid)
            return self._await(fut, ctx, request)
        return self.answer(ctx, request)

    async def _await(self, fut, ctx, request):
        await fut
        if ctx.header.correlation_id in self._failing:
            raise RuntimeError("deferred toy failure")
        return self.answer(ctx, request)

    def resolve(self, cid: int) -> None:
        self.deferred[cid].set_result(None)
