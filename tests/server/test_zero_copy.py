"""Answers whose records are file slices (``kraft.server.zero_copy``), through a real server on
both event loops: the bytes a copy would have carried, in order with the answers after them,
through a socket that fills up (sendfile resumed when it is writable), a client that goes
away mid-answer, a truncation while the answer waits, and TLS (no sendfile: read into memory)."""

from __future__ import annotations

import asyncio
import os
import ssl
import struct

import pytest
import uvloop

from kraft.log import LogConfig, SegmentedLog
from kraft.log.file_slice import FileSlice
from kraft.log.log_reads import read_answer, read_bytes
from kraft.protocol import EncodedParts
from kraft.records import build_batch
from kraft.server.network import KafkaServer
from kraft.server.tls import server_context
from kraft.server.zero_copy import in_memory, remainder, send_parts

from server_helpers import ToyHandler, api_versions_frame
from tls_certs import CertAuthority

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
MB = 1 << 20


def _run(loop_name, coro_fn, timeout=60):
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        return runner.run(asyncio.wait_for(coro_fn(), timeout))


def _log(tmp_path, mb: int = 12, seed: int = 1) -> SegmentedLog:
    log = SegmentedLog.open(str(tmp_path / f"log-{seed}"), LogConfig(segment_bytes=5 * MB))
    rnd = __import__("random").Random(seed)
    while log.end_offset < mb * MB // 1000:  # 1,000-byte records
        values = [rnd.randbytes(1000) for _ in range(500)]
        log.append(build_batch(values), leader_epoch=0)
    log.flush()
    return log


class SliceHandler(ToyHandler):
    """Client id ``slices``: an answer of ``parts()`` (buffers and file slices), at once or,
    with ``hold``, when the test resolves it."""

    def __init__(self, parts, hold=False):
        super().__init__()
        self.parts, self.hold = parts, hold
        self.waiting = None

    def handle(self, ctx, request):
        if ctx.header.client_id != "slices":
            return super().handle(ctx, request)
        self.calls.append(ctx.header.correlation_id)
        answer = EncodedParts(self.parts())
        if not self.hold:
            return answer
        self.waiting = asyncio.get_running_loop().create_future()
        return self._later(answer)

    async def _later(self, answer):
        await self.waiting
        return answer


def _expected(parts) -> bytes:
    return b"".join(bytes(p) for p in in_memory(parts))


async def _read_answer(reader, cid: int, pause: float = 0.0) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    body = bytearray()
    while len(body) < size:
        chunk = await reader.read(min(256 * 1024, size - len(body)))
        assert chunk, "the server closed the connection mid-answer"
        body += chunk
        if pause:
            await asyncio.sleep(pause)
    assert struct.unpack(">i", body[:4])[0] == cid
    return bytes(body[4:])  # after the correlation id (ApiVersions answers have header v0)


async def _cid_of_next_answer(reader) -> int:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return struct.unpack(">i", (await reader.readexactly(size))[:4])[0]


def _serve(loop, handler, log, body, listener="TEST", **kw):
    """Run ``body(server)`` against a KafkaServer of ``handler`` on ``loop``; then close the log."""
    async def main():
        server = KafkaServer(handler, "127.0.0.1", 0, listener_name=listener, **kw)
        await server.start()
        try:
            await body(server)
        finally:
            await server.close()
    try:
        _run(loop, main)
    finally:
        log.close()


