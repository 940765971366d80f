"""asyncio TCP server speaking Kafka's framing: each connection is an asyncio Protocol that
decodes and dispatches requests as bytes arrive; answers are written in order by a flush
run once at the end of the I/O callback that completed them (TurnQueue; no reader or writer
task).

Requests on a connection may be handled concurrently (a long-poll Fetch does not block a
Vote), but responses are written in request order, as Kafka guarantees. At most
``max_in_flight`` requests per connection are pending; beyond that the connection is not
read (back-pressure). An ``AdmissionGate`` may also hold requests of some APIs (the
controller's writes while its queue is full): a connection whose next request is held stops
there, and is not read, until the gate reopens. Bad input never escapes a connection: a negative or oversize frame,
an unknown API key or version, or an undecodable body closes that connection with one log
line; a handler exception is answered with an error response when the response type has
an error code, otherwise the connection is closed. The node keeps serving either way.

Connection limits, as Kafka's SocketServer: a connection from an address that already has
``max.connections.per.ip`` (or its ``max.connections.per.ip.overrides`` entry) open is
closed at once, before anything is read; a connection with no request in flight and no
bytes in either direction for ``connections.max.idle.ms`` is closed (negative disables).

TLS (``ssl_context``): the loop's TLS layer runs the handshake (in steps, as bytes arrive)
before the connection is made, bounded by ``TLS_HANDSHAKE_TIMEOUT_S``; a failure closes that
connection with one (rate-limited) log line (``tls.watch_handshakes``). Connections count
against ``max.connections.per.ip`` once their handshake is done.

SASL (``sasl``, kraft.server.sasl): until a connection has authenticated it may send only
ApiVersions, SaslHandshake and SaslAuthenticate, in frames of at most 512 KiB (Kafka's
sasl.server.max.receive.size); anything else closes it. A failed authentication is answered,
then the connection stops reading and closes after ``connection.failed.authentication.delay.ms``. The client certificate's subject becomes the
connection's principal (``RequestContext.principal``; ``User:ANONYMOUS`` otherwise).

This module knows nothing about Raft or the controller; it calls a :class:`RequestHandler`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import time

from kraft.errors import ErrorCode, KraftError, ProtocolError, UnsupportedVersionError
from kraft.server.connection_limits import THROTTLED, ConnectionCaps, canonical_address
from kraft.server.request_context import ANONYMOUS, AdmissionGate, RequestContext, RequestHandler, error_response
from kraft.server.sasl import (MAX_RECEIVE_SIZE, SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslSession,
                               after_authentication, sasl_gate, sasl_raw_token)
from kraft.server.tls import peer_principal as tls_peer_principal, watch_handshakes
from kraft.server.turn import turn_queue
from kraft.server.zero_copy import HAS_SENDFILE, DirectWriter, has_slices, in_memory
from kraft.protocol import (DEFAULT_MAX_FRAME_BYTES, EncodedBody, EncodedParts, FrameDecoder, RequestHeader, Response,
                            decode_request, encode_response, encode_response_parts, response_version)
from kraft.protocol.framing import CLOSE_CONNECTION

log = logging.getLogger("kraft.network")

#: Connections closed for bad input get a log line each up to this many per second and per
#: listener; beyond it they are counted (kraft_rejected_connections_total) and summed up in one line,
#: so a flood of hostile frames cannot fill the disk with log lines.
REJECT_LOG_BURST = 10
# What a handler may return as an answer that is already known (anything else is awaited).
_IMMEDIATE = (Response, EncodedBody, EncodedParts)
_IMMEDIATE_BY_TYPE: dict = {}
#: A TLS handshake not finished within this many seconds closes the connection: a client that
#: connects and sends nothing (or half a ClientHello) holds a socket, never the loop.
TLS_HANDSHAKE_TIMEOUT_S = 10.0


def _is_immediate(result) -> bool:
    """isinstance(result, _IMMEDIATE), remembered per type: against the schema's Response
    class it takes the metaclass's slow path, twice per request."""
    t = type(result)
    known = _IMMEDIATE_BY_TYPE.get(t)
    if known is None:
        known = _IMMEDIATE_BY_TYPE[t] = isinstance(result, _IMMEDIATE)
    return known


