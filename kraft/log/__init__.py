"""Log storage in Kafka's on-disk formats: segments (``.log``/``.index``/``.timeindex``),
the segmented log with group-commit flushing and crash recovery, the leader-epoch cache and
its checkpoint, snapshots, and the ``quorum-state`` / ``meta.properties`` state files.

Main entry points::

    SegmentedLog.open(directory, LogConfig(...), recovery_point=None, log_start_offset=None,
                      on_flushed=callback, on_fatal=callback)
        .append(batches, assign_offsets=True, leader_epoch=e) -> LogAppendInfo
        .read(offset, max_bytes) -> bytes   .truncate_to(offset)   .delete_below(offset)
        .end_offset_for_epoch(epoch)   .request_flush()   .wait_for_flush(offset)   .close()
    SnapshotFileWriter / SnapshotFileReader / list_snapshots / latest_snapshot / delete_snapshots_before
    QuorumStateFile, MetaProperties

This package must not import asyncio: the server hops flush callbacks onto its loop.
"""

from kraft.log.checkpoint import LeaderEpochCheckpointFile, OffsetCheckpointFile
from kraft.log.config import LogConfig
from kraft.log.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from kraft.log.hotloops import IMPLEMENTATION
from kraft.log.log_results import FlushStats, LogAppendInfo, UnexpectedAppendOffsetError
from kraft.log.recovery import RecoveryReport
from kraft.log.segment import LogSegment
from kraft.log.segmented_log import SegmentedLog

__all__ = [
    "FlushStats", "IMPLEMENTATION", "LeaderEpochCache", "LeaderEpochCheckpointFile", "LogAppendInfo",
    "LogConfig", "LogSegment", "OffsetCheckpointFile", "RecoveryReport", "SegmentedLog",
    "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "UnexpectedAppendOffsetError",
]
