"""The offset index (``.index``) and time index (``.timeindex``) of one segment.

Kafka's formats: ``.index`` holds 8-byte entries ``(int32 last offset of a batch − segment
base offset, int32 file position of that batch)``; ``.timeindex`` holds 12-byte entries
``(int64 max timestamp so far, int32 its batch's last offset − base)``, all big-endian.
Unlike Kafka we do not preallocate: the files are exactly the entries, so a Kafka tool
reading them sees no zero padding.

Entries live in memory (numpy arrays) and are written through to the files as they are
added. An index is only ever a hint for lookups: after a crash the tail segment's index
is rebuilt from a scan, and any index that fails its sanity check is rebuilt. This module
never reads or validates the ``.log`` file itself; which batches get entries is decided by
``IndexBuilder`` from the hot loops.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from kraft.errors import FatalLogError
from kraft.log import files, hotloops

_OFFSET_DTYPE = np.dtype([("rel", ">i4"), ("pos", ">i4")])
_TIME_DTYPE = np.dtype([("ts", ">i8"), ("rel", ">i4")])
OFFSET_ENTRY_SIZE = _OFFSET_DTYPE.itemsize
#: Entries of the active segment buffered in memory before they are written to its files.
PERSIST_EVERY = 128
TIME_ENTRY_SIZE = _TIME_DTYPE.itemsize


class IndexCorruptError(Exception):
    """Raised by :meth:`SegmentIndex.load` when the files fail the sanity check; the
    caller rebuilds the index from the segment. Internal to ``kraft.log``."""


class _Column:
    """A growable numpy array (amortised appends, views for lookups)."""

    __slots__ = ("data", "n")

    def __init__(self, dtype, values=None):
        self.data = np.empty(16, dtype) if values is None or not len(values) else np.array(values, dtype)
        self.n = 0 if values is None else len(values)

    def extend(self, values) -> None:
        need = self.n + len(values)
        if need > len(self.data):
            grown = np.empty(max(need, 2 * len(self.data)), self.data.dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        self.data[self.n : need] = values
        self.n = need

    def append(self, value) -> None:
        n = self.n
        if n == len(self.data):
            grown = np.empty(2 * n, self.data.dtype)
            grown[:n] = self.data[:n]
            self.data = grown
        self.data[n] = value
        self.n = n + 1

    def view(self) -> np.ndarray:
        return self.data[: self.n]


class SegmentIndex:
    """Offset and time index of the segment with ``base_offset`` in ``directory``.

    ``builder`` carries the running state that decides where the next entries go, so
    incremental appends and a rebuild from a full scan produce identical files."""

    def __init__(self, directory: str, base_offset: int, interval: int):
        self.base_offset = base_offset
        self.interval = interval
        self.offset_path = os.path.join(directory, files.segment_name(base_offset, files.INDEX_SUFFIX))
        self.time_path = os.path.join(directory, files.segment_name(base_offset, files.TIME_INDEX_SUFFIX))
        self.rel = _Column(np.int32)
        self.pos = _Column(np.int32)
        self.ts = _Column(np.int64)
        self.trel = _Column(np.int32)
        self.builder = hotloops.IndexBuilder(base_offset, interval)
        self.loaded = False
        # Entries already in the files; the rest are written in groups (see add_batches).
        self._written = (0, 0)

    # --- files ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _files(self):
        """Both index files, open only for the write at hand: a broker holds thousands of
        segments, and two descriptors each kept open ran a node with 10,000 partitions out of
        file descriptors (the ``.log`` descriptor is all a segment keeps)."""
        try:
            fd_off = os.open(self.offset_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise FatalLogError(f"cannot open index files of segment {self.base_offset}: {exc}") from exc
        try:
            try:
                fd_time = os.open(self.time_path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise FatalLogError(f"cannot open index files of segment {self.base_offset}: {exc}") from exc
            try:
                yield fd_off, fd_time
            finally:
                os.close(fd_time)
        finally:
            os.close(fd_off)

    def close(self) -> None:
        """Nothing stays open between writes (kept for the segment's lifecycle calls)."""

    def persist(self) -> None:
        """Write the entries not yet in the files."""
        off, tim = self._written
        if off < self.rel.n or tim < self.ts.n:
            self._write_entries(off, self.rel.data[off : self.rel.n], self.pos.data[off : self.pos.n],
                                tim, self.ts.data[tim : self.ts.n], self.trel.data[tim : self.trel.n])
            self._written = (self.rel.n, self.ts.n)

    def sync(self) -> None:
        """Write pending entries and fdatasync both files (at roll and close; the active
        segment's index may lag on disk: it is rebuilt from the scan after a crash)."""
        self.persist()
        with self._files() as (fd_off, fd_time):
            files.fdatasync(fd_off, self.offset_path)
            files.fdatasync(fd_time, self.time_path)

    def delete_files(self) -> None:
        self.close()
        for path in (self.offset_path, self.time_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _write_entries(self, first_offset_entry: int, rel, pos, first_time_entry: int, ts, trel, fds=None) -> None:
        with (contextlib.nullcontext(fds) if fds is not None else self._files()) as (fd_off, fd_time):
            if len(rel):
                rec = np.empty(len(rel), _OFFSET_DTYPE)
                rec["rel"], rec["pos"] = rel, pos
                files.write_all(fd_off, rec.tobytes(), first_offset_entry * OFFSET_ENTRY_SIZE, self.offset_path)
            if len(ts):
                rec = np.empty(len(ts), _TIME_DTYPE)
                rec["ts"], rec["rel"] = ts, trel
                files.write_all(fd_time, rec.tobytes(), first_time_entry * TIME_ENTRY_SIZE, self.time_path)

    def _truncate_files(self, fds=None) -> None:
        with (contextlib.nullcontext(fds) if fds is not None else self._files()) as (fd_off, fd_time):
            try:
                os.ftruncate(fd_off, self.rel.n * OFFSET_ENTRY_SIZE)
                os.ftruncate(fd_time, self.ts.n * TIME_ENTRY_SIZE)
            except OSError as exc:
                raise FatalLogError(f"cannot truncate index files of segment {self.base_offset}: {exc}") from exc
        self._written = (min(self._written[0], self.rel.n), min(self._written[1], self.ts.n))

    # --- building ------------------------------------------------------------------------
    def add_batches(self, positions, last_offsets, max_timestamps, sizes, shift: int = 0) -> None:
        """Index newly appended batches (arrays in file order; ``positions + shift`` are
        their file positions)."""
        rel, pos, ts, trel = self.builder.add(*_i64(positions, last_offsets, max_timestamps, sizes), shift)
        if len(rel):
            self.rel.extend(rel)
            self.pos.extend(pos)
        if len(ts):
            self.ts.extend(ts)
            self.trel.extend(trel)
        # One small write per PERSIST_EVERY entries instead of one per append.
        if self.rel.n - self._written[0] >= PERSIST_EVERY:
            self.persist()

    def add_scan(self, scan, shift: int) -> None:
        """Index the batches of an append's ``scan`` (``add_batches`` of its arrays); one
        batch, the usual append, goes through the builder's scalar step without arrays."""
        if len(scan) != 1:
            self.add_batches(scan.positions, scan.last_offsets, scan.max_timestamps, scan.sizes, shift)
            return
        entry = self.builder.add_one(scan.last_position + shift, scan.last_offset, scan.max_timestamp,
                                     scan.max_size)
        if entry is None:
            return
        rel, pos, ts, trel = entry
        self.rel.append(rel)
        self.pos.append(pos)
        if ts is not None:
            self.ts.append(ts)
            self.trel.append(trel)
        if self.rel.n - self._written[0] >= PERSIST_EVERY:
            self.persist()

    def replay(self, positions, last_offsets, max_timestamps, sizes) -> None:
        """Feed batches that are already indexed through the builder (after a truncation),
        so its running state is what a rebuild would have."""
        self.builder.add(*_i64(positions, last_offsets, max_timestamps, sizes))

    def rebuild(self, positions, last_offsets, max_timestamps, sizes) -> bool:
        """Replace the index with one built from a full scan of the segment; the files are
        rewritten only if they differ. Returns True if they were rewritten."""
        old = (self.entries(), self.time_entries()) if self.loaded else None
        if old is None:
            old = self._read_files()
        rel, pos, ts, trel = self._build(positions, last_offsets, max_timestamps, sizes)
        if old is not None and _same(old, (self.entries(), self.time_entries())):
            self._written = (self.rel.n, self.ts.n)
            return False
        with self._files() as fds:  # one open for both steps: a new log makes thousands of these
            self._write_entries(0, rel, pos, 0, ts, trel, fds)
            self._written = (self.rel.n, self.ts.n)
            self._truncate_files(fds)
        return True

    def fill(self, positions, last_offsets, max_timestamps, sizes) -> None:
        """Build the entries in memory only (a cleaned segment before its swap: the files of
        that name still belong to the segment it replaces); ``sync`` writes them later."""
        self._build(positions, last_offsets, max_timestamps, sizes)
        self._written = (0, 0)

    def _build(self, positions, last_offsets, max_timestamps, sizes):
        """The entries from a whole segment's batches, in memory (files untouched); returns
        the new entries' columns."""
        self.builder = hotloops.IndexBuilder(self.base_offset, self.interval)
        self.rel, self.pos = _Column(np.int32), _Column(np.int32)
        self.ts, self.trel = _Column(np.int64), _Column(np.int32)
        rel, pos, ts, trel = self.builder.add(*_i64(positions, last_offsets, max_timestamps, sizes))
        self.rel.extend(rel)
        self.pos.extend(pos)
        self.ts.extend(ts)
        self.trel.extend(trel)
        self.loaded = True
        return rel, pos, ts, trel

    def truncate_before_position(self, position: int, cut_offset: int) -> int:
        """Drop offset entries of batches at or after file ``position`` and time entries
        pointing at offsets >= ``cut_offset`` (the first removed batch's base offset), as
        Kafka does. Returns the position of the last kept offset entry's batch (0 if none):
        the caller replays the batches from there to ``position`` through :attr:`builder`
        so the next entries land where they would have."""
        keep = int(np.searchsorted(self.pos.view(), position, side="left"))
        self.rel.n = self.pos.n = keep
        tkeep = int(np.searchsorted(self.trel.view(), cut_offset - self.base_offset, side="left"))
        self.ts.n = self.trel.n = tkeep
        self._builder_at_last_entry()
        self._truncate_files()
        return int(self.pos.data[keep - 1]) if keep else 0

    def _builder_at_last_entry(self) -> None:
        """A builder whose running state is what it was when the last entries were written;
        replaying the batches from the last offset entry's batch on completes it."""
        self.builder = hotloops.IndexBuilder(self.base_offset, self.interval)
        if self.ts.n:
            self.builder.max_timestamp = self.builder.last_time_entry = int(self.ts.data[self.ts.n - 1])
            self.builder.offset_of_max_timestamp = self.base_offset + int(self.trel.data[self.ts.n - 1])

    def last_entry_position(self) -> int:
        """File position of the batch of the last offset entry (0 when there is none)."""
        return int(self.pos.data[self.pos.n - 1]) if self.pos.n else 0

    def resume(self, tail_scan) -> None:
        """After ``load`` of the segment still being appended to: ``tail_scan`` holds the
        batches from ``last_entry_position()`` to the end; the builder resumes as a rebuild
        from a full scan would have left it, so later entries land where they would have."""
        self._builder_at_last_entry()
        self.replay(tail_scan.positions, tail_scan.last_offsets, tail_scan.max_timestamps, tail_scan.sizes)

    # --- loading -------------------------------------------------------------------------
    def _read_files(self):
        """``(offset entries, time entries)`` as lists from disk, None if a file is missing."""
        try:
            with open(self.offset_path, "rb") as f:
                raw_off = f.read()
            with open(self.time_path, "rb") as f:
                raw_time = f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FatalLogError(f"cannot read index files of segment {self.base_offset}: {exc}") from exc
        if len(raw_off) % OFFSET_ENTRY_SIZE or len(raw_time) % TIME_ENTRY_SIZE:
            return None
        off = np.frombuffer(raw_off, _OFFSET_DTYPE)
        tim = np.frombuffer(raw_time, _TIME_DTYPE)
        return ((off["rel"].astype(np.int32), off["pos"].astype(np.int32)),
                (tim["ts"].astype(np.int64), tim["rel"].astype(np.int32)))

    def load(self, log_size: int, max_rel: int) -> None:
        """Load entries from the files of a closed segment that is not rescanned; raises
        IndexCorruptError if a file is missing, has a torn entry or breaks the invariants
        (``max_rel``: the segment's last offset − base)."""
        got = self._read_files()
        if got is None:
            raise IndexCorruptError(f"index files of segment {self.base_offset} missing or torn")
        (rel, pos), (ts, trel) = got
        bad = hotloops.check_offset_index(np.ascontiguousarray(rel), np.ascontiguousarray(pos),
                                          len(rel), log_size)
        if bad < 0 and len(rel) and rel[-1] > max_rel:
            bad = len(rel) - 1
        if bad >= 0:
            raise IndexCorruptError(f"offset index of segment {self.base_offset} bad at entry {bad}")
        bad = hotloops.check_time_index(np.ascontiguousarray(ts), np.ascontiguousarray(trel), len(ts), max_rel)
        if bad >= 0:
            raise IndexCorruptError(f"time index of segment {self.base_offset} bad at entry {bad}")
        self.rel, self.pos = _Column(np.int32, rel), _Column(np.int32, pos)
        self.ts, self.trel = _Column(np.int64, ts), _Column(np.int32, trel)
        self._written = (self.rel.n, self.ts.n)
        self.loaded = True

    # --- lookups -------------------------------------------------------------------------
    def lookup(self, offset: int) -> int:
        """File position to start scanning from for ``offset``: the batch of the largest
        indexed last offset <= ``offset`` (0 when there is none)."""
        i = hotloops.floor_index(self.rel.data, self.rel.n, offset - self.base_offset)
        return int(self.pos.data[i]) if i >= 0 else 0

    def full(self, max_index_bytes: int) -> bool:
        """Kafka's ``isFull`` of either index at ``segment.index.bytes`` (never for an index
        that is not loaded: only the active segment's is asked, and it always is)."""
        return self.loaded and (self.rel.n >= max_index_bytes // OFFSET_ENTRY_SIZE
                                or self.ts.n >= max_index_bytes // TIME_ENTRY_SIZE)

    def entries(self):
        return self.rel.view().tolist(), self.pos.view().tolist()

    def time_entries(self):
        return self.ts.view().tolist(), self.trel.view().tolist()


def _i64(*arrays):
    """The builder takes contiguous int64 arrays (a scan's own arrays already are)."""
    return [a if a.dtype == np.int64 and a.flags.c_contiguous else np.ascontiguousarray(a, np.int64)
            for a in arrays]


def _same(a, b) -> bool:
    """Compare ``((rel, pos), (ts, trel))`` tuples whose parts may be arrays or lists."""
    return all(list(x) == list(y) for pa, pb in zip(a, b) for x, y in zip(pa, pb))
