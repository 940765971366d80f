"""asyncio TCP server speaking Kafka's framing: one reader coroutine per connection; answers
are written in order by a flush scheduled once per loop turn (no writer task).

Requests on a connection may be handled concurrently (a long-poll Fetch does not block a
Vote), but responses are written in request order, as Kafka guarantees. At most
``max_in_flight`` requests per connection are pending; beyond that the connection is not
read (back-pressure). Bad input never escapes a connection: a negative or oversize frame,
an unknown API key or version, or an undecodable body closes that connection with one log
line; a handler exception is answered with an error response when the response type has
an error code, otherwise the connection is closed. The node keeps serving either way.

Connection limits, as Kafka's SocketServer: a connection from an address that already has
``max.connections.per.ip`` (or its ``max.connections.per.ip.overrides`` entry) open is
closed at once, before anything is read; a connection with no request in flight and no
bytes in either direction for ``connections.max.idle.ms`` is closed (negative disables).

This module knows nothing about Raft or the controller; it calls a :class:`RequestHandler`.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import logging
import socket
import time
from dataclasses import dataclass
from typing import Awaitable, Protocol, Union

from kraft.config import parse_connection_overrides
from kraft.errors import ErrorCode, KraftError, ProtocolError, UnsupportedVersionError
from kraft.protocol import (DEFAULT_MAX_FRAME_BYTES, EncodedBody, EncodedParts, FrameDecoder, RequestHeader, Response,
                            decode_request, encode_response, encode_response_parts, response_class,
                            response_version)

log = logging.getLogger("kraft.network")
# What a handler may return as an answer that is already known (anything else is awaited).
_IMMEDIATE = (Response, EncodedBody, EncodedParts)


@dataclass
class RequestContext:
    header: RequestHeader
    listener: str
    peer: str  # "host:port" of the client
    received_ns: int


class RequestHandler(Protocol):
    def handle(self, ctx: RequestContext, request) -> Union[Response, Awaitable[Response], None]:
        """Return the response, an awaitable of it, or None to send nothing."""


def error_response(api_key: int, version: int, code: int) -> Response | None:
    """A response carrying ``code`` at top level, if that response type has one in ``version``."""
    cls = response_class(api_key)
    names = {f.name for f in cls.FIELDS if version in f.versions}
    if "error_code" not in names:
        return None
    return cls(error_code=int(code))


class _Connection:
    """Requests are read by one coroutine; answers leave in request order without a task of
    their own: an answer known at once, or a future's completion, schedules one flush per
    loop turn, which writes every answer ready at the head of the queue in one syscall (the
    many produce answers a single commit completes go out together)."""

    def __init__(self, server: "KafkaServer", reader, writer):
        self.server = server
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.loop = asyncio.get_running_loop()
        # The reader stops reading while max_in_flight requests are unanswered; it waits on
        # this future, completed when an answer leaves.
        self._slot_free: asyncio.Future | None = None
        self.pending: collections.deque = collections.deque()  # (header, answer or future), in order
        self.closed = False
        self.unanswered = 0  # requests read whose response is not written yet
        self.last_active = time.monotonic()  # last bytes read or written (idle expiry)
        self._idle_timer: asyncio.TimerHandle | None = None
        self._flush_scheduled = False
        self._draining: asyncio.Future | None = None  # the transport's buffer is over the limit
        self._all_written: asyncio.Future | None = None  # set by run() when the reader is done

    async def run(self) -> None:
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._arm_idle_timer()
        try:
            await self._read_requests()
            # The client stopped sending (or half-closed): answer what it already asked.
            if self.pending and not self.closed:
                self._all_written = self.loop.create_future()
                self._schedule_flush()
                await self._all_written
        except asyncio.CancelledError:
            self._close()  # server shutdown: pending answers are dropped
            raise
        finally:
            self._close()

    async def _read_requests(self) -> None:
        decoder = FrameDecoder(self.server.max_frame_bytes)
        while not self.closed:
            try:
                data = await self.reader.read(256 * 1024)
            except (ConnectionError, OSError):
                return
            if not data:
                return
            self.last_active = time.monotonic()
            try:
                frames = decoder.feed(data)
            except ProtocolError as exc:
                self._reject(f"bad frame: {exc}")
                return
            for frame in frames:
                while self.unanswered >= self.server.max_in_flight and not self.closed:
                    self._slot_free = self.loop.create_future()  # back-pressure
                    await self._slot_free
                if self.closed or not self._dispatch(frame):
                    return

    def _dispatch(self, frame: bytes) -> bool:
        """Decode and hand one request to the handler (no coroutine per request)."""
        srv = self.server
        try:
            header, request = decode_request(frame)
        except (ProtocolError, UnsupportedVersionError) as exc:
            hdr = getattr(exc, "header", None)
            what = f"api_key={hdr.api_key} v{hdr.api_version}" if hdr else "unreadable header"
            self._reject(f"{type(exc).__name__} ({what}): {exc}")
            return False
        srv.requests_total += 1
        self.unanswered += 1
        ctx = RequestContext(header, srv.listener_name, self.peer, time.monotonic_ns())
        try:
            result = srv.handler.handle(ctx, request)
        except Exception as exc:  # a handler bug must not take the node down
            result = self._handler_failed(header, exc)
            if result is False:
                return False
        if result is None:
            self._answer_left()
            return True
        if asyncio.iscoroutine(result):
            result = asyncio.ensure_future(result)
        self.pending.append((header, result))
        if isinstance(result, _IMMEDIATE):
            self._schedule_flush()
        else:
            result.add_done_callback(self._answered)
        return True

    def _handler_failed(self, header: RequestHeader, exc: Exception):
        code = exc.code if isinstance(exc, KraftError) else ErrorCode.UNKNOWN_SERVER_ERROR
        if not isinstance(exc, KraftError):
            log.exception("handler failed for api_key=%s from %s", header.api_key, self.peer)
        version = response_version(header.api_key, header.api_version)
        resp = error_response(header.api_key, version, code)
        if resp is None:
            self._reject(f"handler failed ({exc!r}) and api_key={header.api_key} has no error field")
            return False
        return resp

    def _answer_left(self) -> None:
        self.unanswered -= 1
        waiter = self._slot_free
        if waiter is not None:
            self._slot_free = None
            if not waiter.done():
                waiter.set_result(None)

    def _answered(self, fut) -> None:
        if not self.closed:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        # Once per loop turn: every answer completed in this turn shares one write.
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Write every answer that is ready at the head of the queue, in order."""
        self._flush_scheduled = False
        if self.closed or self._draining is not None:
            return
        frames = []
        views = False
        q = self.pending
        while q:
            header, result = q[0]
            if isinstance(result, _IMMEDIATE):
                response = result
            elif not result.done():
                break
            elif result.cancelled():
                self._close()  # what the answer waited for went away (shutdown)
                return
            else:
                exc = result.exception()
                response = result.result() if exc is None else self._handler_failed(header, exc)
                if response is False:
                    return
            q.popleft()
            self._answer_left()
            if response is None:
                continue
            try:
                if type(response) is EncodedParts:  # views of log files: written, never joined
                    frames.extend(encode_response_parts(header, header.api_key, header.api_version, response))
                    views = True
                else:
                    frames.append(encode_response(header, header.api_key, header.api_version, response, copy=False))
            except Exception:
                log.exception("cannot encode response to api_key=%s for %s", header.api_key, self.peer)
                self._close()
                return
        if frames:
            try:
                if views:
                    for frame in frames:
                        self.writer.write(frame)
                else:
                    self.writer.write(frames[0] if len(frames) == 1 else b"".join(frames))
                self.last_active = time.monotonic()
            except (ConnectionError, OSError):
                self._close()
                return
            if self.writer.transport.get_write_buffer_size() > 1 << 20:
                # A slow reader: hold further answers (their slots stay taken, so reading
                # stops at max_in_flight) until the transport has written this out.
                self._draining = asyncio.ensure_future(self._drain())
                return
        if not q and self._all_written is not None and not self._all_written.done():
            self._all_written.set_result(None)

    async def _drain(self) -> None:
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            self._close()
            return
        finally:
            self._draining = None
        self._schedule_flush()

    def _reject(self, why: str) -> None:
        self.server.rejected_total += 1
        log.warning("closing connection from %s on %s: %s", self.peer, self.server.listener_name, why)
        self._close()

    def _arm_idle_timer(self) -> None:
        """One timer per connection, re-armed lazily: activity only stamps ``last_active``,
        and the timer, when it fires, looks whether the connection really was idle."""
        idle_s = self.server.connections_max_idle_ms / 1000
        if idle_s < 0 or self.closed:
            return
        due = self.last_active + idle_s
        self._idle_timer = asyncio.get_running_loop().call_later(max(0.0, due - time.monotonic()),
                                                                 self._idle_check)

    def _idle_check(self) -> None:
        self._idle_timer = None
        if self.closed:
            return
        idle_s = self.server.connections_max_idle_ms / 1000
        if self.unanswered == 0 and time.monotonic() - self.last_active >= idle_s:
            self.server.idle_closed_total += 1
            log.debug("closing connection from %s on %s: idle for %d ms", self.peer,
                      self.server.listener_name, self.server.connections_max_idle_ms)
            self._close()
            return
        if self.unanswered:
            self.last_active = time.monotonic()  # a request in flight is not idleness
        self._arm_idle_timer()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
        # Pending answers will never be written: cancel what they wait for (a long-poll
        # Fetch, an uncommitted Produce).
        while self.pending:
            _, result = self.pending.popleft()
            if not isinstance(result, _IMMEDIATE) and hasattr(result, "cancel"):
                result.cancel()
        if self._draining is not None and self._draining is not asyncio.current_task():
            self._draining.cancel()
        if self._all_written is not None and not self._all_written.done():
            self._all_written.set_result(None)
        waiter, self._slot_free = self._slot_free, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)  # a reader waiting for a slot sees closed and stops


