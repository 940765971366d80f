"""Pure-Python RecordBatch v2 reader, segment scan and offset assignment (reference).

Same API and results as the native reader. Every malformed input raises
:class:`CorruptRecordError`; nothing here may raise IndexError/struct.error on bad bytes,
loop forever, or allocate in proportion to a length read from the input before checking
it against the bytes actually present.
"""

from __future__ import annotations

import struct

import numpy as np

from kraft.errors import CorruptRecordError
from kraft.records import compression as _compression
from kraft.records._pure_builder import HEADER
from kraft.records._pure_crc import crc32c
from kraft.records._pure_varint import decode_varint, wrap64
from kraft.records.format import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_START,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_LENGTH,
    MIN_RECORD_SIZE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from kraft.records.results import BatchScan, DecodedBatch, empty_scan_arrays

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_LENGTH = struct.Struct(">i")
_OFFSET_EPOCH = struct.Struct(">qii")


class Record:
    """One decoded record. ``headers`` is a tuple of ``(str, bytes | None)`` pairs."""

    __slots__ = ("offset", "timestamp", "key", "value", "headers", "attributes")

    def __init__(self, offset, timestamp, key, value, headers, attributes=0):
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.attributes = attributes

    def __eq__(self, other):
        if not hasattr(other, "offset") or not hasattr(other, "headers"):
            return NotImplemented
        return (self.offset, self.timestamp, self.key, self.value, tuple(self.headers)) == (
            other.offset, other.timestamp, other.key, other.value, tuple(other.headers))

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


def _varint32(data, pos, what):
    """Kafka's 32-bit varint: at most 5 bytes, value within int32."""
    start = pos
    v, pos = decode_varint(data, pos)
    if pos - start > 5 or v < _INT32_MIN or v > _INT32_MAX:
        raise CorruptRecordError(f"invalid varint for {what}")
    return v, pos


def _blob(data, pos, end, what):
    n, pos = _varint32(data, pos, what)
    if n < -1:
        raise CorruptRecordError(f"negative {what} {n}")
    if n == -1:
        return None, pos
    if pos + n > end:
        raise CorruptRecordError(f"{what} {n} past the end of the record")
    return data[pos : pos + n], pos + n