class _Connection(asyncio.Protocol):
    """Requests are decoded and dispatched in the loop's read callback (no reader task: an
    inbound request costs no future and no extra loop turn); answers leave in request order
    without a task of their own: an answer known at once, or a Reply's completion, queues
    one flush (TurnQueue, at the end of the I/O callback), which writes every answer ready
    at the head of the queue in one syscall (the many produce answers a single commit completes go out
    together). Past ``max_in_flight`` unanswered requests, decoded frames wait in ``held``
    and the transport stops reading until answers leave."""

    def __init__(self, server: "KafkaServer"):
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.peer = "?:0"
        self.address = "?"
        self.loop = asyncio.get_running_loop()
        self._turn = turn_queue(self.loop)
        self.decoder = FrameDecoder(server.max_frame_bytes)
        self.held: collections.deque = collections.deque()  # frames read while no slot was free
        self._pumping = False
        self._paused = False  # reading paused for back-pressure
        self._gate_waiting = False  # waiting for the server's admission gate to reopen
        self._eof = False  # the client half-closed: answer what it asked, then close
        self.pending: collections.deque = collections.deque()  # (header, answer or future), in order
        self.closed = False
        self.unanswered = 0  # requests dispatched whose response is not written yet
        self.last_active = time.monotonic()  # last bytes read or written (idle expiry)
        self._idle_timer: asyncio.TimerHandle | None = None
        self._flush_scheduled = False
        self._draining = False  # the transport's buffer is over the limit: hold answers
        self.principal = ANONYMOUS
        self.sasl = SaslSession(server.sasl) if server.sasl is not None else None
        if self.sasl is not None:
            self.decoder.max_frame_bytes = min(server.max_frame_bytes, MAX_RECEIVE_SIZE)
        self._closing = False  # answered a failed authentication: read nothing more, close soon
        self._tls = server.ssl_context is not None
        self._direct: DirectWriter | None = None  # answers' file slices go out with sendfile
        self._direct_refused = False
        self._muted_until = self._unmute_at = 0.0  # no request dispatched before (quotas); its timer

    # --- asyncio.Protocol --------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.address = canonical_address(str(peer[0]))
        if not self.server._admit(self, transport):
            self.closed = True
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls:
            self.principal = tls_peer_principal(transport.get_extra_info("ssl_object"))
        # A slow reader is held at 1 MiB of unwritten answers (pause_writing below).
        transport.set_write_buffer_limits(high=1 << 20)
        self._arm_idle_timer()

    def data_received(self, data: bytes) -> None:
        if self.closed or self._closing:
            return
        self.last_active = time.monotonic()
        try:
            frames = self.decoder.feed(data)
        except ProtocolError as exc:
            self._reject(f"bad frame: {exc}")
            return
        try:
            self.held.extend(frames)
            self._pump()
        except Exception:  # never let one connection's failure escape
            log.exception("connection from %s failed", self.peer)
            self._close()
        # The appends these requests queued, then the answers they completed (here and on
        # other connections), run now rather than a loop turn later each.
        self._turn.run()

    def eof_received(self) -> bool:
        self._eof = True
        self._close_if_done()
        # Keep the transport open to write the answers still owed (TLS has no half-close).
        return not self._tls

    def connection_lost(self, exc) -> None:
        self._close()
        self.server._forget(self)
        if self.server.on_disconnect is not None:
            self.server.on_disconnect(self.peer)

    def pause_writing(self) -> None:
        self._draining = True

    def resume_writing(self) -> None:
        self._draining = False
        if not self.closed:
            self._schedule_flush()

    # --- reading -----------------------------------------------------------------------------
    def _pump(self) -> None:
        """Dispatch held frames while slots are free; pause reading when one is not."""
        if self._pumping:
            return  # an answer left during a dispatch: the running pump goes on
        self._pumping = True
        try:
            held, limit, gate = self.held, self.server.max_in_flight, self.server.admission
            while held and not self.closed and self.unanswered < limit:
                if self._muted_until and self._muted():
                    break
                if gate is not None and self._gated_by(gate, held[0]):
                    break
                if not self._dispatch(held.popleft()):
                    return
        finally:
            self._pumping = False
        if self.closed:
            return
        if self.held and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        elif not self.held and self._paused:
            self._paused = False
            self.transport.resume_reading()
        self._close_if_done()

    def _gated_by(self, gate, frame) -> bool:
        """Does the admission gate hold the next request (read from its header's API key)?
        Then this connection stops dispatching, in order, until the gate reopens; connections
        that never carry such requests (Raft peers) are never held."""
        if len(frame) < 2 or not gate.holds((frame[0] << 8) | frame[1]):
            return False
        if not self._gate_waiting:
            self._gate_waiting = True
            gate.wait(self._gate_opened)
        return True

    def mute_for(self, ms: int) -> None:
        self._muted_until = max(self._muted_until, self.loop.time() + ms / 1000)

    def _muted(self) -> bool:
        # within a millisecond counts as over: asyncio may run a timer up to its clock resolution early
        if self.loop.time() + 0.001 >= self._muted_until:
            self._muted_until = 0.0
            return False
        if self._unmute_at != self._muted_until:  # one timer per mute; _pump is safe once closed
            self._unmute_at = self._muted_until
            self.loop.call_at(self._muted_until, self._pump)
        return True

    def _gate_opened(self) -> None:
        self._gate_waiting = False
        if not self.closed:
            self._pump()

    def _close_if_done(self) -> None:
        if self._eof and not self.held and not self.pending and not self.closed and not self._writing_direct():
            self._close()

    def _dispatch(self, frame: bytes) -> bool:
        """Decode and hand one request to the handler (no coroutine per request)."""
        srv = self.server
        sasl = self.sasl
        if sasl is not None and sasl.state == "raw":
            return sasl_raw_token(self, frame)
        try:
            header, request = decode_request(frame)
        except (ProtocolError, UnsupportedVersionError) as exc:
            hdr = getattr(exc, "header", None)
            what = f"api_key={hdr.api_key} v{hdr.api_version}" if hdr else "unreadable header"
            self._reject(f"{type(exc).__name__} ({what}): {exc}")
            return False
        api_key = header.api_key
        if sasl is not None:
            gated = sasl_gate(self, header, request)
            if gated is not None:
                return gated
        elif api_key == SASL_HANDSHAKE or api_key == SASL_AUTHENTICATE:
            return self._queue_answer(header, after_authentication(api_key))
        srv.requests_total += 1
        self.unanswered += 1
        ctx = RequestContext(header, srv.listener_name, self.peer, time.monotonic_ns(), self.principal, self.mute_for)
        try:
            result = srv.handler.handle(ctx, request)
        except Exception as exc:  # a handler bug must not take the node down
            result = self._handler_failed(header, exc)
            if result is False:
                return False
        if result is None:
            self._answer_left()
            return True
        if result is CLOSE_CONNECTION:
            self._answer_left()
            log.info("closing the connection from %s on %s: its acks=0 %s failed (as Kafka does)", self.peer,
                     srv.listener_name, type(request).__name__)
            self._eof = True  # read nothing more; close once the answers owed are written
            self.held.clear()
            self.transport.pause_reading()
            self._close_if_done()
            return False
        if asyncio.iscoroutine(result):
            result = asyncio.ensure_future(result)
        self.pending.append((header, result))
        if _is_immediate(result):
            self._schedule_flush()
        else:
            result.add_done_callback(self._answered)
        return True

    def _queue_answer(self, header: RequestHeader, response) -> bool:
        self.server.requests_total += 1
        self.unanswered += 1
        self.pending.append((header, response))
        self._schedule_flush()
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
        if self.held and not self.closed:
            self._pump()

    def _answered(self, fut) -> None:
        if not self.closed:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        # Once per I/O callback (TurnQueue): every answer completed meanwhile shares one write.
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._turn.soon_write(self._flush)

    def _flush(self) -> None:
        """Write every answer that is ready at the head of the queue, in order."""
        self._flush_scheduled = False
        if self.closed or self._draining or self._writing_direct():
            return
        frames = []
        views = slices = False
        q = self.pending
        while q:
            header, result = q[0]
            if _is_immediate(result):
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
                if type(response) is EncodedParts:  # views and slices of log files: never joined
                    frames.extend(encode_response_parts(header, header.api_key, header.api_version, response))
                    views = True
                    slices = slices or has_slices(response)
                else:
                    # A large records value (a Raft Fetch answer) is spliced in by the
                    # write, not copied into the frame.
                    frame = encode_response(header, header.api_key, header.api_version, response, splice=True)
                    if type(frame) is list:
                        frames.extend(frame)
                        views = True
                    else:
                        frames.append(frame)
            except Exception:
                log.exception("cannot encode response to api_key=%s for %s", header.api_key, self.peer)
                self._close()
                return
        if frames:
            try:
                if slices:
                    transport = self.transport
                    # Straight to the socket only while the transport holds nothing (bytes would
                    # overtake it) and has not begun to close.
                    if not transport.get_write_buffer_size() and not transport.is_closing() \
                            and self._direct_writer() is not None:
                        self._direct.write(frames, transport)
                        return
                    transport.writelines(in_memory(frames))
                elif views:  # one writev (uvloop) of the buffers as they are
                    self.transport.writelines(frames)
                else:
                    self.transport.write(frames[0] if len(frames) == 1 else b"".join(frames))
                self.last_active = time.monotonic()
            except (ConnectionError, OSError, KraftError) as exc:
                if isinstance(exc, KraftError):  # a slice's file could not be read
                    log.error("closing the connection from %s: %s", self.peer, exc)
                self._close()
                return
        self._close_if_done()

    def _direct_writer(self) -> DirectWriter | None:
        """The connection's sendfile writer, made with its first answer that carries file
        slices (a descriptor per connection that serves Fetch, not per connection); None on
        TLS, without sendfile, or out of descriptors (the slices are then read into memory)."""
        if self._direct is None and not self._tls and HAS_SENDFILE and not self._direct_refused:
            sock = self.transport.get_extra_info("socket")
            try:
                self._direct = DirectWriter(sock.fileno(), self._sent_direct, self._direct_failed)
            except (OSError, AttributeError):
                self._direct_refused = True
        return self._direct

    def _writing_direct(self) -> bool:
        return self._direct is not None and self._direct.busy

    def _sent_direct(self) -> None:
        self.last_active = time.monotonic()
        self._schedule_flush()  # the answers that became ready meanwhile
        self._close_if_done()

    def _direct_failed(self, exc) -> None:
        if isinstance(exc, KraftError):
            log.error("closing the connection from %s: %s", self.peer, exc)
        self._close()

    def _reject(self, why: str) -> None:
        self.server.rejected(self.peer, why)
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
            if self._direct is not None:  # before the transport's: it keeps the socket open
                self._direct.close()
            if self.transport is not None:
                self.transport.close()
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
        self.held.clear()
        # Pending answers will never be written: cancel what they wait for (a long-poll
        # Fetch, an uncommitted Produce).
        while self.pending:
            _, result = self.pending.popleft()
            if not isinstance(result, _IMMEDIATE) and hasattr(result, "cancel"):
                result.cancel()


