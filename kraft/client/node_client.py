"""asyncio Kafka-protocol client: one connection to one node, pipelined requests.

Correlation ids match responses to requests; each request has a timeout, after which it
fails with :class:`RequestTimeoutError` and the connection is closed (a late response on
that connection can then never be mistaken for another's). Connection attempts back off
exponentially from ``retry_backoff_ms`` to ``retry_backoff_max_ms`` with jitter. At most
``max_in_flight`` requests are outstanding; more wait for a slot. TCP_NODELAY is set.
Every failure reaches the caller as a :class:`NetworkError` subclass; nothing here retries
a request (the caller decides: Raft has its own rules, and a timed-out write is
indeterminate, not failed).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import random
import socket
import struct
import time

from kraft.client.sasl_client import SaslAuthenticationError
from kraft.errors import (KraftError, NetworkError, PeerGoneError, ProtocolError, RequestTimeoutError,
                          UnsupportedVersionError)
from kraft.protocol import FrameDecoder, decode_response, encode_request, peek_correlation_id, request_class

log = logging.getLogger("kraft.client")
_CORRELATION = struct.Struct(">i")
_REUSED_FRAMES = 16  # request frames kept for reuse (see NodeClient.request)
# A write can fail as an OSError, or (uvloop) as a RuntimeError when the transport closed
# itself after a socket error and connection_lost has not run yet.
_WRITE_FAILED = (ConnectionError, OSError, RuntimeError)


class _Callback:
    """The part of a future NodeClient uses (``done``, ``set_result``, ``set_exception``),
    delivering the outcome to ``on_done(response, error)`` at once (``request_nowait``). A
    failing callback is logged: it must not end the read loop that delivered the answer."""

    __slots__ = ("on_done", "timer", "_done")

    def __init__(self, on_done):
        self.on_done = on_done
        self.timer = None
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, body) -> None:
        self._finish(body, None)

    def set_exception(self, exc: BaseException) -> None:
        self._finish(None, exc)

    def _finish(self, body, exc) -> None:
        if self._done:
            return
        self._done = True
        if self.timer is not None:
            self.timer.cancel()
        try:
            self.on_done(body, exc)
        except Exception:  # noqa: BLE001 - a caller's bug, not the connection's
            log.exception("request callback failed")


class _Held:
    """A request registered by ``NodeClient.hold_nowait``, waiting for ``release``."""

    __slots__ = ("writer", "frame", "cid", "api_key", "timeout_ms")

    def __init__(self, writer, frame, cid: int, api_key: int, timeout_ms: int | None):
        self.writer, self.frame, self.cid, self.api_key, self.timeout_ms = writer, frame, cid, api_key, timeout_ms


class _Reading(asyncio.Protocol):
    """The connection's read side: frames are decoded and delivered as bytes arrive, in
    the loop's read callback (a reader task would cost a future and one more loop turn per
    answer, on the path of every Raft round trip)."""

    def __init__(self, client: "NodeClient"):
        self.client = client
        self.transport = None
        self.decoder = FrameDecoder(client.max_frame_bytes, large_frames_in_place=True)

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            for frame in self.decoder.feed(data):
                self.client._deliver(frame)
        except (ProtocolError, UnsupportedVersionError) as exc:
            log.warning("closing connection to %s: %s", self.client.address, exc)
            self.client._lost(self.transport, NetworkError(f"bad response from {self.client.address}: {exc}"))

    def eof_received(self) -> bool:
        return False  # close: connection_lost follows

    def connection_lost(self, exc) -> None:
        address = self.client.address
        if exc is None:
            error = PeerGoneError(f"connection to {address} closed by the peer")
        elif isinstance(exc, ConnectionResetError):
            error = PeerGoneError(f"connection to {address} reset: {exc}")
        else:
            error = NetworkError(f"connection to {address} failed: {exc}")
        self.client._lost(self.transport, error)


class ConnectionRefused(PeerGoneError):
    """Nothing listens at the address (the connect got RST): known at once, not a timeout."""


class NodeClient:
    def __init__(self, host: str, port: int, *, client_id: str = "kraft", request_timeout_ms: int = 2000,
                 connect_timeout_ms: int = 2000, retry_backoff_ms: int = 20,
                 retry_backoff_max_ms: int = 1000, max_in_flight: int = 16,
                 max_frame_bytes: int = 100 * 1024 * 1024, rng: random.Random | None = None,
                 ssl_context=None, sasl=None):
        self.host, self.port = host, port
        self.ssl_context = ssl_context  # client-side TLS (an SSL listener between nodes); None: plaintext
        self.sasl = sasl  # a kraft.client.sasl_client.SaslLogin run on every new connection first
        self._auth_answer: asyncio.Future | None = None  # the login's answer being waited for
        # KIP-368: a login with a session lifetime is renewed on the same connection before it
        # ends; meanwhile new requests wait (the server takes only the login until it is done).
        self._reauth_gate: asyncio.Future | None = None
        self._reauth_due = False
        self._reauth_task: asyncio.Task | None = None  # held: the loop keeps only weak references
        self.reauthentications = 0
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000
        self.connect_timeout = connect_timeout_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.retry_backoff_max = retry_backoff_max_ms / 1000
        self.max_frame_bytes = max_frame_bytes
        self.max_in_flight = max_in_flight
        self._free = max_in_flight  # request slots (see request)
        self._slot_waiters: collections.deque = collections.deque()
        self._rng = rng or random.Random()
        self._ids = itertools.count(1)
        self._writer: asyncio.Transport | None = None  # the connection's transport
        self._connecting: asyncio.Future | None = None
        self._waiting: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._failures = 0
        self._next_attempt = 0.0
        self._last_connect_error: BaseException | None = None
        self._closed = False
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._frames: dict = {}  # (reuse key, version) -> (encoded frame, api key)
        # Asked once (each ask is a getpid): a client belongs to one loop, as its transport does.
        self._loop: asyncio.AbstractEventLoop | None = None
        # (deadline, correlation id, timeout) of requests, in the order sent,
        # watched by one timer instead of a timer per request (see _watch_deadline).
        self._deadlines: collections.deque = collections.deque()
        self._deadline_timer: asyncio.TimerHandle | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def request(self, message, version: int, timeout_ms: int | None = None, *, reuse_key=None, fast=None):
        """Send ``message`` at ``version`` and return the decoded response body.

        With ``reuse_key`` (hashable, naming what the request holds), the encoded frame is
        kept (the last few keys) and sent again with only its correlation id replaced;
        ``message`` may then be a callable making the request, called on a miss only. For a
        caller that sends the same request many times (a writer's fixed batch).

        With ``fast``, ``fast(frame)`` sees the response frame first (the correlation id
        onwards) and returns what ``request`` returns, or None to have it decoded as usual:
        for a caller that recognises its common answer without building message objects."""
        timeout = self.request_timeout if timeout_ms is None else timeout_ms / 1000
        loop = self._loop or self._running_loop()
        deadline = time.monotonic() + timeout  # asyncio's clock (uvloop's: in whole ms)
        # A slot: a counter while one is free (an asyncio.Semaphore cost ~1.5 µs a request).
        if self._free > 0 and not self._slot_waiters:
            self._free -= 1
        else:
            await self._wait_for_slot(loop)
        try:
            if self._writer is None:
                await self._ensure_connected(deadline)
            while self._reauth_gate is not None:  # the connection is logging in again
                await asyncio.shield(self._reauth_gate)
                if self._writer is None:
                    await self._ensure_connected(deadline)
            cid = next(self._ids) & 0x7FFFFFFF
            if reuse_key is None:
                frame = encode_request(message, version, cid, self.client_id)
                api_key = type(message).API_KEY
            else:
                frame, api_key = self._reused_frame(reuse_key, message, version, cid)
            fut = loop.create_future()
            idle = not self._waiting and not self._out
            self._waiting[cid] = (fut, api_key, version, fast)
            timer = None
            if not self._watch_deadline(loop, deadline, cid, timeout):
                # A timer callback rather than wait_for: no task per request.
                timer = loop.call_later(max(0.0, deadline - time.monotonic()), self._timed_out, cid, api_key, timeout)
            if idle:  # nothing to coalesce with (one request at a time): it leaves now
                self._send_now(loop, frame)
            else:  # pipelined: the frames of this loop turn leave in one write
                self._queue_write(frame)
            try:
                return await fut
            finally:
                if timer is not None:
                    timer.cancel()
        finally:
            if self._slot_waiters:
                self._hand_over_slot()
            else:
                self._free += 1

    async def _wait_for_slot(self, loop) -> None:
        """Wait in line for a slot; a slot handed to a waiter that was cancelled meanwhile
        goes on to the next one."""
        fut = loop.create_future()
        self._slot_waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._hand_over_slot()  # it was ours already
            raise

    def _hand_over_slot(self) -> None:
        waiters = self._slot_waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1

    def request_nowait(self, message, version: int, on_done, timeout_ms: int | None = None) -> bool:
        """Send ``message`` now, without a task or a future: ``on_done(response, error)`` is
        called exactly once, from the read loop (the answer), the timeout or a disconnect
        (error a NetworkError). Returns False, sending nothing, when not connected or
        ``max_in_flight`` requests are waiting: use ``request`` then. For callers on the loop
        thread that step a state machine with the answer (the Raft driver)."""
        held = self.hold_nowait(message, version, on_done, timeout_ms)
        if held is None:
            return False
        self.release(held)
        return True

    def hold_nowait(self, message, version: int, on_done, timeout_ms: int | None = None) -> "_Held | None":
        """``request_nowait`` in two steps: the request is encoded and registered now, and
        written by ``release(held)`` (a Raft follower's next Fetch, decided while the flush it
        depends on runs, leaves the moment that flush completes). Its timeout starts at the
        release. A disconnect meanwhile fails it through ``on_done``, and the release then
        writes nothing. None when ``request_nowait`` would return False."""
        if self._writer is None or self._closed or len(self._waiting) >= self.max_in_flight or \
                self._reauth_gate is not None:
            return None
        cid = next(self._ids) & 0x7FFFFFFF
        api_key = type(message).API_KEY
        held = _Held(self._writer, encode_request(message, version, cid, self.client_id), cid, api_key, timeout_ms)
        self._waiting[cid] = (_Callback(on_done), api_key, version, None)
        return held

    def release(self, held: "_Held") -> None:
        """Write a request registered by ``hold_nowait``, unless it already failed (its
        connection closed or the client did)."""
        entry = self._waiting.get(held.cid)
        if held.writer is not self._writer or entry is None:
            return
        loop = self._loop or self._running_loop()
        timeout_ms = held.timeout_ms
        timeout = self.request_timeout if timeout_ms is None else timeout_ms / 1000
        if not self._watch_deadline(loop, time.monotonic() + timeout, held.cid, timeout):
            entry[0].timer = loop.call_later(timeout, self._timed_out, held.cid, held.api_key, timeout)
        if self._out:  # frames queued before this one leave first
            self._queue_write(held.frame)
        else:  # the caller steps a state machine on the loop: its request leaves now
            self._send_now(loop, held.frame)

    def _send_now(self, loop, frame) -> None:
        """Write ``frame`` in this call, not a loop turn later. A failed write is reported a
        turn later, as a queued one's would be: the caller's callback must not run inside the
        call that sent (the Raft driver is executing effects)."""
        try:
            self._writer.write(frame)
        except _WRITE_FAILED as exc:
            loop.call_soon(self._disconnect, NetworkError(f"write to {self.address} failed: {exc}"))

    def _watch_deadline(self, loop, deadline: float, cid: int, timeout: float) -> bool:
        """Requests at one timeout mostly leave in deadline order: one timer, armed for the
        oldest, watches those (a timer per request cost a handle and a cancel each). False
        for a deadline before the newest watched one (a request that waited for a slot or
        the connection, or has a shorter timeout): it needs its own timer."""
        q, waiting = self._deadlines, self._waiting
        if q and q[-1][0] > deadline:
            return False
        while q and q[0][1] not in waiting:  # answered (mostly in order): keeps it ~in-flight long
            q.popleft()
        q.append((deadline, cid, timeout))
        if self._deadline_timer is None:
            self._deadline_timer = loop.call_at(q[0][0], self._expire_deadlines)
        return True

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        self._loop = asyncio.get_running_loop()
        return self._loop

    def _expire_deadlines(self) -> None:
        """Time out what was sent at the default timeout and is still waiting; answered
        entries are dropped here, lazily."""
        self._deadline_timer = None
        q, waiting = self._deadlines, self._waiting
        # uvloop's timers count whole milliseconds: one may fire a hair before its deadline
        # by this clock (re-arming for the rest would spin).
        now = time.monotonic() + 0.001
        while q:
            deadline, cid, timeout = q[0]
            entry = waiting.get(cid)
            if entry is None:
                q.popleft()
            elif deadline <= now:
                q.popleft()
                self._timed_out(cid, entry[1], timeout)
            else:
                self._deadline_timer = self._loop.call_at(deadline, self._expire_deadlines)
                return

    def _reused_frame(self, key, message, version: int, cid: int) -> tuple[bytearray, int]:
        entry = self._frames.get((key, version))
        if entry is None:
            if callable(message):
                message = message()
            entry = (encode_request(message, version, 0, self.client_id), type(message).API_KEY)
            if len(self._frames) >= _REUSED_FRAMES:
                self._frames.pop(next(iter(self._frames)))
            self._frames[(key, version)] = entry
        frame = bytearray(entry[0])
        _CORRELATION.pack_into(frame, 8, cid)  # after the size, api key and version
        return frame, entry[1]

    def _timed_out(self, cid: int, api_key: int, timeout: float) -> None:
        entry = self._waiting.pop(cid, None)
        if entry is None or entry[0].done():
            return
        entry[0].set_exception(RequestTimeoutError(
            f"{request_class(api_key).__name__} to {self.address} timed out after {timeout * 1000:.0f} ms"))
        # Kafka closes the connection on a timeout: a late answer can then never be mistaken.
        self._disconnect(RequestTimeoutError(f"request to {self.address} timed out"))

    def _queue_write(self, frame: bytes) -> None:
        """Coalesce the frames of one loop iteration into a single socket write."""
        self._out.append(frame)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            (self._loop or self._running_loop()).call_soon(self._flush_writes)

    def _flush_writes(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if not out or self._writer is None:
            return
        try:
            self._writer.write(out[0] if len(out) == 1 else b"".join(out))
        except _WRITE_FAILED as exc:
            self._disconnect(NetworkError(f"write to {self.address} failed: {exc}"))

    async def _ensure_connected(self, deadline: float) -> None:
        if self._closed:
            raise NetworkError(f"client for {self.address} is closed")
        if self._writer is not None:
            return
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        try:
            await asyncio.wait_for(asyncio.shield(self._connecting), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise RequestTimeoutError(f"could not connect to {self.address} in time") from None
        except asyncio.CancelledError:
            # close() cancelled the connection attempt: that is a NetworkError for the caller,
            # unless the caller's own task is being cancelled.
            task = asyncio.current_task()
            if self._closed and not (task is not None and getattr(task, "cancelling", lambda: 0)()):
                raise NetworkError(f"client for {self.address} closed while connecting") from None
            raise
        if self._writer is None:
            if isinstance(self._last_connect_error, ConnectionRefusedError):
                raise ConnectionRefused(f"connection refused to {self.address}")
            raise NetworkError(f"cannot connect to {self.address}: {self._last_connect_error}")

    async def _connect(self) -> None:
        try:
            wait = self._next_attempt - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                writer, _ = await asyncio.wait_for(
                    asyncio.get_running_loop().create_connection(lambda: _Reading(self), self.host, self.port,
                                                                 **self._tls()),
                    self.connect_timeout)
            except (OSError, asyncio.TimeoutError) as exc:
                self._connect_failed(exc)
                return
            lifetime = 0
            if self.sasl is not None:
                try:
                    lifetime = await asyncio.wait_for(self._authenticate(writer), self.connect_timeout)
                except (KraftError, OSError, asyncio.TimeoutError) as exc:
                    writer.close()
                    if isinstance(exc, SaslAuthenticationError):
                        log.error("SASL login to %s as %s failed: %s", self.address, self.sasl.username, exc)
                    self._connect_failed(exc)
                    return
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._failures = 0
            self._last_connect_error = None
            if self._closed:  # close() ran while connecting
                writer.close()
                return
            self._writer = writer
            self._schedule_reauthentication(writer, lifetime)
        finally:
            self._connecting = None

    # --- re-authentication (KIP-368) ----------------------------------------------------------
    def _schedule_reauthentication(self, writer, lifetime_ms: int) -> None:
        """Log in again at 85-95% of the session's lifetime, as Kafka's clients do."""
        if lifetime_ms > 0:
            delay = lifetime_ms / 1000 * self._rng.uniform(0.85, 0.95)
            asyncio.get_running_loop().call_later(delay, self._reauthentication_due, writer)

    def _reauthentication_due(self, writer) -> None:
        if writer is not self._writer or self._closed or self._reauth_gate is not None:
            return  # that connection is gone (a new one logged in afresh)
        self._reauth_gate = asyncio.get_running_loop().create_future()
        self._reauth_due = True
        self._maybe_reauthenticate()

    def _maybe_reauthenticate(self) -> None:
        """Once nothing is in flight (the server answers only the login until it is done)."""
        if self._reauth_due and not self._waiting and self._writer is not None:
            self._reauth_due = False
            self._reauth_task = asyncio.get_running_loop().create_task(self._reauthenticate(self._writer))

    async def _reauthenticate(self, writer) -> None:
        try:
            lifetime = await asyncio.wait_for(self._authenticate(writer), self.connect_timeout)
        except (KraftError, OSError, asyncio.TimeoutError) as exc:
            log.warning("SASL re-authentication to %s failed: %s", self.address, exc)
            if self._writer is writer:
                self._disconnect(NetworkError(f"re-authentication to {self.address} failed: {exc}"))
        else:
            self.reauthentications += 1
            if self._writer is writer:
                self._schedule_reauthentication(writer, lifetime)
        finally:
            gate, self._reauth_gate = self._reauth_gate, None
            if gate is not None and not gate.done():
                gate.set_result(None)

    def _connect_failed(self, exc: BaseException) -> None:
        self._last_connect_error = exc
        self._failures += 1
        # Jitter first, then the cap, as Kafka's ExponentialBackoff does.
        backoff = min(self.retry_backoff_max,
                      self.retry_backoff * (2 ** min(self._failures - 1, 20)) * self._rng.uniform(0.8, 1.2))
        self._next_attempt = time.monotonic() + backoff
        log.debug("connect to %s failed (%s); next attempt in %.0f ms", self.address, exc, backoff * 1000)

    async def _authenticate(self, transport) -> int:
        """The SASL exchange on a new connection, before it carries anything else: its
        requests are written on ``transport`` directly (``_writer`` is not set yet, so no
        other request can go out first) and answered through the usual read side."""
        loop = asyncio.get_running_loop()

        async def ask(message, version: int):
            cid = next(self._ids) & 0x7FFFFFFF
            fut = self._auth_answer = loop.create_future()
            self._waiting[cid] = (fut, type(message).API_KEY, version, None)
            try:
                transport.write(encode_request(message, version, cid, self.client_id))
                return await fut
            finally:
                self._waiting.pop(cid, None)
                self._auth_answer = None
        return await self.sasl.run(ask)

    def _tls(self) -> dict:
        if self.ssl_context is None:
            return {}
        # A handshake failure (an untrusted certificate, say) is an OSError: a failed connect.
        return dict(ssl=self.ssl_context, server_hostname=self.host, ssl_handshake_timeout=self.connect_timeout)

    def _lost(self, transport, error: Exception) -> None:
        """The read side ended (or read garbage): fail what waits, if still this connection."""
        if self._writer is transport:
            self._disconnect(error)
        else:
            transport.close()
            if self._auth_answer is not None and not self._auth_answer.done():  # closed mid-login
                self._auth_answer.set_exception(NetworkError(f"{self.address} closed the connection: {error}"))

    def _deliver(self, frame: bytes) -> None:
        cid = peek_correlation_id(frame)
        entry = self._waiting.pop(cid, None)
        if self._reauth_due and not self._waiting:
            self._maybe_reauthenticate()  # the last answer before a due re-authentication
        if entry is None:
            return  # the request already timed out
        fut, api_key, version, fast = entry
        if fut.done():
            return
        if fast is not None:
            result = fast(frame)
            if result is not None:
                fut.set_result(result)
                return
        try:
            _, body = decode_response(frame, api_key, version)
        except (ProtocolError, UnsupportedVersionError) as exc:
            fut.set_exception(NetworkError(f"undecodable response from {self.address}: {exc}"))
            raise
        fut.set_result(body)

    def _disconnect(self, error: Exception) -> None:
        self._out = []
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        waiting, self._waiting = self._waiting, {}
        for fut, *_ in waiting.values():
            if not fut.done():
                fut.set_exception(error)
        if self._reauth_due:  # the next connection logs in afresh: nobody waits for this one
            self._reauth_due = False
            gate, self._reauth_gate = self._reauth_gate, None
            if gate is not None and not gate.done():
                gate.set_result(None)

    async def close(self) -> None:
        self._closed = True
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        self._disconnect(NetworkError(f"client for {self.address} closed"))
        if self._connecting is not None:
            self._connecting.cancel()
