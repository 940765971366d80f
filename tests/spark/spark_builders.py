"""Builders of metadata and partition logs with known contents for the Spark tests (a
module of its own: ``conftest`` is a name every test directory uses)."""

from __future__ import annotations

import uuid

from kraft import records
from kraft.log import LogConfig, SegmentedLog
from kraft.log.snapshot import SnapshotFileWriter
from kraft.metadata import (
    FenceBrokerRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode_record,
)
from kraft.records import LeaderChangeMessage
from kraft.types import SnapshotId


def open_log(directory, segment_bytes=1 << 20):
    return SegmentedLog.open(str(directory), LogConfig(segment_bytes=segment_bytes, background_flush=False,
                                                       index_interval_bytes=0))


TOPIC_IDS = [uuid.UUID(int=i + 1) for i in range(3)]


def metadata_batches(topics=("orders", "payments", "audit"), partitions=2):
    """Metadata record batches: 3 brokers, one TopicRecord and ``partitions`` PartitionRecords
    per topic (each in its own batch), one fence; a LeaderChange control batch first."""
    out = [records.build_control_record_batch(LeaderChangeMessage(1, (1, 2, 3), (1, 2)))]
    for b in (1, 2, 3):
        out.append(records.build_batch([encode_record(RegisterBrokerRecord(
            broker_id=b, incarnation_id=uuid.UUID(int=100 + b), broker_epoch=b, rack=None))]))
    for t, name in enumerate(topics):
        recs = [TopicRecord(name=name, topic_id=TOPIC_IDS[t])] + [
            PartitionRecord(partition_id=p, topic_id=TOPIC_IDS[t], replicas=[1, 2, 3], isr=[1, 2], leader=1 + p)
            for p in range(partitions)]
        out.append(records.build_batch([encode_record(r) for r in recs]))
    out.append(records.build_batch([encode_record(FenceBrokerRecord(id=3, epoch=3))]))
    return out


def write_metadata_log(node_dir, batches, *, snapshot_batches=None, snapshot_offset=None, segment_bytes=1 << 20):
    """``node_dir/__cluster_metadata-0`` with ``batches`` appended at epoch 1, and a snapshot
    at ``snapshot_offset`` holding ``snapshot_batches`` when given."""
    directory = node_dir / "__cluster_metadata-0"
    log = open_log(directory, segment_bytes)
    try:
        for b in batches:
            log.append(b, leader_epoch=1)
        log.request_flush()
    finally:
        log.close()
    if snapshot_batches is not None:
        with SnapshotFileWriter(str(directory), SnapshotId(snapshot_offset, 1), 5, timestamp_ms=5) as w:
            for b in snapshot_batches:
                w.append(b)
            w.freeze()
    return directory
