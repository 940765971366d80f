"""The node's Raft listener until the controller exists: it keeps what a state machine
must (the committed offset it has applied, the records count, the last snapshot loaded)
and checks the delivery guarantees the core promises (in order, no gaps).

The KIP-631 controller replaces it as the listener; this class must stay free of any
metadata interpretation.
"""

from __future__ import annotations

import logging

log = logging.getLogger("kraft.state")


class CommittedRecordsListener:
    def __init__(self):
        self.next_offset = 0
        self.records = 0
        self.batches = 0
        self.snapshot_id = None
        self.leader = None

    def handle_commit(self, batches) -> None:
        for b in batches:
            if b.base_offset != self.next_offset:
                # The core promises gap-free delivery; a gap here is a bug worth stopping for.
                raise RuntimeError(f"commit gap: expected offset {self.next_offset}, got {b.base_offset}")
            self.next_offset = b.next_offset
            self.batches += 1
            if not b.is_control:
                self.records += b.records_count

    def handle_load_snapshot(self, reader) -> None:
        self.snapshot_id = reader.snapshot_id
        self.next_offset = reader.snapshot_id.offset
        self.records = len(reader.values())

    def handle_leader_change(self, leader_and_epoch) -> None:
        self.leader = leader_and_epoch
