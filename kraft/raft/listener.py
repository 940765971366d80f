"""The listener interface (what the controller implements) and the cursor that feeds it.

The core stays pure: it emits ``Commit``, ``LoadSnapshot`` and ``LeaderChange`` effects, and
the driver hands them to a :class:`ListenerCursor`, which reads committed batches from the
log port and calls the listener. Guarantees to the listener: batches arrive whole, in
offset order, without gaps, only below the high watermark; after a snapshot load, commits
continue from the snapshot's end offset; this node's own leadership is announced only once
the listener has read everything before the epoch's first record. Reads go through the
log port only; no other I/O.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kraft.raft.effects import Commit, LeaderChange, LoadSnapshot
from kraft.raft.election import LeaderAndEpoch
from kraft.types import OffsetAndEpoch
from kraft.records import iter_batches

DEFAULT_MAX_READ_BYTES = 8 * 1024 * 1024
#: The smallest read; larger ones are sized from the bytes per offset committed so far.
MIN_READ_BYTES = 64 * 1024


class SnapshotView:
    """A snapshot as the listener sees it: its id and its batches (``RecordBatch`` views).
    The first batch is the SnapshotHeader control batch and the last the SnapshotFooter."""

    def __init__(self, snapshot_id: OffsetAndEpoch, data: bytes):
        self.snapshot_id = snapshot_id
        self.data = data

    def batches(self) -> list:
        return list(iter_batches(self.data, validate=True))

    def data_batches(self) -> list:
        return [b for b in self.batches() if not b.is_control]

    def values(self) -> list:
        return [v for b in self.data_batches() for v in b.values()]


@runtime_checkable
class RaftListener(Protocol):
    def handle_commit(self, batches: list) -> None:
        """Committed ``RecordBatch`` views (control batches included), in order, no gaps."""
        ...

    def handle_load_snapshot(self, reader: SnapshotView) -> None:
        """Replace all state with the snapshot; commits continue at its end offset."""
        ...

    def handle_leader_change(self, leader_and_epoch: LeaderAndEpoch) -> None: ...


def read_snapshot(log, snapshot_id: OffsetAndEpoch) -> SnapshotView:
    reader = log.read_snapshot(snapshot_id)
    if reader is None:
        raise LookupError(f"snapshot {snapshot_id} not found")
    return SnapshotView(snapshot_id, bytes(reader.read(0, reader.size_in_bytes())))


class ListenerCursor:
    """Delivers a node's commits to one listener. Invariant: ``next_offset`` only grows,
    except that it jumps to a snapshot's end offset when a snapshot is loaded."""

    def __init__(self, listener: RaftListener, log, local_id: int,
                 max_read_bytes: int = DEFAULT_MAX_READ_BYTES):
        self.listener = listener
        self.log = log
        self.local_id = local_id
        self.max_read_bytes = max_read_bytes
        self.next_offset = 0
        self._bytes_per_offset = 0.0  # of what this cursor has read: sizes the next read
        self._started = False
        self._pending_leader: LeaderChange | None = None
        self._announced: LeaderAndEpoch | None = None

    def execute(self, effect) -> bool:
        """Handle a Commit, LoadSnapshot or LeaderChange effect; False for any other."""
        if isinstance(effect, Commit):
            self.on_commit(effect.up_to)
        elif isinstance(effect, LoadSnapshot):
            self.on_load_snapshot(effect.snapshot_id)
        elif isinstance(effect, LeaderChange):
            self.on_leader_change(effect)
        else:
            return False
        return True

    def on_load_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        if snapshot_id.offset > self.next_offset or not self._started:
            self._load(snapshot_id)

    def _load(self, snapshot_id: OffsetAndEpoch) -> None:
        self.listener.handle_load_snapshot(read_snapshot(self.log, snapshot_id))
        self.next_offset = snapshot_id.offset
        self._started = True

    def on_commit(self, up_to: int) -> None:
        self.apply_some(up_to)

    def apply_some(self, up_to: int, max_bytes: int | None = None) -> bool:
        """Deliver committed batches below ``up_to``; with ``max_bytes``, about that many bytes
        of them (at least one batch) and no more, so a driver can serve its network between
        steps (a follower applying a million records in one go stops fetching, and a leader
        whose followers stop fetching resigns). True once everything below ``up_to`` is
        delivered."""
        log = self.log
        latest = log.latest_snapshot_id()
        if latest is not None and latest.offset <= up_to and (
                self.next_offset < log.start_offset() or (not self._started and latest.offset > self.next_offset)):
            # A new listener starts from the latest snapshot; a lagging one must (the log
            # below the snapshot may be gone).
            self._load(latest)
        if self.next_offset < log.start_offset():
            raise RuntimeError(f"listener at {self.next_offset} but the log starts at "
                               f"{log.start_offset()} and no snapshot covers it")
        self._started = True
        budget = max_bytes
        while self.next_offset < up_to:
            size = self._read_size(up_to)
            if budget is not None:
                if budget <= 0:
                    break
                size = min(size, max(budget, MIN_READ_BYTES))
            data = log.read(self.next_offset, size)
            batches = []
            for batch in iter_batches(data):
                if batch.next_offset > up_to:
                    break
                if batch.base_offset != (batches[-1].next_offset if batches else self.next_offset):
                    raise RuntimeError(f"gap or overlap at {batch.base_offset}, expected "
                                       f"{self.next_offset}")
                batches.append(batch)
            if not batches:
                break  # the batch at next_offset ends past the high watermark
            last = batches[-1]
            read = last.position + last.size - batches[0].position
            self._bytes_per_offset = read / (last.next_offset - batches[0].base_offset)
            self.next_offset = last.next_offset
            self.listener.handle_commit(batches)
            if budget is not None:
                budget -= read
        self._maybe_announce()
        return self.next_offset >= up_to

    def _read_size(self, up_to: int) -> int:
        """Bytes to read for the commits up to ``up_to``. Past the high watermark the log
        holds everything in flight (megabytes under load), and a read of the tail copies
        what it returns: sized to what committed, a read copies only that. Too small costs
        one more read, never a record."""
        want = int((up_to - self.next_offset) * self._bytes_per_offset * 1.25)
        return min(self.max_read_bytes, max(MIN_READ_BYTES, want))

    def on_leader_change(self, effect: LeaderChange) -> None:
        if effect.leader_and_epoch.leader_id == self.local_id and effect.epoch_start_offset >= 0:
            self._pending_leader = effect
        else:
            self._pending_leader = None
            self._announce(effect.leader_and_epoch)
        self._maybe_announce()

    def _maybe_announce(self) -> None:
        p = self._pending_leader
        if p is not None and self.next_offset >= p.epoch_start_offset:
            self._pending_leader = None
            self._announce(p.leader_and_epoch)

    def _announce(self, leader_and_epoch: LeaderAndEpoch) -> None:
        if leader_and_epoch != self._announced:
            self._announced = leader_and_epoch
            self.listener.handle_leader_change(leader_and_epoch)
