"""Pure-Python twin of ``kraft._native._compact`` (``KRAFT_NO_EXTENSIONS=1``): the same key
hash, record scan, offset map and record rewrite, result for result. Slow; a reference."""

from __future__ import annotations

import numpy as np

from kraft.records._pure_varint import decode_varint, encode_varint

ENTRY_BYTES = 24
SEED1 = 0
SEED2 = 0xC2B2AE3D27D4EB4F
_M = (1 << 64) - 1
_K1 = 0x9E3779B97F4A7C15
_K2 = 0xC2B2AE3D27D4EB4F


def _mix64(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _M
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _M
    return x ^ (x >> 31)


def _hash(key: bytes, seed: int) -> int:
    n = len(key)
    h = seed ^ ((n * _K1) & _M)
    i = 0
    while i + 8 <= n:
        h = (_mix64(h ^ int.from_bytes(key[i:i + 8], "little")) * _K2) & _M
        i += 8
    h = _mix64(h ^ int.from_bytes(key[i:], "little") ^ ((n - i) << 56))
    return _mix64(h)


def release_gil() -> None:
    """Nothing to release here: pure Python holds the GIL throughout."""


def key_hash(key) -> tuple[int, int]:
    key = bytes(key)
    return _hash(key, SEED1), _hash(key, SEED2)


def scan_records(block, count: int, base_offset: int, base_timestamp: int):
    data = bytes(block)
    if count < 0 or count > len(data):
        raise ValueError(f"record count {count} does not fit {len(data)} bytes")
    offsets, h1, h2 = np.empty(count, np.int64), np.zeros(count, np.uint64), np.zeros(count, np.uint64)
    timestamps, flags = np.empty(count, np.int64), np.zeros(count, np.uint8)
    starts, ends = np.empty(count, np.int64), np.empty(count, np.int64)
    p = 0
    for i in range(count):
        try:
            starts[i] = p
            length, p = decode_varint(data, p)
            end = p + length
            if length < 0 or end > len(data):
                raise ValueError
            tdelta, p = decode_varint(data, p + 1)
            odelta, p = decode_varint(data, p)
            klen, p = decode_varint(data, p)
            if klen < -1 or p + klen > end:
                raise ValueError
            if klen >= 0:
                flags[i] = 1
                h1[i], h2[i] = key_hash(data[p:p + klen])
                p += klen
            vlen, p = decode_varint(data, p)
            if vlen < -1 or p + vlen > end or p > end:
                raise ValueError
            if vlen >= 0:
                flags[i] |= 2
        except (ValueError, IndexError, Exception) as exc:
            raise ValueError(f"malformed record {i} of {count}") from exc
        p = end
        offsets[i], timestamps[i], ends[i] = base_offset + odelta, base_timestamp + tdelta, p
    return offsets, h1, h2, timestamps, flags, starts, ends


def scan_many(buffer, block_starts, block_ends, counts, base_offsets, base_timestamps):
    parts = []
    for start, end, count, base, ts in zip(block_starts, block_ends, counts, base_offsets, base_timestamps):
        if count < 0 or start < 0 or end > len(buffer) or start > end or count > end - start:
            raise ValueError("a block does not fit the buffer")
        out = scan_records(bytes(buffer[int(start):int(end)]), int(count), int(base), int(ts))
        parts.append(out[:5] + (out[5] + int(start), out[6] + int(start)))
    if not parts:
        return scan_records(b"", 0, 0, 0)
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(7))


def rebuild_records(block, starts, ends, timestamps, keep, new_base_timestamp: int) -> bytes:
    data, out = bytes(block), bytearray()
    for i in keep:
        p = int(starts[i])
        _, p = decode_varint(data, p)
        attributes = data[p:p + 1]
        _, after = decode_varint(data, p + 1)
        body = attributes + encode_varint(int(timestamps[i]) - new_base_timestamp) + data[after:int(ends[i])]
        out += encode_varint(len(body)) + body
    return bytes(out)


class OffsetMap:
    """Same contract as the native map (fixed capacity, larger offset wins)."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9):
        self.slots = max(1, memory_bytes // ENTRY_BYTES)
        self.capacity = max(1, min(self.slots - 1, int(self.slots * load_factor))) if self.slots > 1 else 0
        self._map: dict = {}
        self.latest_offset = -1

    @property
    def size(self) -> int:
        return len(self._map)

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

    def put_many(self, h1, h2, offsets, flags) -> int:
        m = self._map
        for i in range(len(offsets)):
            if not flags[i] & 1:
                continue
            key, offset = (int(h1[i]), int(h2[i])), int(offsets[i])
            old = m.get(key)
            if old is None:
                if len(m) >= self.capacity:
                    return i
                m[key] = offset
            elif offset > old:
                m[key] = offset
            self.latest_offset = max(self.latest_offset, offset)
        return len(offsets)

    def get_many(self, h1, h2, flags):
        m = self._map
        return np.array([m.get((int(a), int(b)), -1) if f & 1 else -1 for a, b, f in zip(h1, h2, flags)],
                        dtype=np.int64)
