"""One log segment: a ``.log`` file of whole RecordBatch v2 batches whose name is the
20-digit base offset, plus its offset and time indexes.

A segment writes bytes it is handed, finds batches by offset (index lookup, then a short
scan of batch headers), reads whole batches, scans itself for recovery and truncates at a
batch boundary. It does not decide offsets, epochs, when to roll or when to fsync (that is
``SegmentedLog``). Reads do not validate CRCs (every byte in a segment was validated when
appended or recovered) except ``read_checked``, for bytes that leave the node.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import weakref

from kraft.errors import FatalLogError, LogCorruptionError
from kraft.log import files, hotloops
from kraft.log import txn_index
from kraft.log.file_slice import FileSlice, SliceSource
from kraft.log.index import SegmentIndex
from kraft.log.tail_memo import TailMemo
from kraft.records import scan_batches
from kraft.records.results import BatchScan, empty_scan_arrays

#: Bytes read per step of the short scan after an index lookup: an index entry exists every
#: ``index.interval.bytes`` (4 KiB by default), so one read usually covers the target batch.
SCAN_CHUNK = 64 * 1024
#: Enough of a batch header to know its length and last offset.
_HEADER_PREFIX = 27
_BASE_LENGTH = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
#: File positions are int32 in the index.
MAX_SEGMENT_SIZE = (1 << 31) - 1
#: Latest batches whose positions ``translate`` remembers (see ``_recent_last``).
RECENT_BATCHES = 256


def empty_scan() -> BatchScan:
    return BatchScan(*empty_scan_arrays(0), valid_end=0, error=None)


class LogSegment:
    """``<base>.log`` + ``<base>.index`` + ``<base>.timeindex`` in ``directory``.

    Invariant: ``size`` is the length of the ``.log`` file and it holds only whole, valid
    batches whose offsets lie in ``[base_offset, next_offset)``; ``next_offset`` is the last
    batch's last offset + 1, or ``base_offset`` while the segment is empty.
    """

    def __init__(self, directory: str, base_offset: int, fd: int, size: int, interval: int):
        self.directory = directory
        self.base_offset = base_offset
        self.path = os.path.join(directory, files.segment_name(base_offset, files.LOG_SUFFIX))
        self.fd = fd
        self.size = size
        self.next_offset = base_offset
        self.index = SegmentIndex(directory, base_offset, interval)
        #: Max timestamp of the first batch: Kafka rolls by age comparing the incoming
        #: batch's timestamp with it (or the clock with ``created_ms`` when it is None).
        self.rolling_timestamp_ms: int | None = None
        self.created_ms = 0
        #: Kafka's ``rollJitterMs``: this segment rolls this much before ``segment.ms``.
        self.roll_jitter_ms = 0
        #: A read-only map of the file's first ``len(_map)`` bytes for zero-copy reads
        #: (``view``); replaced by a larger one as the segment grows, dropped on truncation.
        self._map: mmap.mmap | None = None
        #: Last offsets and positions of the latest batches, contiguous up to the end of the
        #: file: the tail is what fetches and the state machine read, and finding a batch
        #: there would otherwise cost an index lookup and a read of the file per lookup.
        self._recent_last: list[int] = []
        self._recent_pos: list[int] = []
        #: The latest appends' bytes: reads of the tail are served from memory.
        self._memo = TailMemo()
        #: Ranges of this file that Fetch answers carry unread (``slice``), and the descriptor
        #: they read through; a truncation reads the ones it would cut into memory first.
        self._slices: weakref.WeakSet = weakref.WeakSet()
        self._slice_source: SliceSource | None = None

    # --- lifecycle -------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: str, base_offset: int, interval: int, now_ms: int) -> "LogSegment":
        """A new empty segment. An existing non-empty file of that name is an error: it
        would mean offsets are about to be reused."""
        path = os.path.join(directory, files.segment_name(base_offset, files.LOG_SUFFIX))
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            size = os.fstat(fd).st_size
        except OSError as exc:
            raise FatalLogError(f"cannot create segment {path}: {exc}") from exc
        if size:
            os.close(fd)
            raise LogCorruptionError(f"segment {path} already exists with {size} bytes")
        seg = cls(directory, base_offset, fd, 0, interval)
        none = empty_scan()
        seg.index.rebuild(none.positions, none.last_offsets, none.max_timestamps, none.sizes)
        seg.created_ms = now_ms
        return seg

    @classmethod
    def open(cls, directory: str, base_offset: int, interval: int) -> "LogSegment":
        """An existing segment, not yet scanned (``next_offset`` is set by recovery)."""
        path = os.path.join(directory, files.segment_name(base_offset, files.LOG_SUFFIX))
        try:
            fd = os.open(path, os.O_RDWR)
            st = os.fstat(fd)
        except OSError as exc:
            raise FatalLogError(f"cannot open segment {path}: {exc}") from exc
        if st.st_size > MAX_SEGMENT_SIZE:
            os.close(fd)
            raise LogCorruptionError(f"segment {path} is {st.st_size} bytes, over the 2 GiB limit")
        seg = cls(directory, base_offset, fd, st.st_size, interval)
        seg.created_ms = int(st.st_mtime * 1000)
        return seg

    def _drop_map(self) -> None:
        # Views handed out keep the old map alive (and valid: an unlinked file stays mapped)
        # until they are released; closing it here would fail while they exist.
        self._map = None

    def close(self) -> None:
        self._drop_map()
        self._memo.clear()
        self._slice_source = None  # live slices keep their descriptor open until they go
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.index.close()

    def delete(self) -> None:
        """Close and unlink all three files (the caller fsyncs the directory)."""
        self.close()
        self.index.delete_files()
        txn_index.delete(self.directory, self.base_offset)  # the aborted transactions go with it
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def retire(self) -> list[str]:
        """Close and rename the files ``*.deleted`` (Kafka's ``asyncDeleteSegment``); returns the
        new paths for a later unlink. The caller fsyncs the directory."""
        self.close()
        renamed = []
        for path in (self.path, self.index.offset_path, self.index.time_path, txn_index.path(self.directory,
                                                                                             self.base_offset)):
            try:
                os.replace(path, path + files.DELETED_SUFFIX)
                renamed.append(path + files.DELETED_SUFFIX)
            except FileNotFoundError:
                pass
        return renamed

    def sync(self) -> None:
        """fdatasync the log and both indexes (at roll and close)."""
        files.fdatasync(self.fd, self.path)
        self.index.sync()
        self._memo.clear()  # no more appends here: the memo serves only the active tail

    # --- writing ---------------------------------------------------------------------------
    def append(self, data, scan: BatchScan, clock_ms) -> None:
        """Write validated batches ``data`` (``scan`` describes them, positions relative to
        ``data``) at the end of the file and index them. ``clock_ms()`` is read only when
        the segment was empty."""
        position = self.size
        files.write_all(self.fd, data, position, self.path)
        self._memo.append(position, data)
        if position == 0:
            first_ts = int(scan.max_timestamps[0])
            self.rolling_timestamp_ms = first_ts if first_ts >= 0 else None
            self.created_ms = clock_ms()
        self.size = position + len(data)
        self.next_offset = scan.last_offset + 1
        self._remember(scan, position)
        self.index.add_scan(scan, position)

    def truncate_at(self, position: int, next_offset: int) -> int:
        """Cut the file at batch boundary ``position``; ``next_offset`` is the base offset of
        the first removed batch (or the offset after the last kept one). Returns the number
        of bytes removed."""
        removed = self.size - position
        for s in list(self._slices):  # answers built before the cut carry the bytes they read
            if s.position + s.length > position:
                s.materialize()
        self._drop_map()
        self._memo.clear()
        self._recent_last.clear()
        self._recent_pos.clear()
        try:
            os.ftruncate(self.fd, position)
        except OSError as exc:
            raise FatalLogError(f"cannot truncate {self.path}: {exc}") from exc
        self.size = position
        self.next_offset = next_offset if position else self.base_offset
        if self.index.loaded:
            resume = self.index.truncate_before_position(position, next_offset)
            if resume < position:
                # Replay the few batches after the last kept entry so the builder's running
                # state (bytes since the entry, max timestamp) is what a rebuild would have.
                replay = self.scan(resume, position)
                self.index.replay(replay.positions, replay.last_offsets,
                                  replay.max_timestamps, replay.sizes)
        if position == 0:
            self.rolling_timestamp_ms = None
        return removed

    # --- reading ---------------------------------------------------------------------------
    def pread(self, length: int, position: int) -> bytes:
        try:
            return os.pread(self.fd, length, position)
        except OSError as exc:
            raise FatalLogError(f"cannot read {self.path}: {exc}") from exc

    def translate(self, offset: int) -> int | None:
        """File position of the first batch whose last offset is >= ``offset``, or None if
        every batch in the segment ends before it."""
        if offset >= self.next_offset:
            return None
        recent = self._recent_last
        if recent and offset > recent[0]:
            # The batch holding ``offset`` follows the first remembered one.
            return self._recent_pos[bisect.bisect_left(recent, offset)]
        position = self.index.lookup(offset) if self.index.loaded else 0
        while position < self.size:
            chunk = self.pread(min(SCAN_CHUNK, self.size - position), position)
            status, at = hotloops.find_batch(chunk, 0, offset)
            if status == hotloops.FOUND:
                return position + at
            if status == hotloops.CORRUPT:
                raise LogCorruptionError(f"invalid batch length at position {position + at} of {self.path}")
            if at:
                position += at
                continue
            # The batch at ``position`` is larger than the chunk: step over it by its header.
            base, length = _BASE_LENGTH.unpack_from(chunk, 0)
            if base + _LAST_DELTA.unpack_from(chunk, 23)[0] >= offset:
                return position
            position += length + 12
        return None

    def _remember(self, scan: BatchScan, position: int) -> None:
        # The memo stays contiguous up to the end of the file: a large append keeps only
        # its last batches and drops what came before them.
        last, pos = self._recent_last, self._recent_pos
        if len(scan) == 1:
            last.append(scan.last_offset)
            pos.append(position + scan.last_position)
        else:
            last.extend(scan.last_offsets[-RECENT_BATCHES:].tolist())
            pos.extend((scan.positions[-RECENT_BATCHES:] + position).tolist())
        if len(last) > RECENT_BATCHES:
            del last[:-RECENT_BATCHES], pos[:-RECENT_BATCHES]

    def read(self, position: int, max_bytes: int) -> bytes:
        """Whole batches from ``position`` totalling at most ``max_bytes`` — but always at
        least the first batch, even if it is larger (Kafka's ``minOneMessage``)."""
        return self._read(position, max_bytes)[0]

    def read_checked(self, position: int, max_bytes: int) -> bytes:
        """``read``, and every batch must pass its CRC: bytes that leave the node are checked
        so a bit flipped on disk after recovery is a storage error here, not a follower
        stalled on them. Bytes served from the memo of appends were checked (or made)
        before they were appended."""
        data, checked = self._read(position, max_bytes)
        if checked:
            return data
        scan = scan_batches(data)
        if scan.error is None:
            return data
        at = scan.valid_end
        base = struct.unpack_from(">q", data, at)[0] if len(data) >= at + 8 else -1
        raise LogCorruptionError(f"corrupt batch at offset {base} (position {position + at}) of {self.path}: "
                                 f"{scan.error}")

    def _read(self, position: int, max_bytes: int) -> tuple[bytes, bool]:
        """(bytes, from the memo)."""
        want = min(max(max_bytes, _HEADER_PREFIX), self.size - position)
        data = self._memo.read(position, want)
        memo = data is not None
        if not memo:
            data = self.pread(want, position)
        end, first_size = hotloops.whole_batches(data, 0, max_bytes)
        if end == len(data):
            return data, memo
        if end:
            return data[:end], memo
        if first_size < 0:
            raise LogCorruptionError(f"invalid batch at position {position} of {self.path}")
        whole = self._memo.read(position, first_size)
        if whole is not None and len(whole) == first_size:
            return whole, True
        return self.pread(first_size, position), False

    def slice(self, position: int, length: int) -> FileSlice:
        """``length`` bytes at ``position`` left in the file for the connection to send
        (``kraft.log.file_slice``); the caller must not ask past ``size``."""
        source = self._slice_source
        if source is None:
            if self.fd < 0:
                raise FatalLogError(f"{self.path} is closed")
            source = self._slice_source = SliceSource(self.fd, self.path)
        s = FileSlice(source, position, length)
        self._slices.add(s)
        return s

    def view(self, position: int, length: int) -> memoryview:
        """``length`` bytes at ``position`` as a view of a read-only map of the file: no copy.
        The caller must not ask past ``size``. A view stays valid after the segment is
        deleted (the mapping keeps the inode); truncating the file under it would not be,
        which is why only followers truncate and drop the map first."""
        end = position + length
        mm = self._map
        if mm is None or len(mm) < end:
            try:
                mm = mmap.mmap(self.fd, self.size, prot=mmap.PROT_READ)
            except (OSError, ValueError) as exc:
                raise FatalLogError(f"cannot map {self.path}: {exc}") from exc
            self._map = mm
        return memoryview(mm)[position:end]

    def scan(self, start: int = 0, stop: int | None = None) -> BatchScan:
        """Validate the batches in ``[start, stop)`` (default: to the end of the file):
        framing, magic, CRC and increasing offsets. Positions in the result are absolute."""
        stop = self.size if stop is None else stop
        if stop <= start:
            return empty_scan()
        try:
            mm = mmap.mmap(self.fd, stop, prot=mmap.PROT_READ)
        except (OSError, ValueError) as exc:
            raise FatalLogError(f"cannot map {self.path}: {exc}") from exc
        try:
            mm.madvise(mmap.MADV_SEQUENTIAL)
            view = memoryview(mm)
            try:
                result = scan_batches(view, start)
            finally:
                view.release()
        finally:
            mm.close()
        return result

    def __repr__(self) -> str:
        return (f"LogSegment(base_offset={self.base_offset}, size={self.size}, "
                f"next_offset={self.next_offset})")
