"""MetadataLog: the Raft log port (``kraft.raft.log_port.ReplicatedLog``) over Kafka's
on-disk formats (``kraft.log``): segments in ``__cluster_metadata-0/``, the leader-epoch
checkpoint beside them, and ``%020d-%010d.checkpoint`` snapshots in the same directory.

The port's semantics, as ``kraft.testing.InMemoryLog`` defines them for the simulator, hold
here with real files: truncation and snapshot deletion are durable on return; truncating
below the high watermark raises; a snapshot that ends past the log is installed at open
(the log restarts at its end). Durability is reported by the SegmentedLog's flusher thread
through ``on_flushed`` (the server hops it onto its event loop). Only the event loop thread
calls these methods.
"""

from __future__ import annotations

import bisect
import os
import time

from kraft.errors import CorruptRecordError, LogCorruptionError
from kraft.log import LogConfig, SegmentedLog
from kraft.log import snapshot as snapshots
from kraft.log.retention import MetadataRetention
from kraft.types import OffsetAndEpoch

METADATA_DIR = "__cluster_metadata-0"


class _RawSnapshotWriter:
    """The port's raw writer: bytes as the Raft SnapshotWriter framed them."""

    def __init__(self, owner: "MetadataLog", snapshot_id: OffsetAndEpoch):
        self.snapshot_id = snapshot_id
        self._owner = owner
        self._w = snapshots.SnapshotFileWriter(owner.directory, snapshot_id, raw=True)

    def size_in_bytes(self) -> int:
        return self._w.size_bytes

    def append(self, data) -> None:
        self._w.write_raw(data)

    def freeze(self) -> None:
        self.seal()
        self.publish()

    def seal(self) -> None:
        """The durable part of freeze (any thread): validate, fdatasync, rename, fsync the directory."""
        try:
            self._w.freeze()
        except LogCorruptionError as exc:  # the port promises CorruptRecordError (and no snapshot)
            raise CorruptRecordError(str(exc)) from exc

    def publish(self) -> None:
        """The log lists the sealed snapshot (the log's own thread)."""
        self._owner._snapshot_added(self.snapshot_id)

    def abort(self) -> None:
        self._w.abort()


class _RawSnapshotReader:
    def __init__(self, reader: snapshots.SnapshotFileReader):
        self._r = reader
        self.snapshot_id = reader.snapshot_id

    def size_in_bytes(self) -> int:
        return self._r.size_bytes

    def read(self, position: int, max_bytes: int) -> bytes:
        return self._r.read(position, max_bytes)

    def close(self) -> None:
        self._r.close()


