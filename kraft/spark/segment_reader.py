"""Reading one input partition's file in a Spark executor: the valid batches of a segment
or snapshot slice, each decoded by the native codec into numpy arrays.

Every batch is CRC-checked by the scan before it is decoded. Damage ends the slice: the
batches before it are yielded, then :class:`CorruptSliceError` says where it is (after a
bad batch there is no trustworthy length to resynchronise on, exactly as for log recovery).
Reading only: nothing here writes, truncates or repairs a file.
"""

from __future__ import annotations

from kraft import records
from kraft.errors import CorruptRecordError
from kraft.spark.layout import FileSlice


class CorruptSliceError(CorruptRecordError):
    """A slice's file holds an invalid batch at ``position`` (after ``last_good_offset``)."""

    def __init__(self, path: str, position: int, last_good_offset: int, reason: str):
        super().__init__(f"{path}: invalid batch at position {position} "
                         f"(after offset {last_good_offset}): {reason}")
        self.path = path
        self.position = position
        self.last_good_offset = last_good_offset


def read_file(fs: FileSlice) -> bytes:
    with open(fs.path, "rb") as f:
        f.seek(fs.position)
        return f.read()


def iter_decoded(fs: FileSlice, buf: bytes | None = None):
    """``(RecordBatch, DecodedBatch)`` for every batch of ``fs`` that can hold an offset in
    ``[fs.first_offset, fs.end_offset)``; raises CorruptSliceError at the first invalid one
    (a torn tail included: a reader cannot tell it from damage)."""
    if buf is None:
        buf = read_file(fs)
    scan = records.scan_batches(buf)
    last_good = fs.first_offset - 1
    for j in range(len(scan)):
        if scan.base_offsets[j] >= fs.end_offset:
            return
        if scan.last_offsets[j] < fs.first_offset:
            continue
        pos = int(scan.positions[j])
        batch = records.RecordBatch(buf, pos)
        try:
            decoded = batch.decode()
        except CorruptRecordError as exc:  # e.g. a compressed block that does not inflate
            raise CorruptSliceError(fs.path, fs.position + pos, last_good, str(exc)) from exc
        yield batch, decoded
        last_good = int(scan.last_offsets[j])
    if scan.error is not None and last_good + 1 < fs.end_offset:
        # (damage after the last wanted offset is not this slice's: e.g. a batch a live
        # node is still writing, past the end of a streaming micro-batch)
        raise CorruptSliceError(fs.path, fs.position + scan.valid_end, last_good, scan.error)
