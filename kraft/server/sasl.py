"""SASL authentication of a connection, as Kafka's SaslServerAuthenticator runs it: the client
names a mechanism (SaslHandshake), then sends its tokens (SaslAuthenticate, or raw frames after
a v0 handshake); until that succeeds only ApiVersions, SaslHandshake and SaslAuthenticate may be
sent. Mechanism PLAIN with the users of the listener's JAAS config (Kafka's PlainLoginModule
``user_<name>="<password>"`` options); SCRAM-SHA-256 / SCRAM-SHA-512 with the credentials of the
metadata image (:mod:`kraft.server.scram_sasl`). A mechanism's ``start()`` gives one
connection's exchange: ``step(token)`` answers each client token until ``complete``.

Config as Kafka reads it: ``sasl.enabled.mechanisms`` and
``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (else ``sasl.jaas.config``), with the
``listener.name.<listener>.`` prefix first. Mistakes are one-line :class:`ConfigError`s raised
when the listener is built. No I/O here: :mod:`kraft.server.network` frames and sends.

Re-authentication (KIP-368, ``connections.max.reauth.ms`` > 0, per listener): a login answered
by SaslAuthenticate v1+ carries that session lifetime; before it ends the client sends
SaslHandshake again on the same connection and logs in anew, as the same principal with the
same mechanism (anything else closes the connection). Once a session has expired, any request
but SaslHandshake closes the connection (a v0 client, which cannot re-authenticate, is closed
at its first request after the lifetime).
"""

from __future__ import annotations

import hmac
import logging
import re
import struct
import time

from kraft.config import security_protocol
from kraft.errors import ConfigError, ErrorCode
from kraft.protocol.messages.sasl import SaslAuthenticateResponse, SaslHandshakeResponse
from kraft.server.scram_sasl import AuthenticationFailed, ScramMechanism
from kraft.server.tls import ListenerSettings

log = logging.getLogger("kraft.network")

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
API_VERSIONS = 18
#: Kafka's sasl.server.max.receive.size: the largest frame an unauthenticated client may send.
MAX_RECEIVE_SIZE = 524288
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SUPPORTED = ("PLAIN",) + SCRAM

_JAAS = re.compile(r'\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;\s*$', re.S)
_OPTION = re.compile(r'\s*([\w.$-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')


def parse_jaas(text: str, key: str) -> tuple[str, dict[str, str]]:
    """``<LoginModule> <flag> name=value ... ;`` (Kafka's JaasConfig, one module)."""
    m = _JAAS.fullmatch(text or "")
    if not m:
        raise ConfigError(f"{key}: expected '<LoginModule> required name=\"value\" ...;', got {text[:60]!r}")
    options, rest = {}, m.group(3)
    pos = 0
    while pos < len(rest):
        o = _OPTION.match(rest, pos)
        if not o:
            if rest[pos:].strip():
                raise ConfigError(f"{key}: cannot parse the JAAS options at {rest[pos:pos + 30]!r}")
            break
        value = o.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[o.group(1)] = value
        pos = o.end()
    return m.group(1), options


class PlainMechanism:
    """Kafka's PlainSaslServer with PlainServerCallbackHandler: the users are the JAAS
    config's ``user_<name>`` options; one token ``authzid NUL authcid NUL password``."""

    name = "PLAIN"

    def __init__(self, users: dict[str, str]):
        self.users = users

    def authenticate(self, token: bytes) -> str:
        """The authenticated user name, or raises AuthenticationFailed with Kafka's message."""
        parts = bytes(token).decode("utf-8", "replace").split("\x00")
        if len(parts) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        # compare_digest: the time taken does not tell how much of a password was right
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        return username

    def start(self) -> "_PlainExchange":
        return _PlainExchange(self)


class _PlainExchange:
    """PLAIN is one token, answered with an empty one."""

    def __init__(self, mechanism: PlainMechanism):
        self.mechanism = mechanism
        self.user: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        self.user = self.mechanism.authenticate(token)
        self.complete = True
        return b""


class SaslListener:
    """The mechanisms one SASL listener offers, and its session lifetime (0: none)."""

    def __init__(self, mechanisms: dict, reauth_ms: int = 0):
        self.mechanisms = mechanisms  # name -> mechanism
        self.reauth_ms = reauth_ms  # connections.max.reauth.ms


def listener_sasl(cfg, listener: str, scram_credentials=None) -> SaslListener | None:
    """The SASL settings of a SASL_PLAINTEXT / SASL_SSL listener of ``cfg``; None otherwise.
    ``scram_credentials(user, mechanism type)``: the current credential or None (the broker's
    image)."""
    if security_protocol(cfg.values, listener) not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return None
    return sasl_settings(cfg.given, listener, scram_credentials)


