"""A replicated state machine for the simulator, and the cluster-wide record of what was
committed, which together check that every node applies the same committed data, in
order, without gaps.

The state is (next offset, running CRC-32 chain over committed batches, data record
count); a snapshot stores exactly that, so snapshot contents are checked against the
committed history too. Deterministic (CRC, not Python's salted ``hash``).
"""

from __future__ import annotations

import struct
import zlib

from kraft.testing.invariants import InvariantViolation

_STATE = struct.Struct(">qIq")
_BATCH = struct.Struct(">qqi")


class CommittedHistory:
    """Chain value after each committed batch, keyed by the batch's next offset, as first
    seen by any node; every later sighting must agree."""

    def __init__(self):
        self.chain_at: dict[int, int] = {0: 0}
        self.max_offset = 0

    def check(self, node_id: int, next_offset: int, chain: int) -> None:
        seen = self.chain_at.get(next_offset)
        if seen is None:
            self.chain_at[next_offset] = chain
            self.max_offset = max(self.max_offset, next_offset)
        elif seen != chain:
            raise InvariantViolation(
                f"node {node_id}: committed data below offset {next_offset} differs from what "
                f"another node committed (chain {chain:#x} != {seen:#x})")


class SimStateMachine:
    """A ``RaftListener``. Invariant: ``next_offset`` is where the next batch must start."""

    def __init__(self, node_id: int, history: CommittedHistory):
        self.node_id = node_id
        self.history = history
        self.next_offset = 0
        self.chain = 0
        self.count = 0
        self.last_epoch = 0
        self.leader = None
        self.snapshots_loaded = 0
        self.applied_values: list[bytes] | None = None  # set to a list to keep values

    def handle_commit(self, batches) -> None:
        for b in batches:
            if b.base_offset != self.next_offset:
                raise InvariantViolation(f"node {self.node_id}: batch at {b.base_offset} but the "
                                         f"state machine expected {self.next_offset} (gap or repeat)")
            chain = zlib.crc32(_BATCH.pack(b.base_offset, b.next_offset, b.partition_leader_epoch), self.chain)
            if not b.is_control:
                for v in b.values():
                    chain = zlib.crc32(v, chain)
                    self.count += 1
                    if self.applied_values is not None:
                        self.applied_values.append(bytes(v))
            self.chain = chain
            self.next_offset = b.next_offset
            self.last_epoch = b.partition_leader_epoch
            self.history.check(self.node_id, self.next_offset, chain)

    def handle_load_snapshot(self, reader) -> None:
        values = reader.values()
        if len(values) != 1:
            raise InvariantViolation(f"node {self.node_id}: snapshot {reader.snapshot_id} holds {len(values)} records")
        next_offset, chain, count = _STATE.unpack(values[0])
        if next_offset != reader.snapshot_id.offset:
            raise InvariantViolation(f"node {self.node_id}: snapshot {reader.snapshot_id} holds state at {next_offset}")
        self.history.check(self.node_id, next_offset, chain)
        self.next_offset, self.chain, self.count = next_offset, chain, count
        self.last_epoch = reader.snapshot_id.epoch
        self.snapshots_loaded += 1
        if self.applied_values is not None:
            self.applied_values = None  # values before the snapshot are not known any more

    def handle_leader_change(self, leader_and_epoch) -> None:
        self.leader = leader_and_epoch

    def snapshot_value(self) -> bytes:
        return _STATE.pack(self.next_offset, self.chain, self.count)