class MetadataLog:
    """``retention``: with it, the core's ``delete_before_snapshot`` only cleans what Kafka's
    retention rules allow (``maybe_clean``; the server also calls that periodically); without
    it (tests, the simulator's contract) the log below a snapshot is deleted at once."""

    def __init__(self, log_dir: str, config: LogConfig | None = None, *, on_flushed=None, on_fatal=None,
                 on_flush_stats=None, retention: MetadataRetention | None = None, clock_ms=None, flusher=None):
        self.retention = retention
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._snapshot_timestamps: dict[OffsetAndEpoch, int] = {}
        self.directory = os.path.join(log_dir, METADATA_DIR)
        os.makedirs(self.directory, exist_ok=True)
        snapshots.remove_incomplete_snapshots(self.directory)
        self._snapshots = sorted(snapshots.list_snapshots(self.directory))
        # Kafka's metadata log starts where its earliest snapshot ends (segments are deleted
        # whole, so the first one may begin below that).
        start = self._snapshots[0].offset if self._snapshots else None
        self.log = SegmentedLog.open(self.directory, config or LogConfig(), log_start_offset=start,
                                     on_flushed=on_flushed, on_fatal=on_fatal, on_flush_stats=on_flush_stats,
                                     flusher=flusher)
        self._readers: dict[OffsetAndEpoch, _RawSnapshotReader] = {}
        self._hw = 0
        self.on_append = None  # optional callback(seconds) for the append-latency metric
        self.truncate_to_latest_snapshot()

    # --- offsets -------------------------------------------------------------------------------
    def start_offset(self) -> int:
        return self.log.start_offset

    def end_offset(self) -> int:
        return self.log.end_offset

    def flushed_offset(self) -> int:
        return self.log.flushed_offset

    @property
    def high_watermark(self) -> int:
        return self._hw

    def last_fetched_epoch(self) -> int:
        epoch = self.log.latest_epoch
        if epoch is not None:
            return epoch
        latest = self.latest_snapshot_id()
        return latest.epoch if latest is not None else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found = self.log.end_offset_for_epoch(epoch)
        if found.epoch < 0 or found.offset < 0:
            return OffsetAndEpoch(self.end_offset(), self.last_fetched_epoch())
        earliest = self.earliest_snapshot_id()
        if earliest is not None and found.offset == earliest.offset and found.epoch > earliest.epoch:
            return earliest
        return found

    # --- appends and reads -----------------------------------------------------------------------
    def append_as_leader(self, data, epoch: int) -> tuple[int, int]:
        began = time.perf_counter()
        info = self.log.append(data, assign_offsets=True, leader_epoch=epoch)
        if self.on_append is not None:
            self.on_append(time.perf_counter() - began)
        return info.first_offset, info.last_offset

    def append_as_follower(self, data) -> tuple[int, int]:
        if not len(data):
            return -1, -1
        began = time.perf_counter()
        info = self.log.append(data, assign_offsets=False, ignore_partial_tail=True)
        if self.on_append is not None:
            self.on_append(time.perf_counter() - began)
        if info is None:
            return -1, -1
        return info.first_offset, info.last_offset

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        if start_offset >= self.log.end_offset:
            return b""
        return self.log.read(start_offset, max_bytes)

    # --- truncation and durability -----------------------------------------------------------------
    def drop_epochs_above(self, epoch: int) -> int:
        """Truncate every batch of a leader epoch above ``epoch`` (the highest epoch this
        node ever persisted in quorum-state, which no batch it holds can exceed). Such a
        batch can only be damage to its PartitionLeaderEpoch, which the CRC does not cover;
        kept, it would make this node look more up to date than any other in an election.
        Returns how many offsets were dropped (call before the Raft core starts)."""
        if self.log.latest_epoch is None or self.log.latest_epoch <= epoch:
            return 0
        found = self.log.end_offset_for_epoch(epoch)
        keep = max(found.offset if found.epoch >= 0 else self.log.start_offset, self.log.start_offset)
        dropped = self.log.end_offset - keep
        self.log.truncate_to(keep)
        self.log.flush()
        return dropped

    def truncate_to(self, offset: int) -> None:
        if offset < self._hw:
            raise RuntimeError(f"truncation to {offset} below the high watermark {self._hw}")
        if offset < self.log.start_offset:
            # Kafka's UnifiedLog.truncateTo below the first segment: truncate fully and start there.
            self.log.truncate_fully_and_start_at(offset)
        elif offset < self.log.end_offset:
            self.log.truncate_to(offset)

    def update_high_watermark(self, offset: int) -> None:
        if offset > self.log.end_offset:
            raise RuntimeError(f"high watermark {offset} past the log end {self.log.end_offset}")
        self._hw = max(self._hw, offset)

    def request_flush(self) -> None:
        """Ask the flusher thread to fsync now; completion arrives through ``on_flushed``."""
        self.log.request_flush()

    def flush(self, up_to: int) -> None:
        self.log.flush()

    def close(self) -> None:
        for r in self._readers.values():
            r.close()
        self._readers.clear()
        self.log.close()

    # --- snapshots ---------------------------------------------------------------------------
    def create_snapshot(self, snapshot_id: OffsetAndEpoch):
        if snapshot_id in self._snapshots:
            return None
        return _RawSnapshotWriter(self, snapshot_id)

    def _snapshot_added(self, snapshot_id: OffsetAndEpoch) -> None:
        bisect.insort(self._snapshots, snapshot_id)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch):
        if snapshot_id not in self._snapshots:
            return None
        reader = self._readers.get(snapshot_id)
        if reader is None:
            try:
                reader = _RawSnapshotReader(snapshots.SnapshotFileReader(self.directory, snapshot_id))
            except FileNotFoundError:
                return None
            self._readers[snapshot_id] = reader
        return reader

    def snapshot_ids(self) -> list[OffsetAndEpoch]:
        return list(self._snapshots)

    def latest_snapshot_id(self):
        return self._snapshots[-1] if self._snapshots else None

    def earliest_snapshot_id(self):
        return self._snapshots[0] if self._snapshots else None

    def _forget_snapshots_before(self, snapshot_id: OffsetAndEpoch) -> None:
        for sid in [s for s in self._snapshots if s.offset < snapshot_id.offset]:
            reader = self._readers.pop(sid, None)
            if reader is not None:
                reader.close()
            snapshots.delete_snapshot(self.directory, sid)
            self._snapshots.remove(sid)
            self._snapshot_timestamps.pop(sid, None)

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> bool:
        if self.retention is not None:
            return self.maybe_clean()
        return self._delete_before_snapshot(snapshot_id)

    # --- retention (Kafka's KafkaMetadataLog.maybeClean) --------------------------------------------
    def maybe_clean(self) -> bool:
        """Delete snapshots and the segments below them while they are beyond retention."""
        if self.retention is None:
            return False
        cleaned = self._clean_while(self._beyond_size_rule())
        now = self._clock_ms()
        cleaned |= self._clean_while(lambda sid: self.retention.beyond_time(self._snapshot_timestamp(sid), now))
        return cleaned

    def _beyond_size_rule(self):
        sizes = {sid: self._snapshot_size(sid) for sid in self._snapshots}
        kept = [sum(sizes.values())]

        def beyond(sid: OffsetAndEpoch) -> bool:
            if self.retention.beyond_size(self.log.size_bytes, kept[0]):
                kept[0] -= sizes[sid]
                return True
            return False
        return beyond

    def _clean_while(self, beyond) -> bool:
        cleaned = False
        while len(self._snapshots) >= 2:
            oldest, following = self._snapshots[0], self._snapshots[1]
            if not (beyond(oldest) and self._delete_before_snapshot(following)):
                break
            cleaned = True
        return cleaned

    def _snapshot_size(self, sid: OffsetAndEpoch) -> int:
        try:
            return os.path.getsize(snapshots.snapshot_path(self.directory, sid))
        except FileNotFoundError:
            return 0

    def _snapshot_timestamp(self, sid: OffsetAndEpoch) -> int:
        ts = self._snapshot_timestamps.get(sid)
        if ts is None:
            try:
                with snapshots.SnapshotFileReader(self.directory, sid) as r:
                    ts = r.last_contained_log_timestamp
            except (FileNotFoundError, LogCorruptionError):
                ts = -1
            self._snapshot_timestamps[sid] = ts
        return ts

    def _delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> bool:
        if snapshot_id not in self._snapshots or snapshot_id.offset > self._hw:
            return False
        if snapshot_id.offset > self.log.end_offset or snapshot_id.offset <= self.log.start_offset:
            return False
        self.log.delete_below(snapshot_id.offset)
        self._forget_snapshots_before(snapshot_id)
        return True

    def truncate_to_latest_snapshot(self) -> bool:
        latest = self.latest_snapshot_id()
        log_epoch = self.log.latest_epoch or 0
        if latest is None or not (latest.epoch > log_epoch
                                  or (latest.epoch == log_epoch and latest.offset > self.log.end_offset)):
            return False
        self.log.truncate_fully_and_start_at(latest.offset)
        self._forget_snapshots_before(latest)
        return True


__all__ = ["METADATA_DIR", "MetadataLog", "CorruptRecordError"]
