"""SnapshotWriter: how a listener writes a snapshot of its state at a committed offset.

Obtained from ``RaftCore.create_snapshot``. Frames the snapshot as Kafka does: a
SnapshotHeader control batch first, the listener's records in batches with offsets counted
from 0, a SnapshotFooter control batch last; bytes go to the log port's raw writer.
``freeze`` makes it durable and lets the core delete the log prefix it covers. No I/O
beyond the raw writer.
"""

from __future__ import annotations

from typing import Callable

from kraft.types import OffsetAndEpoch
from kraft.records import (
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    build_batch,
    build_control_record_batch,
)


class SnapshotWriter:
    def __init__(self, raw, last_contained_log_timestamp: int, now_ms: int,
                 on_frozen: Callable[[OffsetAndEpoch], None]):
        self.snapshot_id: OffsetAndEpoch = raw.snapshot_id
        self._raw = raw
        self._now_ms = now_ms
        self._on_frozen = on_frozen
        self._frozen = False
        raw.append(build_control_record_batch(
            SnapshotHeaderRecord(last_contained_log_timestamp), base_offset=0,
            partition_leader_epoch=self.snapshot_id.epoch, timestamp=now_ms))
        self._next_offset = 1

    def append(self, values) -> None:
        """Append one batch holding ``values`` (a list of bytes)."""
        if self._frozen:
            raise RuntimeError("snapshot already frozen")
        values = list(values)
        if not values:
            return
        self._raw.append(build_batch(values, base_offset=self._next_offset,
                                     partition_leader_epoch=self.snapshot_id.epoch,
                                     timestamp=self._now_ms))
        self._next_offset += len(values)

    def freeze(self) -> None:
        if self._frozen:
            return
        self._raw.append(build_control_record_batch(
            SnapshotFooterRecord(), base_offset=self._next_offset,
            partition_leader_epoch=self.snapshot_id.epoch, timestamp=self._now_ms))
        self._raw.freeze()
        self._frozen = True
        self._on_frozen(self.snapshot_id)
