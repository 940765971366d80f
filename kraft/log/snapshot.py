"""KRaft snapshots on disk: ``%020d-%010d.checkpoint`` (end offset exclusive, epoch) in the
log directory, written as ``.checkpoint.part`` and renamed when complete.

A snapshot is a sequence of RecordBatch v2 batches whose offsets start at 0: first a
control batch holding SnapshotHeaderRecord, then the state, last a control batch holding
SnapshotFooterRecord; every batch carries the snapshot's epoch. The writer adds header and
footer; the reader validates framing, CRCs, offsets, header and footer. Snapshot *content*
(metadata records) is the controller's business, and choosing when to snapshot is Raft's.
"""

from __future__ import annotations

import mmap
import os
import re
import time

from kraft import records
from kraft.errors import CorruptRecordError, FatalLogError, LogCorruptionError
from kraft.log import files
from kraft.records import ControlType, SnapshotFooterRecord, SnapshotHeaderRecord
from kraft.types import SnapshotId

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
DELETED_SUFFIX = ".checkpoint.deleted"
_NAME = re.compile(r"^(\d{20})-(\d{10})(?:-.*)?(\.checkpoint(?:\.part|\.deleted)?)$")


def snapshot_filename(snapshot_id: SnapshotId, suffix: str = SUFFIX) -> str:
    """``%020d-%010d.checkpoint``: the exclusive end offset and the epoch of the last record."""
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{suffix}"


def parse_snapshot_name(name: str):
    """``(SnapshotId, suffix)`` for a snapshot file name (complete, partial or deleted; a
    Kafka temp name ``<id>-<random>.checkpoint.part`` too), or None."""
    m = _NAME.match(name)
    if not m:
        return None
    return SnapshotId(int(m.group(1)), int(m.group(2))), m.group(3)


def snapshot_path(directory: str, snapshot_id: SnapshotId) -> str:
    return os.path.join(directory, snapshot_filename(snapshot_id))


def list_snapshots(directory: str) -> list[SnapshotId]:
    """Complete snapshots in ``directory``, oldest first."""
    out = []
    for name in os.listdir(directory):
        parsed = parse_snapshot_name(name)
        if parsed and parsed[1] == SUFFIX:
            out.append(parsed[0])
    return sorted(out)


def latest_snapshot(directory: str) -> SnapshotId | None:
    ids = list_snapshots(directory)
    return ids[-1] if ids else None


def remove_incomplete_snapshots(directory: str) -> list[str]:
    """Delete ``.checkpoint.part`` and ``.checkpoint.deleted`` leftovers (at startup, as
    Kafka does). Returns the names removed."""
    removed = []
    for name in os.listdir(directory):
        parsed = parse_snapshot_name(name)
        if parsed and parsed[1] != SUFFIX:
            os.unlink(os.path.join(directory, name))
            removed.append(name)
    if removed:
        files.fsync_dir(directory)
    return removed


def delete_snapshot(directory: str, snapshot_id: SnapshotId) -> bool:
    try:
        os.unlink(snapshot_path(directory, snapshot_id))
    except FileNotFoundError:
        return False
    files.fsync_dir(directory)
    return True


def delete_snapshots_before(directory: str, snapshot_id: SnapshotId) -> list[SnapshotId]:
    """Delete every complete snapshot older than ``snapshot_id``; returns their ids."""
    doomed = [s for s in list_snapshots(directory) if s < snapshot_id]
    for s in doomed:
        os.unlink(snapshot_path(directory, s))
    if doomed:
        files.fsync_dir(directory)
    return doomed


