"""Pure-Python varints: zig-zag signed (Kafka's varint/varlong) and unsigned (uvarint).

Reference implementation; the native module provides the same functions. Decoders take a
buffer and a position and return ``(value, next_position)``; truncated or over-long input
raises :class:`CorruptRecordError`, never IndexError.
"""

from __future__ import annotations

from kraft.errors import CorruptRecordError

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT32_MAX = (1 << 32) - 1


def encode_unsigned_varint(value: int) -> bytes:
    """Kafka's unsigned varint (32-bit range, at most 5 bytes)."""
    if value < 0 or value > _UINT32_MAX:
        raise OverflowError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def wrap64(value: int) -> int:
    """Two's-complement int64 wrap-around, as Java's long arithmetic (Kafka adds offsets and
    timestamps as longs)."""
    return ((value + (1 << 63)) & 0xFFFFFFFFFFFFFFFF) - (1 << 63)


def _check_pos(buf, pos: int) -> None:
    if pos < 0 or pos > len(buf):
        raise CorruptRecordError("varint position outside the buffer")


def decode_unsigned_varint(buf, pos: int = 0) -> tuple[int, int]:
    _check_pos(buf, pos)
    value = shift = 0
    end = len(buf)
    for _ in range(5):
        if pos >= end:
            raise CorruptRecordError("truncated unsigned varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value > _UINT32_MAX:
                raise CorruptRecordError("unsigned varint exceeds 32 bits")
            return value, pos
        shift += 7
    raise CorruptRecordError("unsigned varint longer than 5 bytes")


def encode_varint(value: int) -> bytes:
    """Zig-zag varint over the int64 range (Kafka's varint for int32 values, varlong for int64)."""
    if value < _INT64_MIN or value > _INT64_MAX:
        raise OverflowError(f"varint out of range: {value}")
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    _check_pos(buf, pos)
    raw = shift = 0
    end = len(buf)
    for _ in range(10):
        if pos >= end:
            raise CorruptRecordError("truncated varint")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            if raw > 0xFFFFFFFFFFFFFFFF:
                raise CorruptRecordError("varint exceeds 64 bits")
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise CorruptRecordError("varint longer than 10 bytes")


def size_of_varint(value: int) -> int:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n