def _address(host: str) -> str:
    """The canonical text of an IP address (so ::ffff:127.0.0.1 style spellings compare)."""
    try:
        return str(ipaddress.ip_address(host.split("%", 1)[0]))
    except ValueError:
        return host


class KafkaServer:
    """Listens on one (host, port) for one listener name and serves ``handler``.

    ``max_connections_per_ip_overrides`` maps a host name or address to its own cap; names
    are resolved once at :meth:`start`, as Kafka resolves them when it reads its config."""

    def __init__(self, handler: RequestHandler, host: str, port: int, *, listener_name: str,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, max_in_flight: int = 64,
                 connections_max_idle_ms: int = 600_000, max_connections_per_ip: int = 2**31 - 1,
                 max_connections_per_ip_overrides: dict[str, int] | None = None):
        self.handler = handler
        self.host = host
        self.port = port
        self.listener_name = listener_name
        self.max_frame_bytes = max_frame_bytes
        self.max_in_flight = max_in_flight
        self.connections_max_idle_ms = connections_max_idle_ms
        self.max_connections_per_ip = max_connections_per_ip
        self._overrides_by_name = dict(max_connections_per_ip_overrides or {})
        self._cap_by_address: dict[str, int] = {}
        self._open_by_address: dict[str, int] = {}
        self.requests_total = 0
        self.rejected_total = 0  # closed for bad input
        self.refused_total = 0  # closed at once: the address had its maximum of connections
        self.idle_closed_total = 0  # closed after connections.max.idle.ms without activity
        self._server: asyncio.base_events.Server | None = None
        self._connections: set = set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for name, cap in self._overrides_by_name.items():
            try:
                infos = await loop.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
            except OSError as exc:
                log.warning("max.connections.per.ip.overrides: cannot resolve %s (%s); entry ignored", name, exc)
                continue
            for info in infos:
                self._cap_by_address[_address(info[4][0])] = cap
        self._server = await asyncio.start_server(self._accept, self.host or None, self.port,
                                                  reuse_address=True, limit=1 << 20)
        self.port = self._server.sockets[0].getsockname()[1]

    def _admit(self, address: str) -> bool:
        cap = self._cap_by_address.get(address, self.max_connections_per_ip)
        n = self._open_by_address.get(address, 0)
        if n >= cap:
            return False
        self._open_by_address[address] = n + 1
        return True

    def _release(self, address: str) -> None:
        n = self._open_by_address.get(address, 0) - 1
        if n > 0:
            self._open_by_address[address] = n
        else:
            self._open_by_address.pop(address, None)

    async def _accept(self, reader, writer) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        address = _address(str(peer[0]))
        if not self._admit(address):
            self.refused_total += 1
            log.info("refused connection from %s on %s: the address already has its maximum of %d connections",
                     address, self.listener_name, self._cap_by_address.get(address, self.max_connections_per_ip))
            writer.close()
            return
        conn = _Connection(self, reader, writer)
        task = asyncio.current_task()
        self._connections.add(task)
        try:
            await conn.run()
        except asyncio.CancelledError:
            conn._close()
        except Exception:  # never let one connection's failure escape
            log.exception("connection from %s failed", conn.peer)
            conn._close()
        finally:
            self._connections.discard(task)
            self._release(address)

    def export_counters(self, metrics) -> None:
        """Copy the connection counters into a NodeMetrics (called before each render)."""
        metrics.rejected_connections.value = self.rejected_total
        metrics.refused_connections.value = self.refused_total
        metrics.idle_closed_connections.value = self.idle_closed_total

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None


def connection_limits(cfg) -> dict:
    """KafkaServer keyword arguments from a NodeConfig's connection settings.
    ``queued.max.requests`` (Kafka: the requests its network threads queue before they stop
    reading, 500) bounds here the requests read from one connection and not yet answered."""
    return dict(max_in_flight=cfg.int("queued.max.requests"),
                connections_max_idle_ms=cfg.int("connections.max.idle.ms"),
                max_connections_per_ip=cfg.int("max.connections.per.ip"),
                max_connections_per_ip_overrides=parse_connection_overrides(
                    "max.connections.per.ip.overrides", cfg.values["max.connections.per.ip.overrides"]))