def sasl_settings(given: dict, listener: str, scram_credentials=None) -> SaslListener:
    s = ListenerSettings(given, listener)
    names = [n.strip().upper() for n in s.get("sasl.enabled.mechanisms", "GSSAPI").split(",") if n.strip()]
    unsupported = [n for n in names if n not in SUPPORTED]
    if not names or unsupported:
        raise ConfigError(f"{s.key('sasl.enabled.mechanisms')}: kraft supports {', '.join(SUPPORTED)} only "
                          f"(got {', '.join(names) or 'none'}; Kafka's default is GSSAPI)")
    mechanisms = {}
    for name in names:
        key = f"{name.lower()}.sasl.jaas.config"
        text = s.get(key) or s.get("sasl.jaas.config")
        where = s.key(key) if s.get(key) else s.key("sasl.jaas.config")
        if name in SCRAM:
            # The credentials are in the metadata log; a JAAS config, if any, must name
            # ScramLoginModule (its username/password are this node's own login on the
            # listener, kraft.server.node_security).
            if text and s.get(key):
                module, _ = parse_jaas(text, where)
                if module != SCRAM_MODULE:
                    raise ConfigError(f"{where}: mechanism {name} needs {SCRAM_MODULE}, got {module}")
            mechanisms[name] = ScramMechanism(name, scram_credentials)
            continue
        if not text:
            raise ConfigError(f"{s.prefix}{key}: the {name} mechanism needs a JAAS config (or sasl.jaas.config)")
        module, options = parse_jaas(text, where)
        if module != PLAIN_MODULE:
            raise ConfigError(f"{where}: mechanism PLAIN needs {PLAIN_MODULE}, got {module}")
        users = {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_")}
        mechanisms[name] = PlainMechanism(users)
    text = s.get("connections.max.reauth.ms", "0").strip()
    if not text.isdigit():
        raise ConfigError(f"{s.key('connections.max.reauth.ms')}: expected a whole number of ms >= 0, got {text!r}")
    return SaslListener(mechanisms, int(text))


class SaslSession:
    """One connection's authentication. ``state``: ``handshake`` (expects SaslHandshake),
    ``authenticate`` (expects SaslAuthenticate), ``raw`` (a v0 handshake: the next frame is the
    bare token), ``done``; ``failed`` is set when the connection must close."""

    def __init__(self, listener: SaslListener):
        self.listener = listener
        self.state = "handshake"
        self.exchange = None  # the chosen mechanism's exchange (after the handshake)
        self.principal: str | None = None
        self.failed: str | None = None  # why the connection must be closed (after the answer)
        self.auth_failed = False  # closed after connection.failed.authentication.delay.ms
        self.expires_at: float | None = None  # monotonic end of the session (re-authentication)
        self._previous: tuple | None = None  # (principal, mechanism) while re-authenticating
        self.mechanism_name = ""
        self.reauthentications = 0

    @property
    def done(self) -> bool:
        return self.state == "done"

    def allows(self, api_key: int) -> bool:
        """May an unauthenticated connection send this request now? (Kafka closes otherwise.)"""
        if self.state == "handshake":
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if self.state == "authenticate":
            return api_key == SASL_AUTHENTICATE
        return False

    def may_reauthenticate(self, version: int) -> bool:
        """A SaslHandshake on an authenticated connection starts a re-authentication (KIP-368)
        when the listener has a session lifetime; else it is answered ILLEGAL_SASL_STATE."""
        return self.listener.reauth_ms > 0 and version >= 1

    def begin_reauthentication(self) -> None:
        self._previous = (self.principal, self.mechanism_name)
        self.state = "handshake"

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def handshake(self, request, version: int) -> SaslHandshakeResponse:
        names = list(self.listener.mechanisms)
        mechanism = self.listener.mechanisms.get(request.mechanism)
        if mechanism is None:
            self.failed = f"unsupported SASL mechanism {request.mechanism!r}"
            return SaslHandshakeResponse(error_code=int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), mechanisms=names)
        if self._previous is not None and request.mechanism != self._previous[1]:
            # Kafka's SaslServerAuthenticator: a re-authentication keeps its mechanism.
            self.failed = (f"SASL mechanism {request.mechanism} for re-authentication differs from "
                           f"{self._previous[1]}")
            return SaslHandshakeResponse(error_code=int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), mechanisms=names)
        self.mechanism_name = request.mechanism
        self.exchange = mechanism.start()
        self.state = "authenticate" if version >= 1 else "raw"
        return SaslHandshakeResponse(error_code=0, mechanisms=names)

    def token(self, auth_bytes) -> bytes | None:
        """Run the mechanism on one client token: the server's token, or None when it failed.
        The state is ``done`` once the exchange completed."""
        exchange = self.exchange
        try:
            answer = exchange.step(auth_bytes)
        except AuthenticationFailed as exc:
            self.failed = str(exc)
            self.auth_failed = True
            return None
        if exchange.complete:
            principal = f"User:{exchange.user}"
            if self._previous is not None and principal != self._previous[0]:
                self.failed = (f"Cannot change principals during re-authentication from {self._previous[0]}: "
                               f"{principal}")
                self.auth_failed = True
                return None
            if self._previous is not None:
                self.reauthentications += 1
            self._previous = None
            self.principal = principal
            self.state = "done"
            reauth_ms = self.listener.reauth_ms
            self.expires_at = time.monotonic() + reauth_ms / 1000 if reauth_ms > 0 else None
        return answer

    def authenticate(self, request, version: int = 2) -> SaslAuthenticateResponse:
        answer = self.token(request.auth_bytes)
        if answer is not None:
            # v0 has no lifetime field: such a client cannot re-authenticate, and is closed at
            # its first request after the lifetime.
            lifetime = self.listener.reauth_ms if self.state == "done" and version >= 1 else 0
            return SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=answer,
                                            session_lifetime_ms=lifetime)
        return SaslAuthenticateResponse(error_code=int(ErrorCode.SASL_AUTHENTICATION_FAILED),
                                        error_message=self.failed, auth_bytes=b"", session_lifetime_ms=0)


