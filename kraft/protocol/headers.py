"""Request and response headers, and which header version each (API, version) uses.

Request header v1: ApiKey int16, ApiVersion int16, CorrelationId int32, ClientId nullable string.
v2 adds a tagged-field section; ClientId keeps its **int16 length** even then (Kafka never made
it compact, so that any broker can read the header of any request). Response header v0:
CorrelationId; v1 adds tagged fields. Flexible requests use v2 and flexible responses v1, except
that **ApiVersions responses always use v0**, so a client that does not yet know the broker's
versions can always read the answer. (Request header v0, without ClientId, was only used by
ControlledShutdown v0, which Kafka 4 no longer has.)

This module must not decode message bodies or know about framing. Unknown API keys raise
:class:`UnsupportedVersionError`.
"""

from __future__ import annotations

import struct

import kraft.protocol.messages  # noqa: F401  (registers every schema)
from kraft.protocol import primitives as P
from kraft.protocol.message import request_class, response_class

API_VERSIONS_KEY = 18

_REQUEST_PREFIX = struct.Struct(">hhi")
_I32 = struct.Struct(">i")


class RequestHeader:
    """A decoded request header. ``unknown_tagged_fields`` keeps header tags, ``[(tag, bytes)]``."""

    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "unknown_tagged_fields")

    def __init__(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None = None,
                 unknown_tagged_fields=None):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.unknown_tagged_fields = unknown_tagged_fields

    def _key(self):
        return (self.api_key, self.api_version, self.correlation_id, self.client_id,
                self.unknown_tagged_fields or None)

    def __eq__(self, other):
        if not isinstance(other, RequestHeader):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None

    def __repr__(self):
        return (f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


class ResponseHeader:
    __slots__ = ("correlation_id", "unknown_tagged_fields")

    def __init__(self, correlation_id: int, unknown_tagged_fields=None):
        self.correlation_id = correlation_id
        self.unknown_tagged_fields = unknown_tagged_fields

    def __eq__(self, other):
        if not isinstance(other, ResponseHeader):
            return NotImplemented
        return (self.correlation_id, self.unknown_tagged_fields or None) == \
            (other.correlation_id, other.unknown_tagged_fields or None)

    __hash__ = None

    def __repr__(self):
        return f"ResponseHeader(correlation_id={self.correlation_id})"


def request_header_version(api_key: int, api_version: int) -> int:
    """2 if that request version is flexible, else 1. Flexibility is open-ended ("3+"), so this
    is defined for versions we do not support too (an unsupported ApiVersions request needs it)."""
    return 2 if request_class(api_key).is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 if that response version is flexible, else 0; always 0 for ApiVersions."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if response_class(api_key).is_flexible(api_version) else 0


#: client id -> its encoding (int16 length in every version): a node sends every request
#: with the same one or two.
_CLIENT_IDS: dict = {}


def encode_request_header(out: bytearray, header: RequestHeader, version: int) -> None:
    out += _REQUEST_PREFIX.pack(header.api_key, header.api_version, header.correlation_id)
    client_id = header.client_id
    cacheable = client_id is None or type(client_id) is str
    encoded = _CLIENT_IDS.get(client_id) if cacheable else None
    if encoded is None:
        b = bytearray()
        P.write_nullable_string(b, client_id)  # its errors for what is not a string
        encoded = bytes(b)
        if cacheable and len(_CLIENT_IDS) < 256:
            _CLIENT_IDS[client_id] = encoded
    out += encoded
    if version >= 2:
        tags = header.unknown_tagged_fields
        if tags:
            _write_tags(out, tags)
        else:
            out.append(0)


def decode_request_header_prefix(view, pos: int = 0) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the part that is the same in every version."""
    return _REQUEST_PREFIX.unpack_from(view, pos)


def decode_request_header(view, version: int, pos: int = 0) -> tuple[RequestHeader, int]:
    api_key, api_version, correlation_id = _REQUEST_PREFIX.unpack_from(view, pos)
    client_id, pos = P.read_nullable_string(view, pos + 8)
    tags = None
    if version >= 2:
        if view[pos] == 0:  # no header tags: the usual case, without the reader's calls
            pos += 1
        else:
            tags, pos = P.skip_tagged_fields(view, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, tags), pos


def encode_response_header(out: bytearray, correlation_id: int, version: int) -> None:
    out += _I32.pack(correlation_id)
    if version >= 1:
        out.append(0)  # no header tags


def decode_response_header(view, version: int, pos: int = 0) -> tuple[ResponseHeader, int]:
    (correlation_id,) = _I32.unpack_from(view, pos)
    pos += 4
    tags = None
    if version >= 1:
        if view[pos] == 0:  # no header tags
            pos += 1
        else:
            tags, pos = P.skip_tagged_fields(view, pos)
    return ResponseHeader(correlation_id, tags), pos


def _write_tags(out: bytearray, tags) -> None:
    if tags:
        P.write_tagged_fields(out, sorted(tags, key=lambda item: item[0]))
    else:
        out.append(0)
