"""Frames on a Kafka connection: int32 size prefix, header, body. Server and client side.

``FrameDecoder`` is sans-I/O: feed it whatever bytes the socket produced and it returns the
complete frames. ``decode_request``/``encode_response`` are the server side;
``encode_request``/``decode_response`` the client side. Failures are typed: an unknown API key
or unsupported version raises :class:`UnsupportedVersionError`, anything undecodable raises
:class:`ProtocolError` (the caller closes the connection). Errors from ``decode_request``
carry ``.header`` (the :class:`RequestHeader` as far as it could be read, or None) so the
caller can log the correlation id. No other exception may escape the decoders on any input.

Two ApiVersions rules live here (Kafka's ``RequestContext``): a request at a version we do not
support is not parsed but answered at v0 with UNSUPPORTED_VERSION so the client can retry
lower, and the response header of ApiVersions is always v0. On the client side an ApiVersions
response that does not parse at the requested version is parsed again at v0.

This module must not do I/O (no sockets, no asyncio).
"""

from __future__ import annotations

import struct

import kraft.protocol.messages  # noqa: F401  (registers every schema)
from kraft.errors import ProtocolError, UnsupportedVersionError
from kraft.protocol.headers import (API_VERSIONS_KEY, RequestHeader, ResponseHeader, decode_request_header,
                                    decode_request_header_prefix, decode_response_header, encode_request_header,
                                    encode_response_header, request_header_version, response_header_version)
from kraft.protocol.message import (DECODE_FAILURES, REQUESTS, RESPONSES, EncodedBody, EncodedParts, Request, Response,
                                    as_view)
from kraft.protocol.messages.api_versions import ApiVersionsRequest
from kraft.protocol.primitives import SplicedFrame
from kraft.protocol.schema import is_struct

