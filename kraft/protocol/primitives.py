"""Wire primitives of Kafka's protocol: varints, uuids, length-prefixed strings, bytes and arrays.

Every reader takes ``(buf, pos)`` and returns ``(value, new_pos)``; every writer appends to a
``bytearray``. Readers check each length against the bytes that are really there before
touching them, so a bogus length can never cause a huge allocation or a silent short read:
they raise :class:`ProtocolError`. The generated message codecs in ``codec.py`` bind these
functions directly, so they stay small and branch-light.

This module must not know about messages or schemas, and must not do any I/O.
"""

from __future__ import annotations

import base64
import struct
import uuid

from kraft.errors import CorruptRecordError, EncodeError, ProtocolError
from kraft.records import decode_unsigned_varint, encode_unsigned_varint, encode_varint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# Kafka reserves Uuid(0, 0) as "no id" and Uuid(0, 1) as the metadata topic's id.
ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)

# Single-byte uvarints are by far the most common (lengths and counts below 128).
_ONE_BYTE = [bytes((i,)) for i in range(128)]


# --- varints -----------------------------------------------------------------
# Varints are implemented once, in kraft.records (native where built, else the pure
# reference); here only the one-byte fast paths and Kafka's protocol error types.


def uvarint_bytes(value: int) -> bytes:
    """The unsigned varint encoding of ``0 <= value < 2**32``."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    try:
        return encode_unsigned_varint(value)
    except OverflowError as e:
        raise EncodeError(f"uvarint out of range: {value}") from e


def write_uvarint(out: bytearray, value: int) -> None:
    out += uvarint_bytes(value)


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (Kafka rejects longer ones)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    try:
        return decode_unsigned_varint(buf, pos)
    except CorruptRecordError as e:
        raise ProtocolError(f"unsigned varint is too long or truncated ({e})") from e


def write_varint(out: bytearray, value: int) -> None:
    """Zig-zag signed varint of a 32-bit value (the int64 zig-zag of an int32 is the same)."""
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise EncodeError(f"varint out of int32 range: {value}")
    out += encode_varint(value)


def read_varint(buf, pos: int) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


# --- uuids -------------------------------------------------------------------

# Kafka's two reserved ids decode to these very objects, so ``is`` finds them without
# UUID.__eq__ (a Python-level call) on every Fetch.
_SEEDS = {ZERO_UUID.bytes: ZERO_UUID, METADATA_TOPIC_ID.bytes: METADATA_TOPIC_ID}
_UUID_CACHE: dict[bytes, uuid.UUID] = dict(_SEEDS)


def uuid_from_wire(raw) -> uuid.UUID:
    """A uuid from its 16 wire bytes; topic ids repeat on every fetch, so they are cached."""
    u = _UUID_CACHE.get(raw)
    if u is None:
        if len(_UUID_CACHE) > 4096:
            _UUID_CACHE.clear()
            _UUID_CACHE.update(_SEEDS)
        u = _UUID_CACHE[raw] = uuid.UUID(bytes=bytes(raw))
    return u


def uuid_bytes(u: uuid.UUID) -> bytes:
    """``u.bytes`` without the Python-level property (a C call on the UUID's int)."""
    return u.int.to_bytes(16, "big")


def uuid_to_base64(u: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def uuid_from_base64(text: str) -> uuid.UUID:
    """Parse Kafka's text form (``AAAAAAAAAAAAAAAAAAAAAQ`` is Uuid(0, 1)); ValueError if malformed."""
    if not isinstance(text, str) or len(text) not in (22, 24):
        raise ValueError(f"not a base64 Kafka uuid: {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text[:22] + "==")
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a base64 Kafka uuid: {text!r}") from e
    if len(raw) != 16 or (len(text) == 24 and text[22:] != "=="):
        raise ValueError(f"not a base64 Kafka uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def uuid_from_longs(most_significant: int, least_significant: int) -> uuid.UUID:
    """Kafka's ``new Uuid(msb, lsb)``; the longs may be given signed as Java has them."""
    return uuid.UUID(int=((most_significant & (2**64 - 1)) << 64) | (least_significant & (2**64 - 1)))


# --- strings -------------------------------------------------------------------
# Four variants each: classic (int16/int32 length) or compact (uvarint N+1), nullable or not.
# Non-nullable readers reject null the way Kafka does ("non-nullable field was serialized as null").


def _utf8(s) -> bytes:
    if s is None:
        raise EncodeError("non-nullable string field is None")
    return s.encode("utf-8")


def write_string(out: bytearray, s: str) -> None:
    b = _utf8(s)
    if len(b) > 0x7FFF:
        raise EncodeError(f"string of {len(b)} bytes is longer than 32767")
    out += _I16.pack(len(b))
    out += b


def write_nullable_string(out: bytearray, s) -> None:
    if s is None:
        out += b"\xff\xff"
    else:
        write_string(out, s)


def write_compact_string(out: bytearray, s: str) -> None:
    b = _utf8(s)
    if len(b) > 0x7FFF:
        raise EncodeError(f"string of {len(b)} bytes is longer than 32767")
    out += uvarint_bytes(_nbytes(b) + 1)
    out += b


def write_compact_nullable_string(out: bytearray, s) -> None:
    if s is None:
        out.append(0)
    else:
        write_compact_string(out, s)


def _text(buf, start: int, n: int) -> str:
    if n > 0x7FFF:  # Kafka's limit for strings, which compact lengths could otherwise exceed
        raise ProtocolError(f"string of {n} bytes is longer than 32767")
    if n > len(buf) - start:
        raise ProtocolError(f"string of {n} bytes runs past the end of the buffer")
    return str(buf[start:start + n], "utf-8")


def read_string(buf, pos: int) -> tuple[str, int]:
    (n,) = _I16.unpack_from(buf, pos)
    if n < 0:
        raise ProtocolError(f"non-nullable string has length {n}")
    return _text(buf, pos + 2, n), pos + 2 + n


def read_nullable_string(buf, pos: int):
    (n,) = _I16.unpack_from(buf, pos)
    if n < 0:
        if n == -1:
            return None, pos + 2
        raise ProtocolError(f"string has negative length {n}")
    return _text(buf, pos + 2, n), pos + 2 + n


def read_compact_string(buf, pos: int) -> tuple[str, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolError("non-nullable compact string is null")
    n -= 1
    return _text(buf, pos, n), pos + n


def read_compact_nullable_string(buf, pos: int):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    return _text(buf, pos, n), pos + n


# --- bytes and records ---------------------------------------------------------
# ``bytes`` fields decode to a private copy; ``records`` fields decode to a memoryview slice of
# the input (zero copy: a fetch response carries megabytes that are handed on untouched).


def _nbytes(b) -> int:
    # A memoryview's len() counts items, not bytes, when its format is not "B".
    return b.nbytes if type(b) is memoryview else len(b)


# --- large bytes/records values: spliced in at write time instead of copied into the frame ---

#: A bytes or records value at least this large is not copied into a ``SplicedFrame``.
SPLICE_BYTES = 64 * 1024


class SplicedFrame(bytearray):
    """A frame being encoded whose large values stay out of it: ``splices`` holds
    (position in the frame, value) pairs, in order, to be written between the frame's bytes
    (a writev), so a Raft Fetch answer of a megabyte is not copied once more before the
    socket. Nothing in Kafka's encoding measures a struct's bytes after the fact except
    tagged fields, which are encoded into a plain bytearray (and so never spliced)."""

    __slots__ = ("splices", "spliced_bytes")

    def __init__(self, prefix=b""):
        super().__init__(prefix)
        self.splices: list = []
        self.spliced_bytes = 0

    def parts(self) -> list:
        """The frame as buffers to write in order."""
        view = memoryview(self)
        out, at = [], 0
        for pos, value in self.splices:
            out.append(view[at:pos])
            out.append(value)
            at = pos
        out.append(view[at:])
        return out


def _put_blob(out, b, n: int) -> None:
    if n >= SPLICE_BYTES and type(out) is SplicedFrame:
        out.splices.append((len(out), b))
        out.spliced_bytes += n
    else:
        out += b


def write_bytes(out: bytearray, b) -> None:
    if b is None:
        raise EncodeError("non-nullable bytes field is None")
    n = _nbytes(b)
    out += _I32.pack(n)
    _put_blob(out, b, n)


def write_nullable_bytes(out: bytearray, b) -> None:
    if b is None:
        out += b"\xff\xff\xff\xff"
    else:
        write_bytes(out, b)


def write_compact_bytes(out: bytearray, b) -> None:
    if b is None:
        raise EncodeError("non-nullable bytes field is None")
    n = _nbytes(b)
    out += uvarint_bytes(n + 1)
    _put_blob(out, b, n)


def write_compact_nullable_bytes(out: bytearray, b) -> None:
    if b is None:
        out.append(0)
    else:
        write_compact_bytes(out, b)


def _blob_len(buf, pos: int, n: int) -> None:
    if n > len(buf) - pos:
        raise ProtocolError(f"bytes field of {n} bytes runs past the end of the buffer")


def read_bytes(buf, pos: int) -> tuple[bytes, int]:
    (n,) = _I32.unpack_from(buf, pos)
    if n < 0:
        raise ProtocolError(f"non-nullable bytes field has length {n}")
    pos += 4
    _blob_len(buf, pos, n)
    return bytes(buf[pos:pos + n]), pos + n


def read_nullable_bytes(buf, pos: int):
    (n,) = _I32.unpack_from(buf, pos)
    if n < 0:
        if n == -1:
            return None, pos + 4
        raise ProtocolError(f"bytes field has negative length {n}")
    pos += 4
    _blob_len(buf, pos, n)
    return bytes(buf[pos:pos + n]), pos + n


def read_compact_bytes(buf, pos: int) -> tuple[bytes, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolError("non-nullable compact bytes field is null")
    n -= 1
    _blob_len(buf, pos, n)
    return bytes(buf[pos:pos + n]), pos + n


def read_compact_nullable_bytes(buf, pos: int):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _blob_len(buf, pos, n)
    return bytes(buf[pos:pos + n]), pos + n


def read_records(buf, pos: int):
    (n,) = _I32.unpack_from(buf, pos)
    if n < 0:
        raise ProtocolError(f"non-nullable records field has length {n}")
    pos += 4
    _blob_len(buf, pos, n)
    return buf[pos:pos + n], pos + n


def read_nullable_records(buf, pos: int):
    (n,) = _I32.unpack_from(buf, pos)
    if n < 0:
        if n == -1:
            return None, pos + 4
        raise ProtocolError(f"records field has negative length {n}")
    pos += 4
    _blob_len(buf, pos, n)
    return buf[pos:pos + n], pos + n


def read_compact_records(buf, pos: int):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolError("non-nullable compact records field is null")
    n -= 1
    _blob_len(buf, pos, n)
    return buf[pos:pos + n], pos + n


def read_compact_nullable_records(buf, pos: int):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _blob_len(buf, pos, n)
    return buf[pos:pos + n], pos + n


# --- array counts ----------------------------------------------------------------
# Like Kafka, a count larger than the bytes left is rejected before anything is allocated;
# ``min_size`` (the smallest encoding of one element) tightens that bound further.


def write_count(out: bytearray, n: int) -> None:
    out += _I32.pack(n)


def write_compact_count(out: bytearray, n: int) -> None:
    out += uvarint_bytes(n + 1)


def _check_count(buf, pos: int, n: int, min_size: int) -> None:
    if n * min_size > len(buf) - pos or n > len(buf) - pos:
        raise ProtocolError(f"array of {n} elements cannot fit in {len(buf) - pos} bytes")


def read_count(buf, pos: int, min_size: int) -> tuple[int, int]:
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        raise ProtocolError(f"non-nullable array has count {n}")
    _check_count(buf, pos, n, min_size)
    return n, pos


def read_nullable_count(buf, pos: int, min_size: int):
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise ProtocolError(f"array has negative count {n}")
    _check_count(buf, pos, n, min_size)
    return n, pos


def read_compact_count(buf, pos: int, min_size: int) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise ProtocolError("non-nullable compact array is null")
    n -= 1
    _check_count(buf, pos, n, min_size)
    return n, pos


def read_compact_nullable_count(buf, pos: int, min_size: int):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    n -= 1
    _check_count(buf, pos, n, min_size)
    return n, pos


# --- tagged fields ------------------------------------------------------------------


def write_tagged_fields(out: bytearray, fields) -> None:
    """Write ``[(tag, payload), ...]`` (already in ascending tag order) as a tagged-field section."""
    out += uvarint_bytes(len(fields))
    for tag, payload in fields:
        out += uvarint_bytes(tag)
        out += uvarint_bytes(len(payload))
        out += payload


def skip_tagged_fields(buf, pos: int) -> tuple[list | None, int]:
    """Read a tagged-field section whose tags are all unknown; returns ``[(tag, bytes)]`` or None."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    if n > len(buf) - pos:
        raise ProtocolError(f"{n} tagged fields cannot fit in {len(buf) - pos} bytes")
    unknown = []
    for _ in range(n):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if size > len(buf) - pos:
            raise ProtocolError(f"tagged field {tag} of {size} bytes runs past the end")
        unknown.append((tag, bytes(buf[pos:pos + size])))
        pos += size
    unknown.sort(key=lambda t: t[0])  # kept in tag order, as they are written back
    return unknown, pos
