"""``CommittedRecordsListener``: the Raft listener beside the controller that checks the log itself.

It keeps a state any test can check across nodes: how many data records were committed and a
running BLAKE2b digest chained over every committed batch (the leader assigns offsets and
epochs, so committed batches are byte-identical on every node), and it checks what the core
promises (in order, no gaps). Snapshots hold the controller's image, not this state: after a
snapshot load the chain restarts from the snapshot id, so only nodes that replayed the same
log prefix share a digest (tests compare images across snapshots). It also counts the bytes
the snapshot schedule needs. This module must stay free of any metadata interpretation.
"""

from __future__ import annotations

import hashlib
import struct

#: What the digest chains per batch: the previous digest, then the batch's base offset,
#: length, partition leader epoch, magic and CRC-32C. The CRC covers every other byte of
#: the batch and was checked over all of them when the bytes were read from the log
#: (``SegmentedLog.read``), so this digests the whole batch without hashing its bytes a
#: second time (the way ZooKeeper's digest is a CRC-32 of each node's data). Hashing every
#: byte with BLAKE2b cost a tenth of the leader's loop time at 100 records per request.
_LINK = struct.Struct(">16sqiibI")


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
        self._digest = bytes(16)  # chain: d_n = BLAKE2b(d_{n-1} || header fields of batch_n)

    @property
    def digest(self) -> str:
        return self._digest.hex()

    def handle_commit(self, batches) -> None:
        for b in batches:
            if b.base_offset != self.next_offset:
                # The core promises gap-free delivery; a gap here is a bug worth stopping for.
                raise RuntimeError(f"commit gap: expected offset {self.next_offset}, got {b.base_offset}")
            self._digest = hashlib.blake2b(_LINK.pack(self._digest, b.base_offset, b.length, b.partition_leader_epoch,
                                                      b.magic, b.crc), digest_size=16).digest()
            self.next_offset = b.next_offset
            self.last_epoch = b.partition_leader_epoch
            self.last_timestamp = b.max_timestamp
            self.batches += 1
            self.bytes_since_snapshot += b.size
            if not b.is_control:
                self.records += b.records_count

    def handle_load_snapshot(self, reader) -> None:
        sid = reader.snapshot_id
        self.snapshot_id = sid
        self.next_offset = sid.offset
        self.last_epoch = sid.epoch
        self.records = 0
        self.batches = 0
        self._digest = hashlib.blake2b(f"snapshot {sid.offset}-{sid.epoch}".encode(), digest_size=16).digest()
        self.bytes_since_snapshot = 0

    def handle_leader_change(self, leader_and_epoch) -> None:
        self.leader = leader_and_epoch
