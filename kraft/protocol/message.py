"""Request and response base classes, and the registry of every message class by API key.

A concrete message declares its API key, valid versions and first flexible version next to its
fields; defining the class registers it. ``encode(version)`` / ``decode(buf, version)`` use the
plans compiled by ``codec.py`` (cached per version) and are the only place where low-level
decoding failures become :class:`ProtocolError`. This module must not know about headers or
framing (see ``framing.py``) and must not import any particular message.
"""

from __future__ import annotations

import struct

from kraft.errors import EncodeError, ProtocolError, UnsupportedVersionError
from kraft.protocol.codec import plan
from kraft.protocol.schema import Struct, Versions

# Failures the generated decoders may hit on hostile input; everything else is a bug.
DECODE_FAILURES = (struct.error, IndexError, ValueError, OverflowError)
_ENCODE_FAILURES = (struct.error, OverflowError, UnicodeEncodeError)

REQUESTS: dict[int, type["Request"]] = {}
RESPONSES: dict[int, type["Response"]] = {}


def as_view(buf) -> memoryview:
    """A flat unsigned-byte view of any bytes-like object, without copying."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class Message(Struct):
    """Base of requests and responses. Subclasses set ``API_KEY``, ``VERSIONS`` (Kafka's
    validVersions, e.g. ``"0-2"``) and ``FLEXIBLE`` (flexibleVersions, e.g. ``"0+"`` or ``"none"``)."""

    __slots__ = ()
    API_KEY: int = -1
    VERSIONS: str = "none"
    FLEXIBLE: str = "none"
    MIN_VERSION: int
    MAX_VERSION: int
    # Where concrete subclasses register by API key; bases of other message families (such as
    # the metadata records of kraft.metadata) set their own dict so their keys never collide.
    REGISTRY: dict | None = None

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.API_KEY < 0:
            return  # an abstract base such as Request itself
        versions = Versions.parse(cls.VERSIONS)
        if versions.empty or versions.hi is None:
            raise TypeError(f"{cls.__name__}: VERSIONS must be a closed range, got {cls.VERSIONS!r}")
        cls.MIN_VERSION, cls.MAX_VERSION = versions.lo, versions.hi
        cls._FLEXIBLE_VERSIONS = Versions.parse(cls.FLEXIBLE)
        cls._ENCODERS = {}
        cls._DECODERS = {}
        registry = cls.REGISTRY
        if registry is None:
            raise TypeError(f"{cls.__name__}: no registry (derive from Request, Response or a family base)")
        if cls.API_KEY in registry:
            raise TypeError(f"{cls.__name__}: API key {cls.API_KEY} is already {registry[cls.API_KEY].__name__}")
        registry[cls.API_KEY] = cls

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        """Flexible-ness is open-ended ("3+"), so it is defined even past MAX_VERSION; the
        header of an unsupported ApiVersions request depends on that."""
        return version in cls._FLEXIBLE_VERSIONS

    @classmethod
    def supports(cls, version: int) -> bool:
        return cls.MIN_VERSION <= version <= cls.MAX_VERSION

    @classmethod
    def _check_version(cls, version: int) -> None:
        if not (isinstance(version, int) and cls.MIN_VERSION <= version <= cls.MAX_VERSION):
            raise UnsupportedVersionError(
                f"{cls.__name__} version {version!r} is not in {cls.MIN_VERSION}-{cls.MAX_VERSION}")

    @classmethod
    def encoder(cls, version: int):
        enc = cls._ENCODERS.get(version)
        if enc is None:
            cls._check_version(version)
            enc = cls._ENCODERS[version] = plan(cls, version, cls.is_flexible(version)).encode
        return enc

    @classmethod
    def decoder(cls, version: int):
        dec = cls._DECODERS.get(version)
        if dec is None:
            cls._check_version(version)
            dec = cls._DECODERS[version] = plan(cls, version, cls.is_flexible(version)).decode
        return dec

    def encode_into(self, out: bytearray, version: int) -> None:
        """Append the body at ``version`` to ``out``. UnsupportedVersionError if a non-ignorable
        field that this version lacks holds a non-default value; EncodeError for bad values."""
        enc = self._ENCODERS.get(version) or self.encoder(version)
        try:
            enc(self, out)
        except _ENCODE_FAILURES as e:
            raise EncodeError(f"cannot encode {type(self).__name__} v{version}: {e}") from e

    def encode(self, version: int) -> bytes:
        out = bytearray()
        self.encode_into(out, version)
        return bytes(out)

    @classmethod
    def decode_from(cls, view: memoryview, pos: int, version: int):
        """Decode one message starting at ``pos`` of a flat byte view; returns (message, end)."""
        dec = cls._DECODERS.get(version) or cls.decoder(version)
        try:
            return dec(view, pos)
        except DECODE_FAILURES as e:
            raise ProtocolError(f"cannot decode {cls.__name__} v{version}: {e}") from e

    @classmethod
    def decode(cls, buf, version: int):
        """Decode a whole buffer (bytes, bytearray or memoryview); trailing bytes are an error.
        ``records`` fields are views into ``buf``: do not mutate ``buf`` while they are in use."""
        view = as_view(buf)
        msg, end = cls.decode_from(view, 0, version)
        if end != len(view):
            raise ProtocolError(f"{len(view) - end} trailing bytes after {cls.__name__} v{version}")
        return msg


class Request(Message):
    """A request body. ``LISTENERS`` names the node roles that serve it (Kafka's "listeners")."""

    __slots__ = ()
    LISTENERS: tuple = ("broker", "controller")
    REGISTRY = REQUESTS


class Response(Message):
    """A response body."""

    __slots__ = ()
    REGISTRY = RESPONSES


class EncodedBody(bytes):
    """A response body already encoded at the version of the request it answers (a hot path
    that splices values into a cached encoding instead of building a Response)."""

    __slots__ = ()


#: An int64 no real field of an answer holds (above any offset a log reaches, and a byte
#: pattern nothing else encodes to): encoded in place of a value, it marks where that goes.
INT64_SENTINEL = 0x7ADEC0DE5EED1234
_I64 = struct.Struct(">q")


def split_at_int64(encoded: bytes, sentinel: int = INT64_SENTINEL) -> tuple[bytes, bytes] | None:
    """``encoded`` (a message encoded with ``sentinel`` in one int64 field) as the bytes
    before and after that field, for answers that differ only in that value (a writer's
    Produce answers: the server splices its offset in, the client reads it out). None when
    the sentinel is not there exactly once."""
    marker = _I64.pack(sentinel)
    at = encoded.find(marker)
    if at < 0 or encoded.find(marker, at + 1) >= 0:
        return None
    return bytes(encoded[:at]), bytes(encoded[at + 8:])


class EncodedParts(list):
    """A response body already encoded at the request's version, as buffers written in order
    and never joined: the record bytes of a Fetch answer stay views of the log's files."""

    __slots__ = ()

    @property
    def nbytes(self) -> int:
        return sum(len(p) if not isinstance(p, memoryview) else p.nbytes for p in self)


def request_class(api_key: int) -> type[Request]:
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    return cls


def response_class(api_key: int) -> type[Response]:
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    return cls
