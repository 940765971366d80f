"""A scripted Kafka server for NodeClient tests: it decodes requests and lets the test decide
when and how to answer (out of order, late, never, garbage)."""

from __future__ import annotations

import asyncio
import socket

from kraft.protocol import ApiVersionsRequest, ApiVersionsResponse, FrameDecoder, decode_request, encode_response


def free_port() -> int:
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


def req(name: str) -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name=name, client_software_version="1")


def resp(tag: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=tag)
