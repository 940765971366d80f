"""Column buffers of ``kraft.records.log_columns`` -> Arrow record batches with the
``kraft-log`` schema, without a Python object per record.

The native codec fills Arrow's own layout (validity bitmaps, int32 offsets, contiguous
bytes) for keys, values and headers, so each column here is wrapped, not copied; the
constant columns (topic, partition) and the codec names are built by numpy. Must not read
files or know about Spark's planner.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kraft.records import Compression

HEADER_STRUCT = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADER_TYPE = pa.list_(HEADER_STRUCT)
LOG_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.int64()), ("timestamp_type", pa.int32()), ("key", pa.binary()),
    ("value", pa.binary()), ("headers", HEADER_TYPE), ("leader_epoch", pa.int32()),
    ("producer_id", pa.int64()), ("compression", pa.string()), ("error", pa.string()),
])
LOG_DDL = ("topic string, partition int, offset long, timestamp long, timestamp_type int, key binary, "
           "value binary, headers array<struct<key:string,value:binary>>, leader_epoch int, "
           "producer_id long, compression string, error string")
_CODEC_NAMES = [c.name.lower() for c in sorted(Compression)]
#: Flush an Arrow batch at about this many record-block bytes (a chunk of whole batches).
MAX_BYTES = 4 << 20


def _buf(a: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(a)


def _binary(kind, n: int, valid, offsets, data) -> pa.Array:
    return pa.Array.from_buffers(kind, n, [None if valid is None else _buf(valid), _buf(offsets), _buf(data)])


def constant_string(value: str, n: int) -> pa.Array:
    raw = value.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, _buf(offsets), pa.py_buffer(raw * n)])


def _codec_names(codecs: np.ndarray) -> pa.Array:
    n = len(codecs)
    if n and (codecs == codecs[0]).all() and 0 <= codecs[0] < len(_CODEC_NAMES):
        return constant_string(_CODEC_NAMES[codecs[0]], n)
    return pc.take(pa.array(_CODEC_NAMES), pa.array(codecs.astype(np.int32)))


def columns_to_arrow(topic: str, partition: int, cols: tuple) -> pa.RecordBatch:
    """One Arrow batch from one ``log_columns`` result. Raises ValueError if a header key
    is not UTF-8 (the only column whose bytes Arrow gives a meaning to)."""
    (offsets, timestamps, ts_types, epochs, producers, codecs, key_valid, key_offsets, key_data,
     value_valid, value_offsets, value_data, header_offsets, hkey_offsets, hkey_data, hvalue_valid,
     hvalue_offsets, hvalue_data) = cols
    n, nh = len(offsets), len(hkey_offsets) - 1
    hkeys = _binary(pa.string(), nh, None, hkey_offsets, hkey_data)
    if nh:
        try:
            hkeys.validate(full=True)
        except pa.ArrowInvalid as exc:
            raise ValueError(f"a header key is not UTF-8: {exc}") from exc
    items = pa.StructArray.from_arrays([hkeys, _binary(pa.binary(), nh, hvalue_valid, hvalue_offsets, hvalue_data)],
                                       fields=list(HEADER_STRUCT))
    headers = pa.Array.from_buffers(HEADER_TYPE, n, [None, _buf(header_offsets)], children=[items])
    arrays = [
        constant_string(topic, n), pa.array(np.full(n, partition, np.int32)), pa.array(offsets),
        pa.array(timestamps), pa.array(ts_types),
        _binary(pa.binary(), n, key_valid, key_offsets, key_data),
        _binary(pa.binary(), n, value_valid, value_offsets, value_data),
        headers, pa.array(epochs), pa.array(producers), _codec_names(codecs), pa.nulls(n, pa.string()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=LOG_SCHEMA)


def error_batch(topic: str, partition: int, offset: int, message: str) -> pa.RecordBatch:
    """The one row PERMISSIVE mode reports for a damaged slice: ``offset`` is the first offset
    that could not be read, ``error`` says where and why."""
    row = {name: [None] for name in LOG_SCHEMA.names}
    row.update(topic=[topic], partition=[partition], offset=[offset], error=[message])
    return pa.RecordBatch.from_pydict(row, schema=LOG_SCHEMA)
