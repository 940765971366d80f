"""The client side of SASL, as Kafka's clients run it on a new connection before anything else:
SaslHandshake v1 names the mechanism, then each token travels in a SaslAuthenticate v2 request.
Mechanisms: PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802/7677, the server's
final signature checked). A node uses it to reach another node's SASL listener with its own
``username``/``password`` (the ``sasl.jaas.config`` options Kafka's brokers read for
inter-broker SASL). No I/O here: :class:`SaslLogin` drives an ``ask(request, version)``
coroutine that the connection provides."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from kraft.errors import KraftError
from kraft.protocol import SaslAuthenticateRequest, SaslHandshakeRequest

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = ("PLAIN", *_HASHES)


class SaslAuthenticationError(KraftError):
    """The peer refused the login (a wrong password, an unknown user, a mechanism it lacks)."""


def _saslname(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")  # RFC 5802's escaping of the name


class ScramClient:
    """The client's two SCRAM messages and the check of the server's last one."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None):
        self.hash = _HASHES[mechanism]
        self.user, self.password = user, password
        self.nonce = nonce or secrets.token_urlsafe(24)  # no ',' in this alphabet
        self.bare = f"n={_saslname(user)},r={self.nonce}"
        self.auth = b""
        self.server_key = b""

    def first(self) -> bytes:
        return ("n,," + self.bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        fields = dict(f.split("=", 1) for f in text.split(","))
        if not fields.get("r", "").startswith(self.nonce) or "s" not in fields or "i" not in fields:
            raise SaslAuthenticationError(f"invalid SCRAM server first message: {text[:80]!r}")
        salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), base64.b64decode(fields["s"]),
                                     int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        without_proof = f"c=biws,r={fields['r']}"
        self.auth = f"{self.bare},{text},{without_proof}".encode()
        signature = hmac.new(hashlib.new(self.hash, client_key).digest(), self.auth, self.hash).digest()
        self.server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        return f"{without_proof},p={proof}".encode()

    def verify(self, server_final: bytes) -> bool:
        expected = b"v=" + base64.b64encode(hmac.new(self.server_key, self.auth, self.hash).digest())
        return hmac.compare_digest(bytes(server_final), expected)


class SaslLogin:
    """One login with ``mechanism`` as ``username``; :meth:`run` raises
    :class:`SaslAuthenticationError` with the server's message when refused."""

    def __init__(self, mechanism: str, username: str, password: str):
        if mechanism not in MECHANISMS:
            raise ValueError(f"SASL mechanism {mechanism}: kraft's client has {', '.join(MECHANISMS)}")
        self.mechanism, self.username, self.password = mechanism, username, password

    async def run(self, ask) -> int:
        """Log in through ``ask``; the session lifetime the server gave (ms, 0: none)."""
        hs = await ask(SaslHandshakeRequest(mechanism=self.mechanism), 1)
        if hs.error_code:
            raise SaslAuthenticationError(f"SASL mechanism {self.mechanism} not enabled by the peer "
                                          f"(it offers {', '.join(hs.mechanisms or []) or 'none'})")
        if self.mechanism == "PLAIN":
            return (await self._token(ask, f"\0{self.username}\0{self.password}".encode()))[1]
        scram = ScramClient(self.mechanism, self.username, self.password)
        server_first, _ = await self._token(ask, scram.first())
        server_final, lifetime = await self._token(ask, scram.final(server_first))
        if not scram.verify(server_final):
            raise SaslAuthenticationError(f"{self.mechanism}: the server's signature does not match (not the "
                                          "server holding this user's credential)")
        return lifetime

    async def _token(self, ask, token: bytes) -> tuple[bytes, int]:
        r = await ask(SaslAuthenticateRequest(auth_bytes=token), 2)
        if r.error_code:
            raise SaslAuthenticationError(r.error_message or f"SASL authentication failed (error {r.error_code})")
        return bytes(r.auth_bytes), int(r.session_lifetime_ms or 0)