_I32 = struct.Struct(">i")
_NO_SIZE = bytes(4)  # the size prefix, written once the body is encoded
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class FrameDecoder:
    """Splits a byte stream into frames (without their size prefix).

    A negative size or one above ``max_frame_bytes`` raises :class:`ProtocolError` as soon as
    the 4 size bytes arrive, without waiting for (or reserving room for) the body; after that
    the decoder stays failed.

    Frames are bytes-like and read-only to the caller, and the decoder never touches a
    returned frame again:

    - a frame of ``VIEW_FRAME`` bytes or more that lies whole inside one ``bytes`` chunk (what
      the event loop hands over) is a memoryview of that chunk: no copy. The leader receives
      every Produce this way;
    - a frame that spans chunks is gathered by itself (the stream after it is not copied
      along) and returned as a read-only view of its own buffer;
    - with ``large_frames_in_place``, a frame of ``LARGE_FRAME`` bytes or more is received
      straight into a buffer of its size, allocated once its size is read (a client's large
      fetch answers). Only a client sets this: a server would reserve whatever size a
      stranger announces;
    - anything else (small frames, chunks that are not ``bytes``) is copied out as ``bytes``.
    """

    # A Raft follower's Fetch answers under load are hundreds of KB: each would be copied by
    # the buffer's growth and again when cut out of it.
    LARGE_FRAME = 64 << 10
    # Below this a view (and the chunk it keeps alive) is not worth saving one copy.
    VIEW_FRAME = 4 << 10

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, *, large_frames_in_place: bool = False):
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()  # the start of one incomplete frame, size prefix included
        self._failed: ProtocolError | None = None
        self._in_place = large_frames_in_place
        self._large: bytearray | None = None  # the large frame being received in place
        self._filled = 0

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf) + self._filled

    def _size(self, buf, at: int) -> int:
        (size,) = _I32.unpack_from(buf, at)
        if size < 0 or size > self.max_frame_bytes:
            self._failed = ProtocolError(f"frame size {size} is outside 0..{self.max_frame_bytes}")
            self._buf, self._large, self._filled = bytearray(), None, 0
            raise self._failed
        return size

    def _fill_large(self, data) -> int:
        """Copy the start of ``data`` into the large frame; returns the bytes taken."""
        large, at = self._large, self._filled
        n = min(len(data), len(large) - at)
        large[at:at + n] = data[:n]
        self._filled = at + n
        return n

    def _take_large(self, view, pos: int, frames: list) -> int:
        """Go on filling the large frame from ``view[pos:]``; the position after what it took."""
        pos += self._fill_large(view[pos:])
        if self._filled == len(self._large):
            frames.append(memoryview(self._large).toreadonly())
            self._large, self._filled = None, 0
        return pos

    def _take_pending(self, view, pos: int, frames: list) -> int:
        """Complete the frame begun in ``_buf`` from ``view[pos:]`` (only its own bytes)."""
        buf, end = self._buf, len(view)
        if len(buf) < 4:
            take = min(4 - len(buf), end - pos)
            buf += view[pos:pos + take]
            pos += take
            if len(buf) < 4:
                return pos
            size = self._size(buf, 0)
            if self._in_place and size >= self.LARGE_FRAME:
                self._buf, self._large = bytearray(), bytearray(size)
                return self._take_large(view, pos, frames)
        else:
            (size,) = _I32.unpack_from(buf, 0)
        take = min(size + 4 - len(buf), end - pos)
        buf += view[pos:pos + take]
        pos += take
        if len(buf) == size + 4:
            frames.append(memoryview(buf).toreadonly()[4:] if size >= self.VIEW_FRAME else bytes(buf[4:]))
            self._buf = bytearray()
        return pos

    def feed(self, data) -> list:
        if self._failed is not None:
            raise self._failed
        frames = []
        view = memoryview(data)
        end, pos = len(view), 0
        keep = type(data) is bytes  # immutable: frames may stay views of it
        if self._large is not None:
            pos = self._take_large(view, pos, frames)
        if self._buf and pos < end:
            pos = self._take_pending(view, pos, frames)
        if self._large is not None or self._buf:
            return frames  # the chunk ended inside a frame
        while end - pos >= 4:
            size = self._size(view, pos)
            if end - pos - 4 < size:
                if self._in_place and size >= self.LARGE_FRAME:
                    self._large = bytearray(size)
                    self._take_large(view, pos + 4, frames)
                    return frames
                break
            frame = view[pos + 4:pos + 4 + size]
            frames.append(frame if keep and size >= self.VIEW_FRAME else bytes(frame))
            pos += 4 + size
        if pos < end:
            self._buf = bytearray(view[pos:])
        return frames


def _fail(error_type, message: str, header, cause=None):
    error = error_type(message)
    error.header = header
    if cause is not None:
        error.__cause__ = cause
    return error


def peek_correlation_id(frame) -> int:
    """The correlation id of a response frame (its first field in every header version), to
    find the request it answers before decoding it."""
    try:
        return _I32.unpack_from(as_view(frame), 0)[0]
    except struct.error as e:
        raise ProtocolError("frame too short for a correlation id") from e


def response_version(api_key: int, request_version: int) -> int:
    """The version a response is written at: the request's, except that an ApiVersions request
    at an unsupported version is answered at v0."""
    if api_key == API_VERSIONS_KEY and not ApiVersionsRequest.supports(request_version):
        return 0
    return request_version


# --- server side ---------------------------------------------------------------


