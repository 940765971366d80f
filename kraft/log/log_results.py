"""What a partition log hands back to its callers: ``LogAppendInfo`` from every append,
``FlushStats`` from every flush cycle, and the error of an out-of-order follower append.
Shared by ``SegmentedLog`` and the simulator's in-memory partition log
(``kraft.testing.replication_log``), so both answer in the same types. Values only: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kraft.errors import InvalidRecordError


class UnexpectedAppendOffsetError(InvalidRecordError):
    """A follower append whose first offset is below the log end offset (the caller must
    truncate first). Defined with the log: kraft.errors has no such type."""


class LogAppendInfo(NamedTuple):
    """What ``append`` did (a NamedTuple: it is built on every append)."""

    first_offset: int
    last_offset: int
    batch_count: int
    size_bytes: int
    max_timestamp: int
    #: Where the batches went: segment base offset and file position.
    segment_base_offset: int
    position: int


@dataclass(frozen=True)
class FlushStats:
    """One flush cycle, for metrics and the fsync profiler (``tools/fsync_profile.py``)."""

    fsync_seconds: float
    #: Bytes and batches appended since the previous flush cycle (what this one covered).
    bytes: int
    batches: int
    flushed_offset: int