def after_authentication(api_key: int):
    """SaslHandshake / SaslAuthenticate on an authenticated connection or a listener without
    SASL: Kafka's KafkaApis answers ILLEGAL_SASL_STATE."""
    if api_key == SASL_HANDSHAKE:
        return SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=[])
    return SaslAuthenticateResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE),
                                    error_message="SaslAuthenticate request received after successful "
                                                  "authentication", auth_bytes=b"", session_lifetime_ms=0)


# --- one connection's steps (``conn`` is kraft.server.network's _Connection) -------------------


def sasl_gate(conn, header, request) -> bool | None:
    """What a SASL listener's connection does with a decoded request before the handler: None
    passes it on; otherwise it was answered here (False: the connection is closing)."""
    sasl, api_key = conn.sasl, header.api_key
    if sasl.state == "done" and sasl.expires_at is not None:
        if api_key == SASL_HANDSHAKE and sasl.may_reauthenticate(header.api_version):
            sasl.begin_reauthentication()  # KIP-368: the same principal logs in again
        elif sasl.expired(time.monotonic()):
            conn.server.expired_sessions_total += 1
            log.info("closing connection from %s on %s: its SASL session expired (connections.max.reauth.ms)",
                     conn.peer, conn.server.listener_name)
            conn._close()
            return False
    if sasl.state != "done":
        if not sasl.allows(api_key):
            conn._reject(f"api_key={api_key} before SASL authentication (state {sasl.state})")
            return False
        return None if api_key == API_VERSIONS else sasl_step(conn, header, request)
    if api_key == SASL_HANDSHAKE or api_key == SASL_AUTHENTICATE:
        return conn._queue_answer(header, after_authentication(api_key))
    return None


def sasl_step(conn, header, request) -> bool:
    """Answer a SaslHandshake or SaslAuthenticate of an unauthenticated connection; False when
    the connection is closing."""
    sasl = conn.sasl
    before = sasl.reauthentications
    if header.api_key == SASL_HANDSHAKE:
        response = sasl.handshake(request, header.api_version)
    else:
        response = sasl.authenticate(request, header.api_version)
    conn.server.reauthentications_total += sasl.reauthentications - before
    conn._queue_answer(header, response)
    _after_step(conn)
    return not conn._closing


def sasl_raw_token(conn, frame) -> bool:
    """After a v0 SaslHandshake the token comes bare (Kafka's pre-KIP-152 framing) and the
    answer is the server's token (size-prefixed; empty for PLAIN), or a closed connection."""
    answer = conn.sasl.token(frame)
    if answer is not None:
        conn.transport.write(struct.pack(">i", len(answer)) + answer)
    _after_step(conn)
    return not conn._closing


def _after_step(conn) -> None:
    sasl, server = conn.sasl, conn.server
    if sasl.state == "done":
        conn.principal = sasl.principal
        conn.decoder.max_frame_bytes = server.max_frame_bytes
    elif sasl.failed is not None:
        # The answer goes out; nothing more is read; the close waits, as Kafka's does, so a
        # client retrying wrong passwords in a loop costs the node little.
        conn._closing = True
        conn.held.clear()
        if sasl.auth_failed:
            server.auth_failed_total += 1
            log.info("authentication failed for %s on %s: %s", conn.peer, server.listener_name, sasl.failed)
            delay = server.failed_authentication_delay_ms / 1000
        else:
            server.rejected(conn.peer, sasl.failed)
            delay = 0.0
        conn.loop.call_later(delay, conn._close)