class KafkaServer:
    """Listens on one (host, port) for one listener name and serves ``handler``.

    ``max_connections_per_ip_overrides`` maps a host name or address to its own cap; names
    are resolved once at :meth:`start`, as Kafka resolves them when it reads its config."""

    def __init__(self, handler: RequestHandler, host: str, port: int, *, listener_name: str,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, max_in_flight: int = 64,
                 connections_max_idle_ms: int = 600_000, max_connections_per_ip: int = 2**31 - 1,
                 max_connections_per_ip_overrides: dict[str, int] | None = None,
                 admission: AdmissionGate | None = None, on_disconnect=None, ssl_context=None, sasl=None,
                 failed_authentication_delay_ms: int = 100, quota_samples: int = 11, quota_window_ms: int = 1000):
        self.handler = handler
        self.ssl_context = ssl_context  # an ssl.SSLContext: TLS on every connection (SSL, SASL_SSL)
        if ssl_context is not None:
            watch_handshakes(ssl_context, self._handshake_failed)
        self.sasl = sasl  # a kraft.server.sasl.SaslListener: SASL_PLAINTEXT, SASL_SSL
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        self.auth_failed_total = 0
        self.expired_sessions_total = 0  # closed: a request after the SASL session's lifetime
        self.reauthentications_total = 0  # KIP-368 logins on authenticated connections
        self.on_disconnect = on_disconnect  # called with the peer ("host:port") of each closed connection
        self.admission = admission
        self.host = host
        self.port = port
        self.listener_name = listener_name
        self.max_frame_bytes = max_frame_bytes
        self.max_in_flight = max_in_flight
        self.connections_max_idle_ms = connections_max_idle_ms
        self.caps = ConnectionCaps(max_connections_per_ip, max_connections_per_ip_overrides,
                                   samples=quota_samples, window_ms=quota_window_ms)
        self._throttled: dict = {}  # transports of throttled connections -> their closing timer
        self.throttled_total = 0  # closed after a delay: the address was over connection_creation_rate
        self.requests_total = 0
        self.rejected_total = 0  # closed for bad input
        self.refused_total = 0  # closed at once: the address had its maximum of connections
        self.idle_closed_total = 0  # closed after connections.max.idle.ms without activity
        self.tls_failed_total = 0  # closed because the TLS handshake failed or timed out
        self._reject_second = 0  # the whole second of monotonic time the lines below were logged in
        self._reject_lines = 0
        self._rejects_unlogged = 0
        self._server: asyncio.base_events.Server | None = None
        self._connections: set = set()

    def _handshake_failed(self, reason: str) -> None:
        # The TLS layer fails a handshake before a connection (and its peer) exists here.
        self.tls_failed_total += 1
        self.rejected("a client", f"TLS handshake failed: {reason}")

    def rejected(self, peer, why: str) -> None:
        """Count a connection closed for bad input; log it, or past the burst, count it."""
        self.rejected_total += 1
        second = int(time.monotonic())
        if second != self._reject_second:
            if self._rejects_unlogged:
                log.warning("%d more connections on %s were closed for bad input without a line each",
                            self._rejects_unlogged, self.listener_name)
            self._reject_second, self._reject_lines, self._rejects_unlogged = second, 0, 0
        if self._reject_lines < REJECT_LOG_BURST:
            self._reject_lines += 1
            log.warning("closing connection from %s on %s: %s", peer, self.listener_name, why)
            if self._reject_lines == REJECT_LOG_BURST:
                log.warning("more connections closed for bad input on %s this second are counted "
                            "(kraft_rejected_connections_total), not logged", self.listener_name)
        else:
            self._rejects_unlogged += 1

    async def start(self, serving: bool = True) -> None:
        """Bind the listening socket; accept connections now, or (``serving=False``) only
        after ``start_serving`` (connections are refused meanwhile, the port is known)."""
        loop = asyncio.get_running_loop()
        await self.caps.resolve(loop)
        tls = {}
        if self.ssl_context is not None:
            tls = dict(ssl=self.ssl_context, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        self._server = await loop.create_server(lambda: _Connection(self), self.host or None, self.port,
                                                reuse_address=True, start_serving=serving, **tls)
        self.port = self._server.sockets[0].getsockname()[1]

    async def start_serving(self) -> None:
        if self._server is not None:
            await self._server.start_serving()

    def _admit(self, conn: _Connection, transport) -> bool:
        """Count ``conn`` against its address's limits; False when it may not be served: the
        address has its maximum open (closed at once, counted as refused) or is over its
        connection_creation_rate (not read from, closed after the throttle time)."""
        verdict = self.caps.admit(conn.address, int(time.monotonic() * 1000))
        if verdict is None:
            self._connections.add(conn)
            return True
        kind, n = verdict
        if kind == THROTTLED:
            self.throttled_total += 1
            log.debug("throttling connection from %s on %s: connection_creation_rate exceeded, closing in %d ms",
                      conn.address, self.listener_name, n)
            transport.pause_reading()
            handle = asyncio.get_running_loop().call_later(n / 1000, self._end_throttle, transport)
            self._throttled[transport] = handle
            return False
        self.refused_total += 1
        log.info("refused connection from %s on %s: the address already has its maximum of %d connections",
                 conn.address, self.listener_name, n)
        transport.close()
        return False

    def _end_throttle(self, transport) -> None:
        self._throttled.pop(transport, None)
        transport.close()

    def _forget(self, conn: _Connection) -> None:
        if conn not in self._connections:
            return  # refused at once: never counted
        self._connections.discard(conn)
        self.caps.release(conn.address)

    def export_counters(self, metrics) -> None:
        """Copy the connection counters into a NodeMetrics (called before each render)."""
        metrics.rejected_connections.value = self.rejected_total
        metrics.refused_connections.value = self.refused_total
        metrics.idle_closed_connections.value = self.idle_closed_total
        metrics.throttled_connections.value = self.throttled_total

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for transport, handle in list(self._throttled.items()):
                handle.cancel()
                transport.close()
            self._throttled.clear()
            for conn in list(self._connections):
                conn._close()  # pending answers are dropped, their waits cancelled
            await asyncio.sleep(0)  # let the transports report connection_lost
            await self._server.wait_closed()
            self._server = None

