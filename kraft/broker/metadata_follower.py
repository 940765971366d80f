"""How a broker learns the cluster metadata: a Raft listener that turns committed
``__cluster_metadata`` records into a ``MetadataImage`` and hands each new image to the broker.

``MetadataFollower`` is the listener of a broker-only node (a Raft observer): it replays
committed batches with the same ``replay_records`` the controller uses and loads snapshots
whole. ``SharedImageFollower`` is the listener of a combined node (``broker,controller``): the
quorum controller already replays every committed record, so it only reads the controller's
committed image after the controller saw the batch (it must come after the controller in the
fan-out). Both call ``on_image(image, offset)`` whenever the image changed and track
``last_applied_offset``, the offset a broker reports in its heartbeats. ``InitialCatchUp``
says when a starting broker may act on those images at all. No I/O.
"""

from __future__ import annotations

import logging

from kraft.metadata.image import EMPTY_IMAGE
from kraft.metadata.replay import decode_values, image_from_snapshot, replay_records

log = logging.getLogger("kraft.broker.metadata")


class InitialCatchUp:
    """Kafka's initial metadata catch-up: a starting broker acts on no image until it has
    applied the metadata log up to the quorum's high watermark as it stood when this node
    first learned it (from a snapshot, the local log, a fetch, or all three). Commits arrive
    in chunks, and a chunk's image is a prefix of the cluster's state: a broker that
    published one took every local partition of a topic not yet replayed for a stray and
    renamed it away (3,000 acknowledged records lost in a clean restart of 1,200 partitions).

    ``high_watermark() -> int`` is the quorum's high watermark as known here (-1 while
    unknown). Invariant: once ``done`` it stays done; ``target`` never changes once set."""

    def __init__(self, high_watermark):
        self.high_watermark = high_watermark
        self.target: int | None = None
        self.done = False

    def reached(self, next_offset: int) -> bool:
        """Has a listener that applied everything below ``next_offset`` caught up?"""
        if self.done:
            return True
        if self.target is None:
            hw = self.high_watermark()
            if hw < 0:
                return False  # the leader's high watermark is not known yet
            self.target = hw
        self.done = next_offset >= self.target
        return self.done


class MetadataFollower:
    """Invariant: ``image`` is the replay of every committed record below ``next_offset``."""

    def __init__(self, on_image=None):
        self.on_image = on_image
        self.image = EMPTY_IMAGE
        self.next_offset = 0
        self.metadata_errors = 0
        self.leader_and_epoch = None
        self._txn = None

    @property
    def last_applied_offset(self) -> int:
        return self.next_offset - 1

    def handle_commit(self, batches) -> None:
        values = [v for b in batches if not b.is_control for v in b.values()]
        if batches:
            self.next_offset = batches[-1].next_offset
        if values:
            self._replay(values, self.image, self._txn)
        self._publish()

    def handle_load_snapshot(self, reader) -> None:
        self.image, self._txn, errors = image_from_snapshot(reader)
        if errors:
            self.metadata_errors += errors
            log.warning("snapshot %s: %d records are not metadata or do not fit the image: skipped",
                        reader.snapshot_id, errors)
        self.next_offset = reader.snapshot_id.offset
        self._publish()

    @property
    def open_transaction(self) -> bool:
        """A metadata transaction is open in the committed log (a snapshot now would split it)."""
        return self._txn is not None

    def handle_leader_change(self, leader_and_epoch) -> None:
        self.leader_and_epoch = leader_and_epoch

    def _replay(self, values, image, txn) -> None:
        records, errors = decode_values(values)
        self.image, self._txn, replay_errors = replay_records(image, txn, records)
        errors += replay_errors
        if errors:
            self.metadata_errors += errors
            log.warning("%d committed records below offset %d are not metadata records or do not fit the "
                        "image: skipped", errors, self.next_offset)

    def _publish(self) -> None:
        if self.on_image is not None:
            self.on_image(self.image, self.last_applied_offset)


class SharedImageFollower:
    """Reads ``source.image`` / ``source.next_offset`` (the quorum controller's committed view)."""

    def __init__(self, source, on_image=None):
        self.source = source
        self.on_image = on_image
        self.leader_and_epoch = None

    @property
    def image(self):
        return self.source.image

    @property
    def last_applied_offset(self) -> int:
        return self.source.next_offset - 1

    def handle_commit(self, batches) -> None:
        self._publish()

    def handle_load_snapshot(self, reader) -> None:
        self._publish()

    def handle_leader_change(self, leader_and_epoch) -> None:
        self.leader_and_epoch = leader_and_epoch

    def _publish(self) -> None:
        if self.on_image is not None:
            self.on_image(self.source.image, self.last_applied_offset)
