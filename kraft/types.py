"""The value types every layer shares, one definition each: log positions and snapshot ids
(``OffsetAndEpoch`` / ``SnapshotId``), a replica's identity (``ReplicaKey``) and a listener
endpoint (``Endpoint``). Plain frozen values: this module imports nothing from kraft."""

from __future__ import annotations

import base64
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    """An offset with the epoch of the record before it (Kafka's OffsetAndEpoch).

    As a snapshot id, ``offset`` is the exclusive end offset of the snapshot and ``epoch``
    the epoch of the record at ``offset - 1``. Ordered by (epoch, offset), as Kafka compares
    log positions when granting votes."""

    offset: int
    epoch: int

    def __lt__(self, other: "OffsetAndEpoch") -> bool:
        return (self.epoch, self.offset) < (other.epoch, other.offset)

    def __le__(self, other: "OffsetAndEpoch") -> bool:
        return (self.epoch, self.offset) <= (other.epoch, other.offset)


#: Kafka names a snapshot by the OffsetAndEpoch it ends at (file ``%020d-%010d.checkpoint``).
SnapshotId = OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class ReplicaKey:
    """A replica: node id and log directory id (KIP-853). A node whose disk was wiped comes
    back with a new directory id and is a different replica. ``directory_id`` None means
    "not known" and matches any directory (a static ``controller.quorum.voters``)."""

    id: int
    directory_id: bytes | None = None

    def matches(self, other: "ReplicaKey") -> bool:
        """Same node, and same directory when both directories are known."""
        if self.id != other.id:
            return False
        a, b = self.directory_id, other.directory_id
        return a is None or b is None or a == b


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A listener: its name (e.g. CONTROLLER), host and port."""

    name: str
    host: str
    port: int


def uuid_text(raw: bytes) -> str:
    """Kafka's text form of a Uuid (``Uuid.toString``): URL-safe base64 of the 16 bytes, no
    padding. The one place for it: operators compare ids across tools."""
    return base64.urlsafe_b64encode(bytes(raw)).decode("ascii").rstrip("=")


__all__ = ["Endpoint", "OffsetAndEpoch", "ReplicaKey", "SnapshotId", "uuid_text"]