class SnapshotFileWriter:
    """Write a snapshot: ``append`` batches (offsets from 0, the snapshot's epoch, header
    first — added here), then ``freeze()`` adds the footer, fsyncs, renames the
    ``.part`` file and fsyncs the directory. Leaving a ``with`` block without freezing
    deletes the partial file.

    ``raw=True`` is for a follower receiving a snapshot from its leader (FetchSnapshot):
    ``write_raw`` takes unaligned chunks of the leader's file, nothing is added, and
    ``freeze`` validates the whole file before renaming it."""

    def __init__(self, directory: str, snapshot_id: SnapshotId, last_contained_log_timestamp: int = -1,
                 *, raw: bool = False, timestamp_ms: int | None = None):
        self.directory = directory
        self.snapshot_id = snapshot_id
        self.path = snapshot_path(directory, snapshot_id)
        self.part_path = os.path.join(directory, snapshot_filename(snapshot_id, PARTIAL_SUFFIX))
        self._raw = raw
        self._now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        self._next_offset = 0
        self._position = 0
        self._frozen = False
        os.makedirs(directory, exist_ok=True)
        try:
            self._fd = os.open(self.part_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            raise FatalLogError(f"cannot create {self.part_path}: {exc}") from exc
        if not raw:
            header = records.build_control_record_batch(
                SnapshotHeaderRecord(last_contained_log_timestamp), base_offset=0,
                partition_leader_epoch=snapshot_id.epoch, timestamp=self._now)
            self._write(header)
            self._next_offset = 1

    @property
    def size_bytes(self) -> int:
        return self._position

    def _write(self, data) -> None:
        files.write_all(self._fd, data, self._position, self.part_path)
        self._position += len(data)

    def append(self, batches) -> int:
        """Append whole batches; their offsets and epochs are rewritten to continue the
        snapshot. Returns the next offset. CorruptRecordError if the bytes are invalid."""
        if self._raw or self._frozen:
            raise ValueError("append() needs an open, non-raw snapshot writer")
        buf = bytearray(batches)
        next_offset = records.assign_offsets(buf, self._next_offset, self.snapshot_id.epoch)
        scan = records.scan_batches(buf)
        if scan.error is not None or not len(scan):
            raise CorruptRecordError(f"rejected snapshot append: {scan.error or 'no batches'}")
        self._write(buf)
        self._next_offset = next_offset
        return next_offset

    def append_values(self, values) -> int:
        """Append one batch holding ``values`` (a list of bytes), built here at the next
        offset with the snapshot's epoch: the Raft ``SnapshotWriter.append`` interface, for
        writers of a snapshot file outside a Raft core. Returns the next offset."""
        if self._raw or self._frozen:
            raise ValueError("append_values() needs an open, non-raw snapshot writer")
        values = list(values)
        if not values:
            return self._next_offset
        self._write(records.build_batch(values, base_offset=self._next_offset,
                                        partition_leader_epoch=self.snapshot_id.epoch, timestamp=self._now))
        self._next_offset += len(values)
        return self._next_offset

    def write_raw(self, data, position: int | None = None) -> None:
        """Raw mode: write a chunk of the leader's snapshot file at ``position``
        (default: the end of what was written so far)."""
        if not self._raw or self._frozen:
            raise ValueError("write_raw() needs an open raw snapshot writer")
        if position is not None and position != self._position:
            raise ValueError(f"snapshot chunk at {position}, expected {self._position}")
        self._write(data)

    def freeze(self) -> str:
        """Complete the snapshot durably and return its path."""
        if self._frozen:
            return self.path
        if not self._raw:
            footer = records.build_control_record_batch(
                SnapshotFooterRecord(), base_offset=self._next_offset,
                partition_leader_epoch=self.snapshot_id.epoch, timestamp=self._now)
            self._write(footer)
        try:
            if self._raw:
                _validate(self._fd, self._position, self.part_path)
            files.fdatasync(self._fd, self.part_path)
        except BaseException:
            self.abort()
            raise
        os.close(self._fd)
        self._fd = -1
        os.replace(self.part_path, self.path)
        files.fsync_dir(self.directory)
        self._frozen = True
        return self.path

    def abort(self) -> None:
        """Drop the partial file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if not self._frozen:
            try:
                os.unlink(self.part_path)
            except FileNotFoundError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if not self._frozen:
            self.abort()


def _validate(fd: int, size: int, path: str):
    """CRC-scan a snapshot file and check its header and footer; returns
    ``(scan, header)``. Raises LogCorruptionError naming the file."""
    if size == 0:
        raise LogCorruptionError(f"snapshot {path} is empty")
    mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    try:
        with memoryview(mm) as view:
            scan = records.scan_batches(view)
            # Copies of the first and last batch: nothing may keep the map exported.
            first = bytes(view[: int(scan.sizes[0])]) if len(scan) else b""
            last = bytes(view[int(scan.positions[-1]) : scan.valid_end]) if len(scan) else b""
    finally:
        mm.close()
    if scan.error is not None:
        raise LogCorruptionError(f"snapshot {path}: {scan.error} at position {scan.valid_end}")
    if int(scan.base_offsets[0]) != 0:
        raise LogCorruptionError(f"snapshot {path} does not start at offset 0")
    header = _control_message(first, ControlType.SNAPSHOT_HEADER, path, "first")
    _control_message(last, ControlType.SNAPSHOT_FOOTER, path, "last")
    return scan, header


def _control_message(buf, ctype: int, path: str, which: str):
    try:
        batch = records.RecordBatch(buf, 0)
        if not batch.is_control:
            raise CorruptRecordError("not a control batch")
        recs = list(batch)
        if len(recs) < 1 or records.decode_control_key(recs[0].key) != ctype:
            raise CorruptRecordError(f"control record is not type {ctype}")
        return records.decode_control_record(recs[0].key, recs[0].value)
    except CorruptRecordError as exc:
        raise LogCorruptionError(f"snapshot {path}: {which} batch is not a "
                                 f"{ControlType(ctype).name}: {exc}") from exc


class SnapshotFileReader:
    """A complete snapshot file, validated on open (CRCs, offsets from 0, header first,
    footer last). Iterate :meth:`batches` for the state, :meth:`read` for raw chunks."""

    def __init__(self, directory: str, snapshot_id: SnapshotId):
        self.snapshot_id = snapshot_id
        self.path = snapshot_path(directory, snapshot_id)
        self._fd = os.open(self.path, os.O_RDONLY)  # FileNotFoundError for an unknown id
        try:
            self.size_bytes = os.fstat(self._fd).st_size
            self._scan, self.header = _validate(self._fd, self.size_bytes, self.path)
        except BaseException:
            os.close(self._fd)
            raise

    @property
    def last_contained_log_timestamp(self) -> int:
        return self.header.last_contained_log_timestamp

    @property
    def batch_count(self) -> int:
        return len(self._scan)

    def read(self, position: int, max_bytes: int) -> bytes:
        """Raw bytes of the file (FetchSnapshot serves unaligned chunks)."""
        return os.pread(self._fd, max(0, min(max_bytes, self.size_bytes - position)), position)

    def batches(self, *, include_control: bool = False):
        """RecordBatch objects of the snapshot, control batches (header, footer, voters)
        only when ``include_control``; each is a view of one in-memory copy of the file."""
        data = os.pread(self._fd, self.size_bytes, 0)
        for position in self._scan.positions.tolist():
            batch = records.RecordBatch(data, position)
            if include_control or not batch.is_control:
                yield batch

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
