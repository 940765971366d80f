"""Decoded batches -> Arrow record batches with the ``kraft-log`` schema, without a Python
object per record.

Keys and values are cut out of the batches' records blocks by Arrow (see ``_binary``):
numpy builds offsets, Arrow's C++ copies the bytes. Only records that carry headers cost Python work (header count byte is
checked vectorised first). Must not read files or know about Spark's planner.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kraft.records import Compression

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
LOG_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.int64()), ("timestamp_type", pa.int32()), ("key", pa.binary()),
    ("value", pa.binary()), ("headers", HEADER_TYPE), ("leader_epoch", pa.int32()),
    ("producer_id", pa.int64()), ("compression", pa.string()), ("error", pa.string()),
])
LOG_DDL = ("topic string, partition int, offset long, timestamp long, timestamp_type int, key binary, "
           "value binary, headers array<struct<key:string,value:binary>>, leader_epoch int, "
           "producer_id long, compression string, error string")
_CODEC_NAMES = pa.array([c.name.lower() for c in sorted(Compression)])
#: Flush an Arrow batch at this many records or record-block bytes, whichever comes first.
MAX_ROWS = 65536
MAX_BYTES = 32 << 20


def _binary(data: np.ndarray, positions: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of the ranges ``[positions, positions + lengths)`` of ``data``; a
    length of -1 is null. Within Kafka records the ranges ascend without overlapping, so
    ``start0, end0, start1, end1, ...`` are valid Arrow offsets of a 2n-element array over
    ``data`` itself (the odd elements are the bytes between two values); taking the even
    elements is then one copy in Arrow's C++, with no per-record Python or numpy work."""
    n = len(lengths)
    valid = lengths >= 0
    lens = np.where(valid, lengths, 0)
    bounds = np.empty(2 * n + 1, np.int64)
    bounds[0:-1:2] = positions
    bounds[1::2] = positions + lens
    bounds[-1] = bounds[-2] if n else 0
    if n and (np.any(np.diff(bounds) < 0) or bounds[0] < 0 or bounds[-1] > len(data)):
        raise ValueError("record ranges are not ascending within their block")
    bitmap = None
    if not valid.all():
        both = np.ones(2 * n, np.bool_)
        both[0::2] = valid
        bitmap = pa.py_buffer(np.packbits(both, bitorder="little"))
    spans = pa.Array.from_buffers(pa.binary(), 2 * n, [bitmap, pa.py_buffer(bounds.astype(np.int32)),
                                                       pa.py_buffer(data)])
    return pc.take(spans, pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))


def _constant_string(value: str, n: int) -> pa.Array:
    return pc.take(pa.array([value], pa.string()), pa.array(np.zeros(n, np.int32)))


class LogBatchAssembler:
    """Collects decoded batches of one partition; ``take()`` returns them as one Arrow batch."""

    def __init__(self, topic: str, partition: int, first_offset: int, end_offset: int):
        self.topic, self.partition = topic, partition
        self.first_offset, self.end_offset = first_offset, end_offset
        self._clear()

    def _clear(self):
        self._blocks, self._decoded, self._meta = [], [], []
        self.rows = 0
        self.bytes = 0

    @property
    def full(self) -> bool:
        return self.rows >= MAX_ROWS or self.bytes >= MAX_BYTES

    def add(self, batch, decoded) -> None:
        if not len(decoded):
            return
        self._blocks.append(np.frombuffer(decoded.data, np.uint8))
        self._decoded.append(decoded)
        self._meta.append((len(decoded), batch.timestamp_type, batch.partition_leader_epoch,
                           batch.producer_id, int(batch.compression)))
        self.rows += len(decoded)
        self.bytes += len(decoded.data)

    def take(self) -> pa.RecordBatch | None:
        if not self.rows:
            return None
        decoded, meta, blocks = self._decoded, self._meta, self._blocks
        shifts = np.zeros(len(blocks), np.int64)
        np.cumsum([len(b) for b in blocks[:-1]], out=shifts[1:])
        data = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
        counts = np.array([m[0] for m in meta], np.int64)
        shift = np.repeat(shifts, counts)

        def col(name):
            return np.concatenate([getattr(d, name) for d in decoded])

        offsets = col("offsets")
        keep = (offsets >= self.first_offset) & (offsets < self.end_offset)
        per_batch = [np.repeat(np.array([m[i] for m in meta], dt), counts) for i, dt in
                     ((1, np.int32), (2, np.int32), (3, np.int64), (4, np.int32))]
        headers = self._headers(data, col("header_positions") + shift)
        arrays = [
            None, None, pa.array(offsets), pa.array(col("timestamps")), pa.array(per_batch[0]),
            _binary(data, col("key_positions") + shift, col("key_lengths")),
            _binary(data, col("value_positions") + shift, col("value_lengths")),
            headers, pa.array(per_batch[1]), pa.array(per_batch[2]),
            pc.take(_CODEC_NAMES, pa.array(per_batch[3])), pa.nulls(len(offsets), pa.string()),
        ]
        n = len(offsets)
        arrays[0] = _constant_string(self.topic, n)
        arrays[1] = pa.array(np.full(n, self.partition, np.int32))
        out = pa.RecordBatch.from_arrays(arrays, schema=LOG_SCHEMA)
        if not keep.all():
            out = out.filter(pa.array(keep))
        self._clear()
        return out

    def _headers(self, data: np.ndarray, header_positions: np.ndarray) -> pa.Array:
        """Header count 0 is the single byte 0: only the other records are parsed in Python."""
        n = len(header_positions)
        has = np.nonzero(data[header_positions] != 0)[0] if n else np.empty(0, np.int64)
        counts = np.zeros(n, np.int32)
        keys, values = [], []
        if len(has):
            starts = np.zeros(len(self._decoded) + 1, np.int64)
            np.cumsum([len(d) for d in self._decoded], out=starts[1:])
            which = np.searchsorted(starts, has, side="right") - 1
            for i, b in zip(has.tolist(), which.tolist()):
                pairs = self._decoded[b].headers(i - int(starts[b]))
                counts[i] = len(pairs)
                for k, v in pairs:
                    keys.append(k)
                    values.append(v)
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        items = pa.StructArray.from_arrays([pa.array(keys, pa.string()), pa.array(values, pa.binary())],
                                           fields=list(HEADER_TYPE.value_type))
        return pa.ListArray.from_arrays(pa.array(offsets), items, type=HEADER_TYPE)


def error_batch(topic: str, partition: int, offset: int, message: str) -> pa.RecordBatch:
    """The one row PERMISSIVE mode reports for a damaged slice: ``offset`` is the first offset
    that could not be read, ``error`` says where and why."""
    row = {name: [None] for name in LOG_SCHEMA.names}
    row.update(topic=[topic], partition=[partition], offset=[offset], error=[message])
    return pa.RecordBatch.from_pydict(row, schema=LOG_SCHEMA)
