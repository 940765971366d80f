"""Hostile but well-formed inputs for tests and benchmarks: record batches whose CRC and
framing are valid while their payload is not what it claims (decompression bombs).
Builds bytes only."""

from __future__ import annotations

import struct
import zlib

from kraft.records import crc32c
from kraft.records.format import Compression

_HEADER = struct.Struct(">qiibIhiqqqhii")


def gzip_bomb_batch(inflated_bytes: int, *, timestamp: int = 0) -> bytes:
    """A RecordBatch v2 (gzip, one record claimed) whose records block inflates to
    ``inflated_bytes`` of zeros: about 1,000× smaller than that on the wire."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts, left = [], inflated_bytes
    while left > 0:
        n = min(left, len(chunk))
        parts.append(comp.compress(chunk[:n]))
        left -= n
    parts.append(comp.flush())
    block = b"".join(parts)
    return _batch(Compression.GZIP, block, timestamp)


def _batch(codec: int, block: bytes, timestamp: int) -> bytes:
    length = _HEADER.size - 12 + len(block)
    head = _HEADER.pack(0, length, -1, 2, 0, codec, 0, timestamp, timestamp, -1, -1, -1, 1)
    body = head[21:] + block
    crc = crc32c(body)
    return head[:17] + struct.pack(">I", crc) + body
