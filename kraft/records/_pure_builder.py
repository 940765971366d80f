"""Pure-Python RecordBatch v2 builder (reference implementation).

Same API and byte-for-byte the same output as the native builder in
``kraft._native._records``; selected with ``KRAFT_NO_EXTENSIONS=1`` and used by the
differential tests. Correctness over speed, but no quadratic behaviour.
"""

from __future__ import annotations

import operator
import struct
import time

from kraft.records import compression as _compression
from kraft.records._pure_varint import encode_varint, size_of_varint, wrap64
from kraft.records.format import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    CRC_START,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    Compression,
)

HEADER = struct.Struct(">qiibIhiqqqhii")
_INT16 = struct.Struct(">hh")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _blob(data) -> bytes:
    """Encode a nullable byte string as varint length + bytes."""
    if data is None:
        return b"\x01"  # zig-zag -1
    data = bytes(memoryview(data))  # bytes-like only: bytes(3) would be three zero bytes
    return encode_varint(len(data)) + data


def _encode_headers(headers) -> bytes:
    if not headers:
        return b"\x00"
    parts = [encode_varint(len(headers))]
    for hkey, hvalue in headers:
        raw = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
        parts.append(encode_varint(len(raw)))
        parts.append(raw)
        parts.append(_blob(hvalue))
    return b"".join(parts)


class RecordBatchBuilder:
    """Accumulates records and produces one RecordBatch v2.

    ``append`` returns the record's offset delta, or ``None`` when ``max_bytes`` is set and
    the record would push the (uncompressed) batch past it; the first record is always
    accepted so that an oversized record still gets a batch of its own.
    """

    def __init__(self, *, compression=Compression.NONE, base_offset=0, partition_leader_epoch=-1,
                 producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False,
                 control=False, log_append_time=False, max_bytes=None):
        if compression not in (0, 1, 2, 3, 4):
            from kraft.errors import UnsupportedCodecError

            raise UnsupportedCodecError(f"unknown compression codec {compression}")
        self._compression = int(compression)
        self._base_offset = base_offset
        self._epoch = partition_leader_epoch
        self._producer = (producer_id, producer_epoch, base_sequence)
        self._attributes = (
            self._compression
            | (TIMESTAMP_TYPE_MASK if log_append_time else 0)
            | (TRANSACTIONAL_MASK if transactional else 0)
            | (CONTROL_MASK if control else 0)
        )
        self._max_bytes = max_bytes
        self._parts: list[bytes] = []
        self._size = BATCH_HEADER_SIZE
        self._count = 0
        self._base_ts = 0
        self._max_ts = 0

    def __len__(self) -> int:
        return self._count

    def size_in_bytes(self) -> int:
        """Uncompressed size of the batch built so far."""
        return self._size

    def append(self, value, key=None, headers=None, timestamp=None):
        if timestamp is None:
            timestamp = now_ms()
        timestamp = operator.index(timestamp)  # a float is a TypeError, not truncated
        if self._count == 0:
            self._base_ts = self._max_ts = timestamp
        body = b"".join((
            b"\x00",
            encode_varint(wrap64(timestamp - self._base_ts)),
            encode_varint(self._count),
            _blob(key),
            _blob(value),
            _encode_headers(headers),
        ))
        size = size_of_varint(len(body)) + len(body)
        if self._max_bytes is not None and self._count and self._size + size > self._max_bytes:
            return None
        self._parts.append(encode_varint(len(body)))
        self._parts.append(body)
        self._size += size
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        self._count += 1
        return self._count - 1

    def build(self) -> bytes:
        if self._count == 0:
            raise ValueError("a record batch needs at least one record")
        records = b"".join(self._parts)
        if self._compression:
            records = _compression.compress(self._compression, records)
        return finish_batch(records, self._count, self._base_offset, self._epoch, self._attributes,
                            self._base_ts, self._max_ts, *self._producer)


def finish_batch(records: bytes, count: int, base_offset: int, epoch: int, attributes: int,
                 base_ts: int, max_ts: int, producer_id: int, producer_epoch: int,
                 base_sequence: int) -> bytes:
    """Prefix an (already compressed) records block with its header and CRC."""
    from kraft.records._pure_crc import crc32c

    out = bytearray(BATCH_HEADER_SIZE + len(records))
    HEADER.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD, epoch, MAGIC_V2, 0, attributes,
                     count - 1, base_ts, max_ts, producer_id, producer_epoch, base_sequence, count)
    out[BATCH_HEADER_SIZE:] = records
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def build_batch(values, keys=None, headers=None, timestamps=None, *, base_offset=0,
                partition_leader_epoch=-1, timestamp=None, compression=Compression.NONE,
                producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False,
                control=False, log_append_time=False) -> bytes:
    """Encode a whole batch in one call. ``keys``/``headers``/``timestamps`` are parallel to
    ``values`` when given; ``timestamp`` (default: now) stamps every record otherwise."""
    n = len(values)
    for name, seq in (("keys", keys), ("headers", headers), ("timestamps", timestamps)):
        if seq is not None and len(seq) != n:
            raise ValueError(f"{name} has {len(seq)} entries for {n} values")
    if timestamp is None and timestamps is None:
        timestamp = now_ms()
    b = RecordBatchBuilder(compression=compression, base_offset=base_offset,
                           partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
                           producer_epoch=producer_epoch, base_sequence=base_sequence,
                           transactional=transactional, control=control,
                           log_append_time=log_append_time)
    for i in range(n):
        b.append(values[i], None if keys is None else keys[i],
                 None if headers is None else headers[i],
                 timestamp if timestamps is None else timestamps[i])
    return b.build()


def build_control_batch(control_type: int, value, *, base_offset=0, partition_leader_epoch=-1,
                        timestamp=None) -> bytes:
    """A one-record control batch: key = int16 version 0 + int16 type (ControlRecordType)."""
    key = _INT16.pack(0, control_type)
    return build_batch([value], [key], base_offset=base_offset,
                       partition_leader_epoch=partition_leader_epoch, timestamp=timestamp,
                       control=True)
