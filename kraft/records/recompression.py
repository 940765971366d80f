"""The leader's rewrite of a writer's batches to its topic's ``compression.type`` (Kafka's
``LogValidator`` when the target codec differs from the batch's): each batch whose codec is
not the target gets its records block inflated (within a byte budget) and compressed with the
target at the topic's level; the header keeps every field but the codec bits, the length and
the CRC. Records are never decoded one by one: the block is the same bytes either way.
Pure bytes in, bytes out: callers run it off the event loop.
"""

from __future__ import annotations

from kraft.errors import RecordListTooLargeError
from kraft.records import compression, crc32c
from kraft.records.format import Compression

_HEADER_SIZE = 61
_ATTRIBUTES_LOW = 22  # low byte of the int16 Attributes
_CODEC_BITS = 0x07


def batch_codecs(data) -> set:
    """The codecs of the batches in ``data`` (whole, checked batches)."""
    view, pos, out = memoryview(data), 0, set()
    while pos + _HEADER_SIZE <= len(view):
        out.add(view[pos + _ATTRIBUTES_LOW] & _CODEC_BITS)
        pos += int.from_bytes(view[pos + 8:pos + 12], "big") + 12
    return out


def recompress(data, codec: int, level: int | None, max_decompressed_bytes: int) -> bytearray:
    """``data`` with every batch in ``codec``: RecordListTooLargeError when the inflated blocks
    exceed ``max_decompressed_bytes`` altogether, CorruptRecordError for a block that does not
    inflate."""
    view, pos, out, budget = memoryview(data), 0, bytearray(), max_decompressed_bytes
    while pos + _HEADER_SIZE <= len(view):
        size = int.from_bytes(view[pos + 8:pos + 12], "big") + 12
        header, body = view[pos:pos + _HEADER_SIZE], view[pos + _HEADER_SIZE:pos + size]
        source = header[_ATTRIBUTES_LOW] & _CODEC_BITS
        pos += size
        if source == codec:
            out += view[pos - size:pos]
            continue
        block = body if source == Compression.NONE else compression.decompress(source, body, budget)
        budget -= len(block)
        if budget < 0:
            raise RecordListTooLargeError(f"records exceed {max_decompressed_bytes} bytes")
        start = len(out)
        out += header
        out += block if codec == Compression.NONE else compression.compress(codec, block, level)
        out[start + _ATTRIBUTES_LOW] = (out[start + _ATTRIBUTES_LOW] & ~_CODEC_BITS & 0xFF) | codec
        out[start + 8:start + 12] = (len(out) - start - 12).to_bytes(4, "big")
        out[start + 17:start + 21] = crc32c(memoryview(out)[start + 21:]).to_bytes(4, "big")
    return out
