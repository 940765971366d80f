"""The broker's metadata follower: committed batches replayed into the same image the quorum
controller builds (one replay), control batches and non-metadata values skipped, snapshots
replace the image, and each change handed on with the last applied offset."""

from __future__ import annotations

import uuid

from kraft.broker.metadata_follower import MetadataFollower, SharedImageFollower
from kraft.controller.quorum_controller import QuorumController
from kraft.metadata import (BeginTransactionRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord,
                            encode_record)
from kraft.metadata.image import EMPTY_IMAGE
from kraft.raft.listener import SnapshotView
from kraft.types import OffsetAndEpoch
from kraft.records import build_batch, iter_batches
from kraft.records.control import LeaderChangeMessage
from kraft.records import build_control_record_batch

TID = uuid.UUID(int=5)


def broker(i):
    E = RegisterBrokerRecord.BrokerEndpoint
    return RegisterBrokerRecord(broker_id=i, incarnation_id=uuid.UUID(int=i), broker_epoch=i,
                                end_points=[E(name="PLAINTEXT", host="h", port=9000 + i, security_protocol=0)],
                                features=[], rack=None, fenced=False)


def topic_records():
    return [TopicRecord(name="t", topic_id=TID),
            PartitionRecord(partition_id=0, topic_id=TID, replicas=[1], isr=[1], removing_replicas=[],
                            adding_replicas=[], leader=1, leader_epoch=0, partition_epoch=0)]


def views(*batches):
    return [b for raw in batches for b in iter_batches(raw)]


def test_follower_builds_the_image_the_controller_builds():
    b1 = build_batch([encode_record(broker(1)), encode_record(broker(2))], base_offset=0, timestamp=0)
    ctrl = build_control_record_batch(LeaderChangeMessage(leader_id=1, voters=[], granting_voters=[]),
                                      base_offset=2)
    b2 = build_batch([encode_record(r) for r in topic_records()] + [b"not a metadata record"],
                     base_offset=3, timestamp=0)
    seen = []
    follower = MetadataFollower(lambda image, offset: seen.append((image, offset)))
    standby = QuorumController(9)
    for batch in (b1, ctrl, b2):
        follower.handle_commit(views(batch))
        standby.handle_commit(views(batch))
    assert follower.image == standby.image
    assert follower.image.topics.by_name["t"].partitions[0].leader == 1
    assert sorted(follower.image.cluster.brokers) == [1, 2]
    assert follower.last_applied_offset == 5 and seen[-1][1] == 5
    assert [o for _, o in seen] == [1, 2, 5]  # every commit reports progress, control batches too
    assert follower.metadata_errors == 1 == standby.metadata_errors


def test_an_open_transaction_is_not_visible_until_it_ends():
    follower = MetadataFollower()
    follower.handle_commit(views(build_batch([encode_record(BeginTransactionRecord(name="x")),
                                              *map(encode_record, topic_records())], base_offset=0, timestamp=0)))
    assert "t" not in follower.image.topics.by_name and follower.last_applied_offset == 2


def test_snapshot_replaces_the_image_and_moves_the_offset():
    follower = MetadataFollower()
    follower.handle_commit(views(build_batch([encode_record(broker(7))], base_offset=0, timestamp=0)))
    data = build_batch([encode_record(broker(1)), *map(encode_record, topic_records())], base_offset=0, timestamp=0)
    follower.handle_load_snapshot(SnapshotView(OffsetAndEpoch(40, 2), data))
    assert sorted(follower.image.cluster.brokers) == [1] and "t" in follower.image.topics.by_name
    assert follower.next_offset == 40 and follower.last_applied_offset == 39


def test_shared_image_follower_reads_the_controllers_image_after_it():
    standby = QuorumController(9)
    seen = []
    shared = SharedImageFollower(standby, lambda image, offset: seen.append((image, offset)))
    assert shared.image is EMPTY_IMAGE
    batch = views(build_batch([encode_record(broker(1))], base_offset=0, timestamp=0))
    standby.handle_commit(batch)
    shared.handle_commit(batch)
    assert seen == [(standby.image, 0)] and 1 in seen[0][0].cluster.brokers