def parse_headers(data, pos, end=None):
    """Headers starting at the header-count varint at ``pos``."""
    if end is None:
        end = len(data)
    count, pos = _varint32(data, pos, "header count")
    if count < 0 or count * 2 > end - pos:
        raise CorruptRecordError(f"invalid header count {count}")
    headers = []
    for _ in range(count):
        klen, pos = _varint32(data, pos, "header key length")
        if klen < 0 or pos + klen > end:
            raise CorruptRecordError(f"invalid header key length {klen}")
        try:
            hkey = bytes(data[pos : pos + klen]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError("header key is not UTF-8") from exc
        pos += klen
        hval, pos = _blob(data, pos, end, "header value length")
        headers.append((hkey, hval))
    return tuple(headers), pos


class RecordBatch:
    """A view of one RecordBatch v2 at ``position`` in ``buffer``; the header is parsed now,
    records only when iterated or decoded. Raises CorruptRecordError if the header is not a
    v2 header or the batch runs past the buffer. The CRC is checked by :meth:`validate`."""

    __slots__ = ("_buf", "position", "base_offset", "length", "partition_leader_epoch", "magic",
                 "crc", "attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
                 "producer_id", "producer_epoch", "base_sequence", "records_count")

    def __init__(self, buffer, position=0):
        avail = len(buffer) - position
        if position < 0 or avail < BATCH_HEADER_SIZE:
            raise CorruptRecordError(f"need {BATCH_HEADER_SIZE} bytes for a batch header, have {avail}")
        (self.base_offset, self.length, self.partition_leader_epoch, self.magic, self.crc,
         self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
         self.producer_id, self.producer_epoch, self.base_sequence,
         self.records_count) = HEADER.unpack_from(buffer, position)
        if self.magic != MAGIC_V2:
            raise CorruptRecordError(f"unsupported magic {self.magic} at position {position}")
        if self.length < MIN_LENGTH:
            raise CorruptRecordError(f"batch length {self.length} below the minimum {MIN_LENGTH}")
        if self.length + LOG_OVERHEAD > avail:
            raise CorruptRecordError(f"batch of {self.length + LOG_OVERHEAD} bytes runs past the buffer ({avail})")
        if self.records_count < 0:
            raise CorruptRecordError(f"negative record count {self.records_count}")
        self._buf = buffer
        self.position = position

    # --- header-derived properties ---------------------------------------------------
    size = property(lambda self: self.length + LOG_OVERHEAD)
    last_offset = property(lambda self: wrap64(self.base_offset + self.last_offset_delta))
    next_offset = property(lambda self: wrap64(self.base_offset + self.last_offset_delta + 1))
    compression = property(lambda self: self.attributes & COMPRESSION_MASK)
    timestamp_type = property(lambda self: 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0)
    is_transactional = property(lambda self: bool(self.attributes & TRANSACTIONAL_MASK))
    is_control = property(lambda self: bool(self.attributes & CONTROL_MASK))
    has_delete_horizon = property(lambda self: bool(self.attributes & DELETE_HORIZON_MASK))

    def tobytes(self) -> bytes:
        return bytes(self._buf[self.position : self.position + self.size])

    def compute_crc(self) -> int:
        return crc32c(memoryview(self._buf)[self.position + CRC_START : self.position + self.size])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def validate(self) -> None:
        actual = self.compute_crc()
        if actual != self.crc:
            raise CorruptRecordError(
                f"CRC mismatch in batch at offset {self.base_offset}: stored {self.crc:#010x}, "
                f"computed {actual:#010x}")

    # --- records -------------------------------------------------------------------------
    def _records_block(self):
        start = self.position + BATCH_HEADER_SIZE
        raw = bytes(self._buf[start : self.position + self.size])
        codec = self.compression
        data = _compression.decompress(codec, raw) if codec else raw
        if self.records_count > len(data) // MIN_RECORD_SIZE:
            raise CorruptRecordError(f"record count {self.records_count} impossible in {len(data)} bytes")
        return data

    def _walk(self):
        """Yield (offset_delta, ts, key_pos, key_len, value_pos, value_len, header_pos, end)."""
        data = self._records_block()
        end, pos = len(data), 0
        for _ in range(self.records_count):
            length, pos = _varint32(data, pos, "record length")
            if length < MIN_RECORD_SIZE - 1 or pos + length > end:
                raise CorruptRecordError(f"invalid record length {length}")
            rec_end = pos + length
            pos += 1  # attributes: unused in v2
            ts_delta, pos = decode_varint(data, pos)
            off_delta, pos = _varint32(data, pos, "offset delta")
            klen, pos = _varint32(data, pos, "key length")
            if klen < -1 or pos + max(klen, 0) > rec_end:
                raise CorruptRecordError(f"invalid key length {klen}")
            kpos = pos
            pos += max(klen, 0)
            vlen, pos = _varint32(data, pos, "value length")
            if vlen < -1 or pos + max(vlen, 0) > rec_end:
                raise CorruptRecordError(f"invalid value length {vlen}")
            vpos = pos
            pos += max(vlen, 0)
            hpos = pos
            _, pos = parse_headers(data, pos, rec_end)
            if pos != rec_end:
                raise CorruptRecordError("record length does not match its fields")
            yield data, off_delta, ts_delta, kpos, klen, vpos, vlen, hpos
        if pos != end:
            raise CorruptRecordError(f"{end - pos} bytes left after the last record")

    def _timestamp(self, ts_delta):
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return self.max_timestamp
        return wrap64(self.base_timestamp + ts_delta)

    def __iter__(self):
        for data, od, td, kp, kl, vp, vl, hp in self._walk():
            headers, _ = parse_headers(data, hp)
            yield Record(wrap64(self.base_offset + od), self._timestamp(td),
                         None if kl < 0 else data[kp : kp + kl],
                         None if vl < 0 else data[vp : vp + vl], headers)

    def records(self) -> list:
        return list(self)

    def values(self) -> list:
        return [None if vl < 0 else data[vp : vp + vl] for data, _, _, _, _, vp, vl, _ in self._walk()]

    def values_led_by(self, leads) -> tuple[list, int]:
        if len(leads) != 256:
            raise ValueError("leads must hold 256 entries")
        out, others = [], 0
        for i, (data, _, _, _, _, vp, vl, _) in enumerate(self._walk()):
            if vl > 0 and leads[data[vp]]:
                out.append((i, bytes(data[vp : vp + vl])))
            else:
                others += 1
        return out, others

    def decode(self) -> DecodedBatch:
        rows = list(self._walk())
        n = len(rows)
        cols = [np.empty(n, np.int64) for _ in range(7)]
        for i, (_, od, td, kp, kl, vp, vl, hp) in enumerate(rows):
            for col, v in zip(cols, (wrap64(self.base_offset + od), self._timestamp(td), kp, kl, vp, vl, hp)):
                col[i] = v
        data = rows[0][0] if rows else b""
        return DecodedBatch(data, *cols, header_parser=_headers_only)

    def __repr__(self):
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"epoch={self.partition_leader_epoch}, count={self.records_count}, size={self.size})")


