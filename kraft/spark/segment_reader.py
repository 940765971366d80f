"""Reading one input partition's file in a Spark executor: the valid batches of a segment
or snapshot slice, each decoded by the native codec into numpy arrays.

Every batch is CRC-checked by the scan before it is decoded. Damage ends the slice: the
batches before it are yielded, then :class:`CorruptSliceError` says where it is (after a
bad batch there is no trustworthy length to resynchronise on, exactly as for log recovery).
Reading only: nothing here writes, truncates or repairs a file.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from kraft import records
from kraft.errors import CorruptRecordError
from kraft.spark.layout import NO_LIMIT, FileSlice


class CorruptSliceError(CorruptRecordError):
    """A slice's file holds an invalid batch at ``position`` (after ``last_good_offset``)."""

    def __init__(self, path: str, position: int, last_good_offset: int, reason: str):
        super().__init__(f"{path}: invalid batch at position {position} "
                         f"(after offset {last_good_offset}): {reason}")
        self.path = path
        self.position = position
        self.last_good_offset = last_good_offset


def read_file(fs: FileSlice):
    """The slice's bytes, memory-mapped (read-only; the decoders copy what they keep, so the
    page cache is read once, with no copy into a Python bytes object first)."""
    with open(fs.path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        end = size if fs.end_position < 0 else min(fs.end_position, size)
        if end <= fs.position:
            return b""
        aligned = fs.position - fs.position % mmap.ALLOCATIONGRANULARITY
        mapped = mmap.mmap(f.fileno(), end - aligned, access=mmap.ACCESS_READ, offset=aligned)
    return memoryview(mapped)[fs.position - aligned:]


def scan_slice(fs: FileSlice):
    """``(buf, scan, selected, shift, error)``: the slice's bytes (``buf[0]`` is file
    position ``shift``), their batch scan, the indices of the scanned batches that belong to
    the slice, and the scan's error if it is this slice's.

    Positions from the ``.index`` are hints: if the slice's bytes are not whole valid
    batches (a stale index, or damage), the file is scanned from its start instead, and the
    slice's batches are those starting in ``[position, end_position)`` (from 0 for a
    segment's first slice, whose start only skipped batches below ``first_offset``)."""
    buf = read_file(fs)
    scan = records.scan_batches(buf)
    if (scan.error is None and scan.valid_end == len(buf)) or (fs.position == 0 and fs.end_position < 0):
        return buf, scan, np.arange(len(scan)), fs.position, scan.error
    buf = read_file(FileSlice(fs.path, fs.kind))
    scan = records.scan_batches(buf)
    lo = 0 if fs.first_piece else fs.position
    hi = NO_LIMIT if fs.end_position < 0 else fs.end_position
    selected = np.nonzero((scan.positions >= lo) & (scan.positions < hi))[0]
    # damage in a later slice is that one's to report; after damage in an earlier one
    # nothing of this slice is reachable (no trustworthy length to resynchronise on)
    mine = scan.error is not None and lo <= scan.valid_end < hi
    return buf, scan, selected, 0, scan.error if mine else None


def iter_chunks(fs: FileSlice, max_bytes: int):
    """``(buf, positions)`` runs of whole batches of ``fs`` that can hold an offset in
    ``[fs.first_offset, fs.end_offset)``, about ``max_bytes`` each, for
    ``records.log_columns``; raises CorruptSliceError after the last valid batch if the
    slice is damaged before ``end_offset`` (a torn tail included)."""
    buf, scan, selected, shift, error = scan_slice(fs)
    bases, lasts = scan.base_offsets[selected], scan.last_offsets[selected]
    keep = selected[(lasts >= fs.first_offset) & (bases < fs.end_offset)]
    positions, sizes = scan.positions[keep], scan.sizes[keep]
    start, acc = 0, 0
    for i, size in enumerate(sizes.tolist()):
        acc += size
        if acc >= max_bytes or i == len(sizes) - 1:
            yield buf, positions[start:i + 1], shift
            start, acc = i + 1, 0
    last_valid = int(scan.last_offsets[selected[-1]]) if len(selected) else fs.first_offset - 1
    last_good = max(last_valid, fs.first_offset - 1)
    if error is not None and last_good + 1 < fs.end_offset:
        raise CorruptSliceError(fs.path, shift + scan.valid_end, last_good, error)


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
