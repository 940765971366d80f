"""Pure-Python twin of the native ``check_writer_batches`` (``kraft._native._scan``): the
same checks, outcomes and trimming, for ``KRAFT_NO_EXTENSIONS=1`` and for differential
tests. See ``kraft.records.validation`` for what the outcomes mean."""

from __future__ import annotations

import struct

from kraft.errors import CorruptRecordError
from kraft.records._pure_crc import crc32c
from kraft.records._pure_varint import decode_varint

OK, CORRUPT, INVALID_RECORD, TOO_LARGE, NO_KEY, BAD_TIMESTAMP = 0, 1, 2, 3, 4, 5
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_HEADER_SIZE, _MIN_LENGTH, _MIN_RECORD_SIZE = 61, 49, 7
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


class _Stop(Exception):
    def __init__(self, outcome: int, why: str):
        super().__init__(why)
        self.outcome = outcome
        self.why = why


def _v32(data, pos: int, end: int, what: str):
    try:
        v, new = decode_varint(data[:end], pos)
    except CorruptRecordError:
        raise _Stop(CORRUPT, f"invalid {what}") from None
    if new - pos > 5 or not -(1 << 31) <= v < (1 << 31):
        raise _Stop(CORRUPT, f"invalid {what}")
    return v, new


def _walk_records(data, p: int, end: int, count: int, allow_null_values: bool, require_keys: bool = False,
                  bounds: tuple = (_I64_MIN, _I64_MAX), base_timestamp: int = 0) -> None:
    rule = None  # reported once the block is known to be well formed, as the native walker does
    for i in range(count):
        length, p = _v32(data, p, end, "record length")
        if length < _MIN_RECORD_SIZE - 1 or length > end - p:
            raise _Stop(CORRUPT, "invalid record length")
        rec_end = p + length
        p += 1
        try:
            ts_delta, p = decode_varint(data[:rec_end], p)
        except CorruptRecordError:
            raise _Stop(CORRUPT, "invalid timestamp delta") from None
        delta, p = _v32(data, p, rec_end, "offset delta")
        if delta != i:
            raise _Stop(INVALID_RECORD, "record offset deltas must run 0, 1, 2, ... within a batch")
        klen, p = _v32(data, p, rec_end, "key length")
        if klen < -1 or klen > rec_end - p:
            raise _Stop(CORRUPT, "invalid key length")
        p += max(klen, 0)
        if rule is None:
            ts = (base_timestamp + ts_delta + (1 << 63)) % (1 << 64) - (1 << 63)
            if klen < 0 and require_keys:
                rule = _Stop(NO_KEY, "a compacted topic cannot accept a record without a key")
            elif ts != -1 and not bounds[0] <= ts <= bounds[1]:
                rule = _Stop(BAD_TIMESTAMP, "a record timestamp is out of range")
        vlen, p = _v32(data, p, rec_end, "value length")
        if vlen < -1 or vlen > rec_end - p:
            raise _Stop(CORRUPT, "invalid value length")
        if vlen == -1 and not allow_null_values:
            raise _Stop(INVALID_RECORD, "records need a value (null values are not accepted)")
        p += max(vlen, 0)
        nheaders, p = _v32(data, p, rec_end, "header count")
        if nheaders < 0:
            raise _Stop(CORRUPT, "invalid header count")
        for _ in range(nheaders):
            hk, p = _v32(data, p, rec_end, "header key length")
            if hk < 0 or hk > rec_end - p:
                raise _Stop(CORRUPT, "invalid header key length")
            p += hk
            hv, p = _v32(data, p, rec_end, "header value length")
            if hv < -1 or hv > rec_end - p:
                raise _Stop(CORRUPT, "invalid header value length")
            p += max(hv, 0)
        if p != rec_end:
            raise _Stop(CORRUPT, "record length does not match its fields")
    if p != end:
        raise _Stop(CORRUPT, "bytes left after the last record")
    if rule is not None:
        raise rule


def check_writer_batches(buffer, max_batch_bytes: int, max_batch_records: int, allow_control: bool,
                         allow_null_values: bool, require_keys: bool = False, min_timestamp: int = _I64_MIN,
                         max_timestamp: int = _I64_MAX):
    data = memoryview(buffer).cast("B")
    pos, end, records, compressed, batch_at = 0, len(data), 0, False, 0
    try:
        while end - pos >= _HEADER_SIZE:
            (length,) = _I32.unpack_from(data, pos + 8)
            if length < _MIN_LENGTH:
                raise _Stop(CORRUPT, "invalid batch length")
            size = length + 12
            if size > end - pos:
                break
            batch_at = pos
            if data[pos + 16] != 2:
                raise _Stop(CORRUPT, "unsupported magic (only RecordBatch v2)")
            if crc32c(data[pos + 21 : pos + size]) != struct.unpack_from(">I", data, pos + 17)[0]:
                raise _Stop(CORRUPT, "CRC mismatch")
            (attributes,) = _I16.unpack_from(data, pos + 21)
            if attributes & 0x20 and not allow_control:
                raise _Stop(CORRUPT, "control batches cannot be produced")
            (lod,) = _I32.unpack_from(data, pos + 23)
            (count,) = _I32.unpack_from(data, pos + 57)
            if count <= 0 or lod < 0 or count != lod + 1:
                raise _Stop(INVALID_RECORD, "RecordsCount does not match LastOffsetDelta + 1")
            if size > max_batch_bytes:
                raise _Stop(TOO_LARGE, "record batch is over the size limit")
            if count > max_batch_records:
                raise _Stop(TOO_LARGE, "record batch holds more records than the limit")
            if attributes & 0x07:
                compressed = True
            else:
                if count > (size - _HEADER_SIZE) // _MIN_RECORD_SIZE:
                    raise _Stop(CORRUPT, "record count impossible in the batch size")
                (base_timestamp,) = struct.unpack_from(">q", data, pos + 27)
                _walk_records(data, pos + _HEADER_SIZE, pos + size, count, allow_null_values, require_keys,
                              (min_timestamp, max_timestamp), base_timestamp)
            records += count
            pos += size
    except _Stop as stop:
        return stop.outcome, 0, compressed, pos, f"batch at byte {batch_at}: {stop.why}"
    return OK, records, compressed, pos, None