def decode_request(frame) -> tuple[RequestHeader, Request]:
    """Decode one request frame (size prefix already removed) into (header, body).

    For an ApiVersions request at an unsupported version the body is not parsed: the result is
    an empty ``ApiVersionsRequest`` and ``header.api_version`` is what the client sent; answer
    it with :func:`kraft.protocol.api_table.unsupported_api_versions_response` through
    :func:`encode_response`, which writes it at v0. Trailing bytes after the body are rejected
    (Kafka ignores them, but they would hide schema bugs) unless the request class sets
    ``TRAILING_BYTES_FROM_VERSION`` for versions a real client sends them at.
    """
    view = as_view(frame)
    try:
        api_key, api_version, correlation_id = decode_request_header_prefix(view)
    except struct.error as e:
        raise _fail(ProtocolError, f"request frame of {len(view)} bytes is too short for a header", None, e)
    cls, header_version, decoder = (_SERVED.get((api_key, api_version))
                                    or _plan(api_key, api_version, correlation_id))
    try:
        header, pos = decode_request_header(view, header_version)
    except (ProtocolError,) + DECODE_FAILURES as e:
        raise _fail(ProtocolError, f"bad request header: {e}", RequestHeader(api_key, api_version, correlation_id), e)
    if decoder is None:
        if api_key == API_VERSIONS_KEY:
            return header, ApiVersionsRequest()
        raise _fail(UnsupportedVersionError,
                    f"{cls.__name__} version {api_version} is not in {cls.MIN_VERSION}-{cls.MAX_VERSION}", header)
    try:
        body, end = decoder(view, pos)
    except ProtocolError as e:
        raise _fail(ProtocolError, str(e), header, e)
    except DECODE_FAILURES as e:  # as Message.decode_from words it
        raise _fail(ProtocolError, f"cannot decode {cls.__name__} v{api_version}: {e}", header, e)
    if end != len(view) and not api_version >= getattr(cls, "TRAILING_BYTES_FROM_VERSION", 1 << 15):
        raise _fail(ProtocolError, f"{len(view) - end} trailing bytes after {cls.__name__} v{api_version}", header)
    return header, body


#: (api key, version) -> (request class, header version, body decoder) for every served
#: version seen: a request's class, flexibility and decoder are looked up once, not per frame.
_SERVED: dict = {}


def _plan(api_key: int, api_version: int, correlation_id: int) -> tuple:
    """The plan of a kind not seen before; its decoder is None for a version not served
    (not remembered: a stranger could name every version of every key)."""
    cls = REQUESTS.get(api_key)
    if cls is None:
        raise _fail(UnsupportedVersionError, f"unknown API key {api_key}",
                    RequestHeader(api_key, api_version, correlation_id), None)
    header_version = request_header_version(api_key, api_version)
    if not cls.supports(api_version):
        return cls, header_version, None
    plan = _SERVED[(api_key, api_version)] = (cls, header_version,
                                              cls._DECODERS.get(api_version) or cls.decoder(api_version))
    return plan


def encode_response(header_or_correlation, api_key: int, api_version: int, message: Response,
                    copy: bool = True, splice: bool = False) -> bytes | bytearray | list:
    """The complete response frame, size prefix included. ``header_or_correlation`` is the
    request's :class:`RequestHeader` or just its correlation id; ``api_version`` is the
    request's version (see :func:`response_version` for the ApiVersions exception).
    ``copy=False`` returns the bytearray it was built in. ``splice=True`` (implies
    ``copy=False``) returns a list of buffers to write in order when the message holds a
    records value of ``SPLICE_BYTES`` or more (a Raft Fetch answer of a megabyte is then not
    copied into the frame at all: it goes to the socket from the log's own bytes)."""
    if isinstance(header_or_correlation, RequestHeader):
        correlation_id = header_or_correlation.correlation_id
    else:
        correlation_id = int(header_or_correlation)
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    encoded = type(message) is EncodedBody
    if not encoded and not isinstance(message, cls):
        raise TypeError(f"API key {api_key} needs a {cls.__name__}, not {type(message).__name__}")
    version = response_version(api_key, api_version)
    if splice:  # the caller writes buffers as they are: no final copy either way
        copy = False
        splice = not encoded and _carries_records(cls)
    out = SplicedFrame(_NO_SIZE) if splice else bytearray(4)
    encode_response_header(out, correlation_id, response_header_version(api_key, version))
    if encoded:
        out += message
    else:
        message.encode_into(out, version)
    if splice:
        _I32.pack_into(out, 0, len(out) - 4 + out.spliced_bytes)
        return out.parts() if out.splices else out
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out) if copy else out


