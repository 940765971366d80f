"""Pure-Python twin of ``kraft/_native/_columns.pyx``: the records of many batches of a
segment slice as Arrow-layout column buffers (numpy arrays). Same inputs, same arrays, same
errors; slow (a Python loop per record). Reading only.
"""

from __future__ import annotations

import numpy as np

from kraft.errors import CorruptRecordError
from kraft.records import _pure_reader
from kraft.records.format import COMPRESSION_MASK as ATTR_COMPRESSION
from kraft.records.format import TIMESTAMP_TYPE_MASK as ATTR_TIMESTAMP_TYPE


def _bitmap(flags: list) -> np.ndarray:
    bits = np.packbits(np.array(flags, np.bool_), bitorder="little") if flags else np.zeros(0, np.uint8)
    out = np.zeros((len(flags) + 7) // 8, np.uint8)
    out[: len(bits)] = bits
    return out


def _binary(items: list) -> tuple:
    valid = [x is not None for x in items]
    lengths = [0 if x is None else len(x) for x in items]
    offsets = np.zeros(len(items) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = np.frombuffer(b"".join(x for x in items if x), np.uint8).copy()
    return _bitmap(valid), offsets, data


def log_columns(buffer, positions, first_offset: int, end_offset: int) -> tuple:
    cols = {k: [] for k in ("offsets", "timestamps", "ts_types", "epochs", "producers", "codecs", "keys",
                            "values", "header_counts", "hkeys", "hvalues")}
    for pos in np.asarray(positions, np.int64).tolist():
        try:
            batch = _pure_reader.RecordBatch(buffer, pos)
            recs = batch.records()
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{exc} in batch at position {pos}") from exc
        for r in recs:
            if not first_offset <= r.offset < end_offset:
                continue
            cols["offsets"].append(r.offset)
            cols["timestamps"].append(r.timestamp)
            cols["ts_types"].append(1 if batch.attributes & ATTR_TIMESTAMP_TYPE else 0)
            cols["epochs"].append(batch.partition_leader_epoch)
            cols["producers"].append(batch.producer_id)
            cols["codecs"].append(batch.attributes & ATTR_COMPRESSION)
            cols["keys"].append(r.key)
            cols["values"].append(r.value)
            cols["header_counts"].append(len(r.headers))
            for k, v in r.headers:
                cols["hkeys"].append(k.encode("utf-8"))
                cols["hvalues"].append(v)
    header_offsets = np.zeros(len(cols["offsets"]) + 1, np.int32)
    np.cumsum(cols["header_counts"], out=header_offsets[1:])
    key_valid, key_offsets, key_data = _binary(cols["keys"])
    value_valid, value_offsets, value_data = _binary(cols["values"])
    _, hkey_offsets, hkey_data = _binary(cols["hkeys"])
    hvalue_valid, hvalue_offsets, hvalue_data = _binary(cols["hvalues"])
    return (np.array(cols["offsets"], np.int64), np.array(cols["timestamps"], np.int64),
            np.array(cols["ts_types"], np.int32), np.array(cols["epochs"], np.int32),
            np.array(cols["producers"], np.int64), np.array(cols["codecs"], np.int8),
            key_valid, key_offsets, key_data, value_valid, value_offsets, value_data, header_offsets,
            hkey_offsets, hkey_data, hvalue_valid, hvalue_offsets, hvalue_data)
