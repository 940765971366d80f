"""SCRAM credentials in the image (Kafka's ``ScramImage``/``ScramDelta``) and the SCRAM
formatter's key derivations (RFC 5802 with SHA-256 / SHA-512, RFC 7677).

A credential is stored per ``(user, mechanism)`` as Kafka stores it: the salt, the iteration
count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``; the password and the salted password never
reach the log. ``RemoveUserScramCredentialRecord`` of a credential that does not exist is a
replay error, as in Kafka's ``ScramControlManager.replay``. No I/O here.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import NamedTuple

from kraft.errors import MetadataReplayError

#: Kafka's ``ScramMechanism`` types (the record's and the admin APIs' INT8).
UNKNOWN, SCRAM_SHA_256, SCRAM_SHA_512 = 0, 1, 2
MECHANISM_NAMES = {SCRAM_SHA_256: "SCRAM-SHA-256", SCRAM_SHA_512: "SCRAM-SHA-512"}
MECHANISM_TYPES = {v: k for k, v in MECHANISM_NAMES.items()}
_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
#: Kafka's ``ScramMechanism.minIterations`` (both mechanisms) and ``ScramControlManager.MAX_ITERATIONS``.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


def hash_name(mechanism: int) -> str:
    return _HASHES[mechanism]


def hmac_digest(mechanism: int, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, _HASHES[mechanism]).digest()


def digest(mechanism: int, data: bytes) -> bytes:
    return hashlib.new(_HASHES[mechanism], data).digest()


def salted_password(mechanism: int, password: str, salt: bytes, iterations: int) -> bytes:
    """``Hi(Normalize(password), salt, i)``: PBKDF2 with the mechanism's HMAC (the slow part;
    clients and ``kraft storage format`` compute it, never the server's event loop)."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode("utf-8"), salt, iterations)


def client_key(mechanism: int, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Client Key")


def stored_key(mechanism: int, salted: bytes) -> bytes:
    return digest(mechanism, client_key(mechanism, salted))


def server_key(mechanism: int, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Server Key")


class ScramCredential(NamedTuple):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted(mechanism: int, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    return ScramCredential(bytes(salt), stored_key(mechanism, salted), server_key(mechanism, salted), iterations)


def credential_from_password(mechanism: int, password: str, salt: bytes, iterations: int) -> ScramCredential:
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


class ScramImage(NamedTuple):
    credentials: dict  # (user, mechanism type) -> ScramCredential; never mutated

    def lookup(self, user: str, mechanism: int) -> ScramCredential | None:
        return self.credentials.get((user, mechanism))

    def users(self) -> dict:
        """user -> {mechanism type: iterations}."""
        out: dict = {}
        for (user, mechanism), cred in self.credentials.items():
            out.setdefault(user, {})[mechanism] = cred.iterations
        return out


EMPTY_SCRAM = ScramImage({})


class ScramDelta:
    __slots__ = ("image", "changes")

    def __init__(self, image: ScramImage):
        self.image = image
        self.changes: dict = {}  # (user, mechanism) -> ScramCredential, or None: removed

    def _current(self, key):
        if key in self.changes:
            return self.changes[key]
        return self.image.credentials.get(key)

    def replay(self, record) -> None:
        self.changes[(record.name, record.mechanism)] = ScramCredential(
            bytes(record.salt), bytes(record.stored_key), bytes(record.server_key), record.iterations)

    def replay_remove(self, record) -> None:
        key = (record.name, record.mechanism)
        if self._current(key) is None:
            raise MetadataReplayError(f"Unable to find credential to delete: user {record.name!r}, "
                                      f"mechanism {MECHANISM_NAMES.get(record.mechanism, record.mechanism)}")
        self.changes[key] = None

    def apply(self) -> ScramImage:
        if not self.changes:
            return self.image
        credentials = dict(self.image.credentials)
        for key, value in self.changes.items():
            if value is None:
                credentials.pop(key, None)
            else:
                credentials[key] = value
        return ScramImage(credentials)
