"""The log port: the narrow interface the Raft core needs from the replicated log.

Modelled on Kafka's ``ReplicatedLog`` (``raft/ReplicatedLog.java``). The core calls these
methods synchronously: they are page-cache operations and deterministic. It never calls
``flush``: durability is an effect (``Flush(up_to)``) that the driver executes, calling
``flush`` here and then ``core.on_flushed``. ``kraft.testing.InMemoryLog`` implements the
port for the simulator; an adapter over ``kraft.log`` implements it for the server.

Semantics every implementation must keep
----------------------------------------
* Offsets: ``start_offset() <= end_offset()``; records below ``start_offset`` live only in
  snapshots. Everything is whole RecordBatch v2 batches.
* Crash: anything appended after the last completed ``flush`` may vanish (a kill -9 with
  page-cache loss drops the unflushed suffix, never a middle part). ``flushed_offset()``
  tells, at open, how much is known durable; an implementation that fsyncs its tail while
  recovering may report ``end_offset()``.
* ``truncate_to``, ``truncate_to_latest_snapshot``, ``delete_before_snapshot`` and
  ``SnapshotWriter.freeze`` are durable when they return (or are redone at open: a log whose
  latest snapshot ends past its end offset is truncated fully to that snapshot at open).
* Epoch cache: ``end_offset_for_epoch`` answers exactly as Kafka's LeaderEpochFileCache
  ``endOffsetFor`` (plus KafkaMetadataLog's snapshot rule), see the method.
* Corrupt input: ``append_as_follower`` validates framing, CRC and offset contiguity and
  raises ``CorruptRecordError`` (or ``InvalidRecordError``) without changing the log.
* ``truncate_to`` below the high watermark last passed to ``update_high_watermark`` is a
  bug: raise ``RuntimeError``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kraft.types import OffsetAndEpoch


@runtime_checkable
class RawSnapshotWriter(Protocol):
    """A snapshot being written (``.checkpoint.part``); bytes are whole batches."""

    snapshot_id: OffsetAndEpoch

    def size_in_bytes(self) -> int: ...

    def append(self, data: bytes) -> None: ...

    def freeze(self) -> None:
        """Make it durable and visible (rename to ``.checkpoint``); no appends after. Bytes
        that are not whole valid batches from a SnapshotHeader to a SnapshotFooter raise
        ``CorruptRecordError`` and leave no snapshot behind."""
        ...


@runtime_checkable
class RawSnapshotReader(Protocol):
    snapshot_id: OffsetAndEpoch

    def size_in_bytes(self) -> int: ...

    def read(self, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` raw bytes from ``position`` (need not end on a batch)."""
        ...


@runtime_checkable
class ReplicatedLog(Protocol):
    def start_offset(self) -> int:
        """First offset held in the log (the latest snapshot's end after a prefix delete)."""
        ...

    def end_offset(self) -> int:
        """Offset the next appended record gets (log end offset, LEO)."""
        ...

    def last_fetched_epoch(self) -> int:
        """Epoch of the last batch, else of the latest snapshot, else 0."""
        ...

    def flushed_offset(self) -> int:
        """Offset below which the log is known durable (read by the core at start)."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's ``endOffsetForEpoch``, returned as ``OffsetAndEpoch(end_offset, epoch)``:

        * ``epoch`` is the latest epoch in the log: (end_offset(), epoch);
        * else the first epoch above ``epoch`` starts at S: (S, greatest known epoch <=
          ``epoch``, or ``epoch`` itself when none is known);
        * ``epoch`` above every known epoch, or -1 (Kafka's UNDEFINED): (end_offset(),
          last_fetched_epoch()), as KafkaMetadataLog answers;
        * if the answer's offset equals the earliest snapshot's end offset and its epoch is
          greater than the snapshot's, the snapshot's epoch is returned instead.
        """
        ...

    def append_as_leader(self, data: bytes, epoch: int) -> tuple[int, int]:
        """Append whole batches, assigning offsets from ``end_offset()`` and stamping
        PartitionLeaderEpoch = ``epoch``. Returns (first offset, last offset)."""
        ...

    def append_as_follower(self, data: bytes) -> tuple[int, int]:
        """Validate and append batches as fetched from the leader (offsets already
        assigned, must start at ``end_offset()``); a trailing partial batch is ignored.
        Returns (first, last) offsets appended, or (-1, -1) if nothing was."""
        ...

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from the batch holding ``start_offset``; at least one batch even
        if larger than ``max_bytes``; b"" at the end of the log."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or above ``offset`` (and the epoch entries they began)."""
        ...

    def truncate_to_latest_snapshot(self) -> bool:
        """If the latest snapshot ends past the log (or at a different epoch), drop the whole
        log and start it at the snapshot's end. Returns True if it did."""
        ...

    def update_high_watermark(self, offset: int) -> None:
        """Tell the log the high watermark (it refuses truncation below it)."""
        ...

    def flush(self, up_to: int) -> None:
        """Driver only (the core never calls it): fsync everything below ``up_to``."""
        ...

    def create_snapshot(self, snapshot_id: OffsetAndEpoch) -> RawSnapshotWriter | None:
        """A writer for a new snapshot, or None if that snapshot already exists."""
        ...

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> RawSnapshotReader | None: ...

    def latest_snapshot_id(self) -> OffsetAndEpoch | None: ...

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None: ...

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> bool:
        """Delete the log prefix below ``snapshot_id.offset`` and older snapshots (only if
        the snapshot exists and is not past the high watermark). Returns True if it did."""
        ...
