"""Images and contexts for the controller's admin handler tests (configs, ACLs, features,
producer ids): built by replaying records, the way the controller builds its own."""

from __future__ import annotations

import uuid

from kraft.controller.result import ControllerContext
from kraft.metadata import (EMPTY_IMAGE, FeatureLevelRecord, MetadataDelta, PartitionRecord, RegisterBrokerRecord,
                            TopicRecord)

NODE_ID = 3000  # the controller's own id in these tests


def apply(image, records):
    """The image after replaying ``records`` on ``image``, as standbys and brokers would."""
    delta = MetadataDelta(image)
    delta.replay_all(records)
    return delta.apply()


def broker(broker_id: int, epoch: int = 100, features=(("metadata.version", 7, 25),)):
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=uuid.UUID(int=broker_id + 1), broker_epoch=epoch,
        features=[RegisterBrokerRecord.BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                  for n, lo, hi in features], fenced=False)


def topic(name: str, topic_id: uuid.UUID, partitions: int = 1, replicas=(1, 2, 3), **partition_fields):
    out = [TopicRecord(name=name, topic_id=topic_id)]
    for p in range(partitions):
        fields = dict(replicas=list(replicas), isr=list(replicas), leader=replicas[0], leader_epoch=0,
                      partition_epoch=0)
        fields.update(partition_fields)
        out.append(PartitionRecord(partition_id=p, topic_id=topic_id, **fields))
    return out


FOO = uuid.UUID(int=0xF00)
BAR = uuid.UUID(int=0xBA2)


def cluster_image(metadata_version: int = 21):
    """Three brokers, topics ``foo`` (2 partitions) and ``bar`` (1), metadata.version set."""
    return apply(EMPTY_IMAGE, [FeatureLevelRecord(name="metadata.version", feature_level=metadata_version),
                               broker(1), broker(2), broker(3)] + topic("foo", FOO, 2) + topic("bar", BAR))


def context(image, version: int, settings=None) -> ControllerContext:
    return ControllerContext(image=image, version=version, now_ms=1_000_000, settings=dict(settings or {}),
                             node_id=NODE_ID, cluster_id="test-cluster")