_RECORDS_CARRIERS: dict[type, bool] = {}


def _carries_records(cls) -> bool:
    """Does a message of ``cls`` have a records field (at any depth)? Only those are built in
    a ``SplicedFrame``: every other answer (a Produce acknowledgement, a Vote) stays a plain
    bytearray, with no Python ``__init__`` per answer."""
    known = _RECORDS_CARRIERS.get(cls)
    if known is None:
        def walk(struct_cls, seen) -> bool:
            if struct_cls in seen:
                return False
            seen.add(struct_cls)
            for f in struct_cls.FIELDS:
                t = getattr(f.type, "elem", f.type)
                if getattr(t, "name", None) == "records" or (is_struct(t) and walk(t, seen)):
                    return True
            return False
        known = _RECORDS_CARRIERS[cls] = walk(cls, set())
    return known


def encode_response_parts(header: RequestHeader, api_key: int, api_version: int, parts: EncodedParts) -> list:
    """The response frame for an :class:`EncodedParts` body: the size prefix and response
    header as bytes, then the body's buffers as they are (no copy of the views)."""
    version = response_version(api_key, api_version)
    out = bytearray(4)
    encode_response_header(out, header.correlation_id, response_header_version(api_key, version))
    _I32.pack_into(out, 0, len(out) - 4 + parts.nbytes)
    return [bytes(out), *parts]


# --- client side ---------------------------------------------------------------


def encode_request(message: Request, api_version: int, correlation_id: int, client_id: str | None = None) -> bytes:
    """The complete request frame, size prefix included."""
    if not isinstance(message, Request):
        raise TypeError(f"not a request: {type(message).__name__}")
    cls = type(message)
    cls.encoder(api_version)  # UnsupportedVersionError before anything is written
    out = bytearray(4)
    header = RequestHeader(cls.API_KEY, api_version, correlation_id, client_id)
    encode_request_header(out, header, request_header_version(cls.API_KEY, api_version))
    message.encode_into(out, api_version)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(frame, api_key: int, api_version: int) -> tuple[ResponseHeader, Response]:
    """Decode a response frame (size prefix removed) to a request sent as (api_key, api_version)."""
    cls = RESPONSES.get(api_key)
    if cls is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    cls.decoder(api_version)  # UnsupportedVersionError for a version we never send
    view = as_view(frame)
    try:
        header, pos = decode_response_header(view, response_header_version(api_key, api_version))
    except (ProtocolError,) + DECODE_FAILURES as e:
        raise _fail(ProtocolError, f"bad response header: {e}", None, e)
    try:
        return header, _decode_body(cls, view, pos, api_version)
    except ProtocolError:
        # A broker that does not know our ApiVersions version answers at v0 (see module doc).
        if api_key == API_VERSIONS_KEY and api_version != 0:
            return header, _decode_body(cls, view, pos, 0)
        raise


def _decode_body(cls, view, pos: int, version: int):
    body, end = cls.decode_from(view, pos, version)
    if end != len(view):
        raise ProtocolError(f"{len(view) - end} trailing bytes after {cls.__name__} v{version}")
    return body


__all__ = [
    "DEFAULT_MAX_FRAME_BYTES", "FrameDecoder", "decode_request", "decode_response", "encode_request",
    "encode_response", "peek_correlation_id", "response_version",
]


#: A request handler's result meaning "answer nothing and close the connection once the answers
#: already owed are written": Kafka's ``closeConnection`` for an acks=0 Produce that failed, the
#: only way such a client learns of the error (it reconnects and refreshes its metadata).
CLOSE_CONNECTION = object()
