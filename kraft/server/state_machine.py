"""The node's Raft listener until the KIP-631 controller exists, and its snapshot policy.

``CommittedRecordsListener`` keeps a state any test can check across nodes: how many data
records were committed and a running BLAKE2b digest over every committed batch's bytes (the
leader assigns offsets and epochs, so committed batches are byte-identical on every node).
It also checks what the core promises (in order, no gaps). Its snapshot is that state as
one JSON record. ``SnapshotPolicy`` takes snapshots the way Kafka's controller does: after
``metadata.log.max.record.bytes.between.snapshots`` committed bytes, or after
``metadata.log.max.snapshot.interval.ms`` with new data. The controller will replace the
listener; this module must stay free of any metadata interpretation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time

from kraft.raft import OffsetAndEpoch

log = logging.getLogger("kraft.state")


class CommittedRecordsListener:
    def __init__(self):
        self.next_offset = 0
        self.last_epoch = 0
        self.last_timestamp = -1  # max timestamp of the last committed batch
        self.records = 0
        self.batches = 0
        self.bytes_since_snapshot = 0
        self.snapshot_id = None
        self.leader = None
        self._digest = bytes(16)  # chain: d_n = BLAKE2b(d_{n-1} || batch_n), resumable from a snapshot

    @property
    def digest(self) -> str:
        return self._digest.hex()

    def handle_commit(self, batches) -> None:
        for b in batches:
            if b.base_offset != self.next_offset:
                # The core promises gap-free delivery; a gap here is a bug worth stopping for.
                raise RuntimeError(f"commit gap: expected offset {self.next_offset}, got {b.base_offset}")
            h = hashlib.blake2b(self._digest, digest_size=16)
            h.update(b.tobytes())
            self._digest = h.digest()
            self.next_offset = b.next_offset
            self.last_epoch = b.partition_leader_epoch
            self.last_timestamp = b.max_timestamp
            self.batches += 1
            self.bytes_since_snapshot += b.size
            if not b.is_control:
                self.records += b.records_count

    def snapshot_values(self) -> list[bytes]:
        return [json.dumps({"next_offset": self.next_offset, "records": self.records,
                            "batches": self.batches, "digest": self.digest}).encode()]

    def handle_load_snapshot(self, reader) -> None:
        values = reader.values()
        state = json.loads(values[0]) if values else {"records": 0, "batches": 0, "digest": ""}
        self.snapshot_id = reader.snapshot_id
        self.next_offset = reader.snapshot_id.offset
        self.last_epoch = reader.snapshot_id.epoch
        self.records = state["records"]
        self.batches = state["batches"]
        # Continue the chain from the snapshot's digest so every node agrees afterwards.
        self._digest = bytes.fromhex(state["digest"]) if state["digest"] else bytes(16)
        self.bytes_since_snapshot = 0

    def handle_leader_change(self, leader_and_epoch) -> None:
        self.leader = leader_and_epoch


class SnapshotPolicy:
    """Decides when to snapshot the listener's state at its committed offset."""

    def __init__(self, core, listener: CommittedRecordsListener, *, max_bytes: int, max_interval_ms: int,
                 clock=time.monotonic):
        self.core = core
        self.listener = listener
        self.max_bytes = max_bytes
        self.max_interval_ms = max_interval_ms
        self.clock = clock
        self.last_snapshot_at = clock()
        self.taken = 0

    def after_commit(self, now_ms: int) -> OffsetAndEpoch | None:
        lst = self.listener
        if lst.next_offset <= 0 or lst.bytes_since_snapshot == 0:
            return None
        elapsed_ms = (self.clock() - self.last_snapshot_at) * 1000
        if lst.bytes_since_snapshot < self.max_bytes and not (0 < self.max_interval_ms <= elapsed_ms):
            return None
        sid = OffsetAndEpoch(lst.next_offset, lst.last_epoch)
        try:
            # The last contained record's timestamp: metadata.max.retention.ms ages the
            # snapshot (and the segments it replaces) by it, as Kafka does.
            writer = self.core.create_snapshot(sid, now_ms, lst.last_timestamp)
        except ValueError as exc:  # e.g. the listener is ahead of this node's HW after a reload
            log.debug("no snapshot at %s: %s", sid, exc)
            return None
        self.last_snapshot_at = self.clock()
        lst.bytes_since_snapshot = 0
        if writer is None:
            return None
        writer.append(lst.snapshot_values())
        writer.freeze()
        self.taken += 1
        log.info("snapshot %020d-%010d written (%d records so far)", sid.offset, sid.epoch, lst.records)
        return sid
