"""The record model: Kafka RecordBatch v2 encode/decode, CRC-32C, varints, control records.

Two implementations with one API: the compiled one in ``kraft._native._records`` (default)
and a pure-Python reference (``KRAFT_NO_EXTENSIONS=1``, or when the extension is missing).
``IMPLEMENTATION`` says which one was loaded. This package does no I/O and must not import
asyncio or anything above it in the layer graph.

Main entry points::

    build_batch(values, keys=None, headers=None, timestamps=None, *, base_offset=0,
                partition_leader_epoch=-1, timestamp=None, compression=Compression.NONE, ...)
    build_control_batch(control_type, value, *, base_offset=0, partition_leader_epoch=-1, timestamp=None)
    RecordBatchBuilder(...).append(value, key=None, headers=None, timestamp=None) / .build()
    RecordBatch(buffer, position=0)       # header now, records lazily; .validate(), iter, .decode()
    iter_batches(buffer, position=0, *, validate=False)
    scan_batches(buffer, position=0) -> BatchScan
    assign_offsets(writable_buffer, base_offset, partition_leader_epoch) -> next_offset
    check_writer_batches(buffer, max_batch_bytes, max_batch_records, allow_control, allow_null_values)
    log_columns(buffer, positions, first_offset, end_offset) -> tuple of column buffers
    crc32c(data, value=0)
"""

from __future__ import annotations

import os

from kraft.errors import CorruptRecordError, InvalidRecordError, UnsupportedCodecError
from kraft.records import compression as _compression
from kraft.records.control import (
    Endpoint,
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    Voter,
    VotersRecord,
    control_key,
    decode_control_key,
    decode_control_record,
    encode_control_value,
)
from kraft.records.format import Compression, ControlType, TimestampType
from kraft.records.results import BatchScan, DecodedBatch


def _load_native():
    from types import SimpleNamespace

    from kraft._native import _buffer, _builder, _columns, _crc, _reader, _scan

    _buffer.configure(
        corrupt_error=CorruptRecordError,
        codec_error=UnsupportedCodecError,
        compress=_compression.compress,
        decompress=_compression.decompress,
        decoded_batch=DecodedBatch,
    )
    return SimpleNamespace(
        RecordBatchBuilder=_builder.RecordBatchBuilder, build_batch=_builder.build_batch,
        build_control_batch=_builder.build_control_batch, RecordBatch=_reader.RecordBatch,
        Record=_reader.Record, iter_batches=_reader.iter_batches, scan_batches=_scan.scan_batches,
        assign_offsets=_scan.assign_offsets, check_writer_batches=_scan.check_writer_batches, crc32c=_crc.crc32c,
        crc32c_implementation=_crc.crc32c_implementation, encode_varint=_crc.encode_varint,
        decode_varint=_crc.decode_varint, encode_unsigned_varint=_crc.encode_unsigned_varint,
        decode_unsigned_varint=_crc.decode_unsigned_varint, size_of_varint=_crc.size_of_varint,
        log_columns=_columns.log_columns,
    )


def _load_pure():
    from types import SimpleNamespace

    from kraft.records import _pure_builder as b
    from kraft.records import _pure_check as k
    from kraft.records import _pure_columns as cols
    from kraft.records import _pure_crc as c
    from kraft.records import _pure_reader as r
    from kraft.records import _pure_varint as v

    return SimpleNamespace(
        RecordBatchBuilder=b.RecordBatchBuilder, build_batch=b.build_batch,
        build_control_batch=b.build_control_batch, RecordBatch=r.RecordBatch, Record=r.Record,
        iter_batches=r.iter_batches, scan_batches=r.scan_batches, assign_offsets=r.assign_offsets,
        check_writer_batches=k.check_writer_batches,
        crc32c=c.crc32c, crc32c_implementation=lambda: "python",
        encode_varint=v.encode_varint, decode_varint=v.decode_varint,
        encode_unsigned_varint=v.encode_unsigned_varint,
        decode_unsigned_varint=v.decode_unsigned_varint, size_of_varint=v.size_of_varint,
        log_columns=cols.log_columns,
    )


NATIVE_IMPORT_ERROR: Exception | None = None
if os.environ.get("KRAFT_NO_EXTENSIONS"):
    _impl = _load_pure()
    IMPLEMENTATION = "python"
else:
    try:
        _impl = _load_native()
        IMPLEMENTATION = "native"
    except ImportError as exc:  # not built: fall back, but say so (tests assert on IMPLEMENTATION)
        NATIVE_IMPORT_ERROR = exc
        _impl = _load_pure()
        IMPLEMENTATION = "python"

RecordBatchBuilder = _impl.RecordBatchBuilder
build_batch = _impl.build_batch
build_control_batch = _impl.build_control_batch
RecordBatch = _impl.RecordBatch
Record = _impl.Record
iter_batches = _impl.iter_batches
scan_batches = _impl.scan_batches
assign_offsets = _impl.assign_offsets
check_writer_batches = _impl.check_writer_batches
crc32c = _impl.crc32c
crc32c_implementation = _impl.crc32c_implementation
encode_varint = _impl.encode_varint
decode_varint = _impl.decode_varint
encode_unsigned_varint = _impl.encode_unsigned_varint
decode_unsigned_varint = _impl.decode_unsigned_varint
size_of_varint = _impl.size_of_varint
#: ``log_columns(buffer, positions, first_offset, end_offset)``: the records with offsets in
#: ``[first_offset, end_offset)`` of the (CRC-checked) batches at ``positions`` as Arrow-layout
#: buffers, a tuple: offsets, timestamps, timestamp types, leader epochs, producer ids, codecs
#: (one entry per row); key validity bitmap, key offsets (int32, rows + 1), key bytes; the
#: same three for values; header list offsets (rows + 1); header key offsets and bytes;
#: header value validity, offsets and bytes. Raises CorruptRecordError naming the batch.
log_columns = _impl.log_columns


def build_control_record_batch(message, *, base_offset=0, partition_leader_epoch=-1, timestamp=None) -> bytes:
    """A control batch holding one control message (e.g. LeaderChangeMessage)."""
    return build_control_batch(message.TYPE, encode_control_value(message), base_offset=base_offset,
                               partition_leader_epoch=partition_leader_epoch, timestamp=timestamp)


def implementation(name: str):
    """The codec namespace ``"native"`` or ``"python"``, for tests and benchmarks that
    compare both in one process. Raises ImportError if the native one is not built."""
    return _load_native() if name == "native" else _load_pure()


__all__ = [
    "IMPLEMENTATION", "BatchScan", "Compression", "ControlType", "CorruptRecordError",
    "DecodedBatch", "Endpoint", "InvalidRecordError", "KRaftVersionRecord", "LeaderChangeMessage",
    "Record", "RecordBatch", "RecordBatchBuilder", "SnapshotFooterRecord", "SnapshotHeaderRecord",
    "TimestampType", "UnsupportedCodecError", "Voter", "VotersRecord", "assign_offsets", "check_writer_batches",
    "build_batch", "build_control_batch", "build_control_record_batch", "control_key",
    "crc32c", "crc32c_implementation", "decode_control_key", "decode_control_record",
    "decode_unsigned_varint", "decode_varint", "encode_control_value", "encode_unsigned_varint",
    "encode_varint", "implementation", "iter_batches", "log_columns", "scan_batches", "size_of_varint",
]
