"""Retention of the metadata log below its snapshots: Kafka's ``metadata.max.retention.bytes``
and ``metadata.max.retention.ms`` (KafkaMetadataLog.maybeClean).

Kafka never deletes the log below a snapshot just because the snapshot exists: it keeps the
older snapshots and the segments between them until they are beyond retention. Walking the
snapshots oldest first, in pairs (older, next): if the older one is beyond retention, the
log start moves to ``next`` (deleting the whole segments below it and the older snapshots)
and the walk continues; it stops at the first pair that is within retention, and the newest
snapshot is always kept. By size, "beyond retention" means the log plus every snapshot still
kept is larger than ``max_bytes``; by time, that the snapshot's last contained log timestamp
is older than ``max_ms``. ``-1`` disables either rule. Only the decision rules live here:
the metadata log applies them. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Kafka's defaults (KRaftConfigs / MetadataLogConfig).
DEFAULT_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_MAX_MS = 7 * 24 * 3600 * 1000
#: How often Kafka's raft client runs the cleaner between snapshots (RaftMetadataLogCleanerManager).
CLEAN_INTERVAL_MS = 60_000


@dataclass(frozen=True)
class MetadataRetention:
    max_bytes: int = DEFAULT_MAX_BYTES
    max_ms: int = DEFAULT_MAX_MS

    def beyond_size(self, log_bytes: int, kept_snapshot_bytes: int) -> bool:
        return self.max_bytes >= 0 and log_bytes + kept_snapshot_bytes > self.max_bytes

    def beyond_time(self, snapshot_timestamp_ms: int, now_ms: int) -> bool:
        # a snapshot without a timestamp (-1) is never old by time, as in Kafka (Optional.empty)
        return self.max_ms >= 0 and 0 <= snapshot_timestamp_ms < now_ms - self.max_ms