def _headers_only(data, pos):
    return parse_headers(data, pos)[0]


def iter_batches(buffer, position=0, *, validate=False):
    """Yield each complete batch in ``buffer``; stop silently at an incomplete trailing batch
    (a fetch response or a segment may end mid-batch). A batch whose length field is
    impossible raises CorruptRecordError; with ``validate`` so does a bad CRC."""
    end = len(buffer)
    if position < 0 or position > end:
        raise CorruptRecordError("position outside the buffer")
    while end - position >= LOG_OVERHEAD:
        (length,) = _LENGTH.unpack_from(buffer, position + 8)
        if length < MIN_LENGTH:
            raise CorruptRecordError(f"batch length {length} below the minimum at position {position}")
        if length + LOG_OVERHEAD > end - position:
            return
        batch = RecordBatch(buffer, position)
        if validate:
            batch.validate()
        yield batch
        position += length + LOG_OVERHEAD


def scan_batches(buffer, position=0) -> BatchScan:
    """Validate every batch (framing, magic, CRC, increasing offsets) from ``position`` and
    report them as arrays; stops at the first invalid or incomplete batch (see BatchScan)."""
    end = len(buffer)
    if position < 0 or position > end:
        raise CorruptRecordError("position outside the buffer")
    rows, error, next_offset = [], None, None
    view = memoryview(buffer)
    while position < end:
        avail = end - position
        if avail < BATCH_HEADER_SIZE:
            error = "partial"
            break
        (bo, length, epoch, magic, crc, _attrs, lod, _bts, mts, _pid, _pe, _bs,
         count) = HEADER.unpack_from(buffer, position)
        if length < MIN_LENGTH:
            error = f"invalid batch length {length} at position {position}"
            break
        if length + LOG_OVERHEAD > avail:
            error = "partial"
            break
        if magic != MAGIC_V2:
            error = f"invalid magic {magic} at position {position}"
            break
        if crc32c(view[position + CRC_START : position + length + LOG_OVERHEAD]) != crc:
            error = f"CRC mismatch at position {position}"
            break
        if lod < 0 or count < 0 or (next_offset is not None and bo < next_offset):
            error = f"offsets not increasing at position {position}"
            break
        rows.append((position, bo, wrap64(bo + lod), epoch, mts, length + LOG_OVERHEAD))
        next_offset = wrap64(bo + lod + 1)
        position += length + LOG_OVERHEAD
    arrays = empty_scan_arrays(len(rows))
    for i, row in enumerate(rows):
        for arr, v in zip(arrays, row):
            arr[i] = v
    return BatchScan(*arrays, valid_end=position, error=error)


def assign_offsets(buffer, base_offset: int, partition_leader_epoch: int) -> int:
    """Rewrite BaseOffset and PartitionLeaderEpoch of every batch in the writable ``buffer``
    so offsets run on from ``base_offset`` (neither field is under the CRC). Returns the
    next offset. The buffer must hold only complete batches."""
    end, pos, frames = len(buffer), 0, []
    # Validate all framing first so a bad buffer is left untouched.
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            raise CorruptRecordError("incomplete batch in append buffer")
        (length,) = _LENGTH.unpack_from(buffer, pos + 8)
        if length < MIN_LENGTH or length + LOG_OVERHEAD > end - pos:
            raise CorruptRecordError(f"invalid batch length {length} at position {pos}")
        (lod,) = _LENGTH.unpack_from(buffer, pos + 23)
        if lod < 0:
            raise CorruptRecordError(f"negative last offset delta at position {pos}")
        frames.append((pos, length, lod))
        pos += length + LOG_OVERHEAD
    for pos, length, lod in frames:
        _OFFSET_EPOCH.pack_into(buffer, pos, base_offset, length, partition_leader_epoch)
        base_offset = wrap64(base_offset + lod + 1)
    return base_offset
