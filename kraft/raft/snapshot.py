"""SnapshotWriter: how a listener writes a snapshot of its state at a committed offset.

Obtained from ``RaftCore.create_snapshot``. Frames the snapshot as Kafka does: a
SnapshotHeader control batch first (then, under kraft.version 1, the KRaftVersion and
Voters records), the listener's records in batches with offsets counted
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
                 on_frozen: Callable[[OffsetAndEpoch], None], membership: bytes | None = None):
        self.snapshot_id: OffsetAndEpoch = raw.snapshot_id
        self._raw = raw
        self._now_ms = now_ms
        self._on_frozen = on_frozen
        self._frozen = False
        self._published = False
        raw.append(build_control_record_batch(
            SnapshotHeaderRecord(last_contained_log_timestamp), base_offset=0,
            partition_leader_epoch=self.snapshot_id.epoch, timestamp=now_ms))
        self._next_offset = 1
        if membership:
            # KIP-853: under kraft.version 1 the snapshot carries the KRaftVersion and Voters
            # records in force at its end, right after the header (offsets 1 and 2).
            raw.append(membership)
            self._next_offset = 3

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
        """Complete the snapshot durably and tell the core (which may then trim the log)."""
        self.seal()
        self.publish()

    def seal(self) -> None:
        """Footer and durable file, without touching the log or the core: may run on a worker
        thread while the loop goes on (a metadata image takes a second or more to write)."""
        if self._frozen:
            return
        self._raw.append(build_control_record_batch(
            SnapshotFooterRecord(), base_offset=self._next_offset,
            partition_leader_epoch=self.snapshot_id.epoch, timestamp=self._now_ms))
        seal = getattr(self._raw, "seal", None)
        if seal is not None:
            seal()
        self._frozen = True

    def publish(self) -> None:
        """On the loop thread, after :meth:`seal`: the log lists the snapshot and the core
        may delete the prefix it covers."""
        if not self._frozen:
            raise RuntimeError("snapshot not sealed")
        if self._published:
            return
        publish = getattr(self._raw, "publish", None)
        if publish is not None:
            publish()
        else:  # a raw writer without the split (the simulator's in-memory log)
            self._raw.freeze()
        self._published = True
        self._on_frozen(self.snapshot_id)

    def abort(self) -> None:
        """Give up an unfinished snapshot (its partial file is removed)."""
        abort = getattr(self._raw, "abort", None)
        if abort is not None and not self._published:
            abort()
        self._frozen = self._published = True