def _parts(log):
    end = log.end_offset
    a = read_answer(log, 0, 4 * MB)
    b = read_answer(log, end // 3, 4 * MB)
    c = read_answer(log, 2 * end // 3, 4 * MB)
    assert all(isinstance(s, FileSlice) for s in (a, b, c))
    return [b"\x00\x01head", a, b"between", b, memoryview(b"and more"), c, b"tail"]


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_big_answer_to_a_slow_reader_arrives_whole_and_before_the_next(loop, tmp_path):
    log = _log(tmp_path)
    handler = SliceHandler(lambda: _parts(log))
    expected = _expected(_parts(log))

    async def body(server):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, limit=1 << 16)
        writer.write(api_versions_frame(1, "slices") + api_versions_frame(2, "defer")
                     + api_versions_frame(3, "slices"))
        while 2 not in handler.deferred:
            await asyncio.sleep(0.001)
        first = asyncio.ensure_future(_read_answer(reader, 1, pause=0.002))
        await asyncio.sleep(0.02)  # the first answer is on its way (the socket full, resumed on writable)
        handler.resolve(2)  # the second becomes ready meanwhile: it must wait for the first
        assert await first == expected
        assert await _cid_of_next_answer(reader) == 2
        assert await _read_answer(reader, 3) == expected
        writer.close()
    _serve(loop, handler, log, body)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_client_gone_mid_answer_closes_cleanly_and_leaks_no_descriptor(loop, tmp_path):
    log = _log(tmp_path)
    handler = SliceHandler(lambda: _parts(log))

    async def body(server):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(api_versions_frame(1, "slices"))
        await _read_answer(reader, 1)  # the segments' maps and slice descriptors exist now
        writer.close()
        await asyncio.sleep(0.1)
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(api_versions_frame(1, "slices"))
            await reader.readexactly(1 << 16)  # some of it, then away
            writer.transport.abort()
        for _ in range(200):
            if not server._connections and len(os.listdir("/proc/self/fd")) <= before:
                break
            await asyncio.sleep(0.02)
        assert not server._connections
        assert len(os.listdir("/proc/self/fd")) <= before
        # and the server still answers
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(api_versions_frame(9, "ok"))
        assert await _cid_of_next_answer(reader) == 9
        writer.close()
    _serve(loop, handler, log, body)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_an_answer_built_before_a_truncation_carries_the_bytes_it_read(loop, tmp_path):
    """A follower's fetch answer waits in its connection's queue; the log is cut under it and
    other records take the offsets. The answer still carries what it read."""
    log = _log(tmp_path)
    built = []
    handler = SliceHandler(lambda: built.append(_parts(log)) or built[-1], hold=True)

    async def body(server):
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(api_versions_frame(1, "slices"))
        while handler.waiting is None:
            await asyncio.sleep(0.01)
        expected = _expected(built[0])
        log.truncate_to(log.end_offset // 2)
        for _ in range(6):
            log.append(build_batch([b"\xff" * 1000] * 500), leader_epoch=1)
        log.flush()
        handler.waiting.set_result(None)
        assert await _read_answer(reader, 1) == expected
        writer.close()
    _serve(loop, handler, log, body)


def test_over_tls_the_slices_are_read_into_memory_and_arrive_whole(tmp_path):
    ca = CertAuthority()
    cert = ca.issue("localhost", server=True)
    given = {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": cert.cert_pem(),
             "ssl.keystore.key": cert.key_pem(), "ssl.truststore.type": "PEM",
             "ssl.truststore.certificates": ca.cert_pem()}
    log = _log(tmp_path, mb=6)
    handler = SliceHandler(lambda: _parts(log))
    expected = _expected(_parts(log))

    async def body(server):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(cadata=ca.cert_pem())
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx,
                                                       server_hostname="localhost")
        writer.write(api_versions_frame(1, "slices"))
        assert await _read_answer(reader, 1) == expected
        writer.close()
    _serve("uvloop", handler, log, body, listener="SSL", ssl_context=server_context(given, "SSL"))


def test_send_parts_goes_on_where_the_socket_stopped(tmp_path):
    """The writer on its own: a non-blocking socket pair, a reader that drains it in steps;
    every resumption continues at the right part and byte."""
    import socket
    log = _log(tmp_path, mb=6)
    parts = _parts(log)
    expected = _expected(parts)
    a, b = socket.socketpair()
    a.setblocking(False)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    got, stops = bytearray(), 0
    i, off = 0, 0
    while i < len(parts):
        i, off = send_parts(a.fileno(), parts, i, off)
        if i < len(parts):
            stops += 1
            got += b.recv(1 << 20)
    a.close()
    while True:
        chunk = b.recv(1 << 20)
        if not chunk:
            break
        got += chunk
    assert stops > 5 and bytes(got) == expected
    # what the transport would get instead: the rest, in memory, from the same point
    for cut in (1, 3, 5):
        rest = remainder(parts, cut, 17)
        assert b"".join(bytes(p) for p in rest) == b"".join(bytes(p) for p in in_memory(parts[cut:]))[17:]
    log.close()
