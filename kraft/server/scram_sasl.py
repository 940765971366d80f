"""SASL SCRAM-SHA-256 and SCRAM-SHA-512 on the server side (RFC 5802, RFC 7677), as Kafka's
ScramSaslServer runs them, with credentials from the metadata image.

The exchange is two client tokens:

* client-first ``n,[a=<authzid>],n=<user>,r=<client nonce>[,<extensions>]``: the user's
  credential is looked up (``lookup(user, mechanism type)``, the broker's current image, so a
  credential added through AlterUserScramCredentials works on every broker once applied);
  the answer is server-first ``r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>``.
* client-final ``c=<base64 gs2 header>,r=<nonce>,p=<base64 proof>``: the proof is checked
  (``H(ClientSignature XOR proof) == StoredKey``); the answer is server-final
  ``v=<base64 ServerSignature>``.

The password is never here and PBKDF2 never runs on the server: the client salts the
password, the server only computes a few HMACs, so the exchange runs on the event loop. Failures
carry Kafka's message: ``Authentication failed during authentication due to invalid credentials
with SASL mechanism SCRAM-SHA-256`` for a wrong proof, an unknown user or a malformed message
(SaslServerAuthenticator's wrapping of ScramSaslServer's SaslException); an authorization id
other than the user is refused as Kafka refuses it. The ``tokenauth`` extension (delegation
tokens) is refused: kraft has no delegation tokens.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import re
import secrets

from kraft.metadata.scram import MECHANISM_TYPES, MIN_ITERATIONS, digest, hmac_digest

log = logging.getLogger("kraft.network")

_CLIENT_FIRST = re.compile(r"n,(?:a=(?P<authzid>[^,]*))?,(?:m=[^,]*,)?n=(?P<saslname>[^,]+),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
                           r"(?P<extensions>(?:,[A-Za-z]+=[^,]*)*)")
_CLIENT_FINAL = re.compile(r"c=(?P<channel>[A-Za-z0-9/+]+=*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
                           r"(?P<extensions>(?:,[A-Za-z]+=[^,]*)*),p=(?P<proof>[A-Za-z0-9/+]+=*)")
_AUTHZID_MISMATCH = "Authentication failed: Client requested an authorization id that is different from username"


def invalid_credentials(mechanism_name: str) -> str:
    return (f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
            f"{mechanism_name}")


def sasl_name_to_user(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ``,`` and ``=3D`` is ``=`` (Kafka's ScramFormatter.username)."""
    return name.replace("=2C", ",").replace("=3D", "=")


class AuthenticationFailed(Exception):
    """A failed authentication; the text is Kafka's message to the client."""


class _Refused(Exception):
    """A SaslException of Kafka's ScramSaslServer: reported as invalid credentials."""


class ScramMechanism:
    """One SCRAM mechanism of a listener; ``lookup(user, mechanism type)`` gives a
    ``ScramCredential`` or None."""

    def __init__(self, name: str, lookup=None, nonce=None):
        self.name = name
        self.type = MECHANISM_TYPES[name]
        self.lookup = lookup or (lambda user, mechanism: None)
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))  # no ',' in the alphabet

    def start(self) -> "ScramExchange":
        return ScramExchange(self)


class ScramExchange:
    """One connection's SCRAM exchange (Kafka's ScramSaslServer state machine)."""

    def __init__(self, mechanism: ScramMechanism):
        self.mechanism = mechanism
        self.user: str | None = None  # set once complete
        self.complete = False
        self._state = "first"
        self._credential = None
        self._client_first_bare = self._server_first = ""
        self._gs2_header = ""
        self._nonce = ""
        self._candidate = ""

    def step(self, token: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._first(bytes(token).decode("utf-8"))
            if self._state == "final":
                return self._final(bytes(token).decode("utf-8"))
            raise _Refused(f"unexpected token in state {self._state}")
        except AuthenticationFailed:
            self._state = "failed"
            raise
        except (_Refused, UnicodeDecodeError, binascii.Error, ValueError) as exc:
            self._state = "failed"
            log.info("SCRAM %s authentication of %r refused: %s", self.mechanism.name, self._candidate, exc)
            raise AuthenticationFailed(invalid_credentials(self.mechanism.name)) from None

    def _first(self, text: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise _Refused(f"Invalid SCRAM client first message format: {text[:60]!r}")
        extensions = dict(e.split("=", 1) for e in m.group("extensions").split(",") if e)
        if extensions:
            if set(extensions) - {"tokenauth"}:
                raise _Refused(f"Unsupported extensions will not be accepted: {sorted(extensions)}")
            if extensions["tokenauth"].lower() == "true":
                raise _Refused("delegation tokens (the tokenauth extension) are not supported")
        user = sasl_name_to_user(m.group("saslname"))
        self._candidate = user
        credential = self.mechanism.lookup(user, self.mechanism.type)
        if credential is None:
            raise _Refused(f"no {self.mechanism.name} credential for user {user!r}")
        authzid = m.group("authzid")
        if authzid and authzid != user:
            raise AuthenticationFailed(_AUTHZID_MISMATCH)
        if credential.iterations < MIN_ITERATIONS:
            raise _Refused(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS}")
        flag, authz, self._client_first_bare = text.split(",", 2)
        self._gs2_header = f"{flag},{authz},"
        self._nonce = m.group("nonce") + self.mechanism._nonce()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._credential = credential
        self._state = "final"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise _Refused("Invalid SCRAM client final message format")
        if m.group("nonce") != self._nonce:
            raise _Refused("Invalid client nonce in the final client message.")
        if base64.b64decode(m.group("channel"), validate=True) != self._gs2_header.encode():
            raise _Refused("Invalid channel binding in the final client message.")
        without_proof = text[:m.start("proof") - len(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        mech, cred = self.mechanism.type, self._credential
        proof = base64.b64decode(m.group("proof"), validate=True)
        signature = hmac_digest(mech, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise _Refused("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(signature, proof))
        if not hmac.compare_digest(digest(mech, client_key), cred.stored_key):
            raise _Refused("Invalid client credentials")
        server_signature = hmac_digest(mech, cred.server_key, auth_message)
        self._credential = None
        self._state = "done"
        self.complete = True
        self.user = self._candidate
        return b"v=" + base64.b64encode(server_signature)
