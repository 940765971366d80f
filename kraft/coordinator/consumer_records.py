"""The KIP-848 consumer group records of ``__consumer_offsets``, in Kafka's own schemas.

Facts from Kafka's group-coordinator ``ConsumerGroup*Key/Value.json``: the key's int16 record
type is the key struct's only version (3 group metadata, 4 partition metadata, 5 member
metadata, 6 target assignment metadata, 7 target assignment member, 8 current member
assignment); every value is version 0 and flexible (compact strings, tagged fields). Kafka
writes one record per fact and replays them in log order to rebuild a group: the group epoch,
the subscribed topics' metadata, each member's subscription, the target assignment (its epoch
and each member's share) and each member's current assignment (epoch, state, partitions). A
null value is a tombstone. Schemas and constructors only; ``consumer_group`` replays them.
"""

from __future__ import annotations

import struct

from kraft.coordinator.group_records import GroupRecord, _GroupRecord
from kraft.protocol.schema import BYTES, INT8, INT32, STRING, UUID, Array, Field, Struct

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
_I16 = struct.Struct(">h")

#: CurrentMemberAssignment's State (Kafka's MemberState).
STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS, UNKNOWN_STATE = 0, 1, 2, 127


class TopicPartitions(Struct):
    FIELDS = (
        Field("topic_id", UUID),
        Field("partitions", Array(INT32)),
    )


class ConsumerGroupMetadataKey(_GroupRecord):
    API_KEY = 1010
    VERSIONS = "3"
    FIELDS = (Field("group_id", STRING),)


class ConsumerGroupMetadataValue(_GroupRecord):
    API_KEY = 1011
    VERSIONS = "0"
    FLEXIBLE = "0+"
    FIELDS = (Field("epoch", INT32),)


class ConsumerGroupPartitionMetadataKey(_GroupRecord):
    API_KEY = 1012
    VERSIONS = "4"
    FIELDS = (Field("group_id", STRING),)


class ConsumerGroupPartitionMetadataValue(_GroupRecord):
    API_KEY = 1013
    VERSIONS = "0"
    FLEXIBLE = "0+"

    class TopicMetadata(Struct):
        class PartitionMetadata(Struct):
            FIELDS = (
                Field("partition", INT32),
                Field("racks", Array(STRING)),
            )

        FIELDS = (
            Field("topic_id", UUID),
            Field("topic_name", STRING),
            Field("num_partitions", INT32),
            Field("partition_metadata", Array(PartitionMetadata)),  # racks: unused since Kafka 4.0
        )

    FIELDS = (Field("topics", Array(TopicMetadata)),)


class ConsumerGroupMemberMetadataKey(_GroupRecord):
    API_KEY = 1014
    VERSIONS = "5"
    FIELDS = (Field("group_id", STRING), Field("member_id", STRING))


class ClassicMemberMetadata(Struct):
    """A member of a consumer group that speaks the classic protocol (JoinGroup/SyncGroup):
    its session timeout and the protocols of its JoinGroup."""

    class ClassicProtocol(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("metadata", BYTES),
        )

    FIELDS = (
        Field("session_timeout_ms", INT32),
        Field("supported_protocols", Array(ClassicProtocol)),
    )


class ConsumerGroupMemberMetadataValue(_GroupRecord):
    API_KEY = 1015
    VERSIONS = "0"
    FLEXIBLE = "0+"
    FIELDS = (
        Field("instance_id", STRING, nullable="0+", default=None),
        Field("rack_id", STRING, nullable="0+", default=None),
        Field("client_id", STRING),
        Field("client_host", STRING),
        Field("subscribed_topic_names", Array(STRING)),
        Field("subscribed_topic_regex", STRING, nullable="0+", default=None),
        Field("rebalance_timeout_ms", INT32, default=-1),
        Field("server_assignor", STRING, nullable="0+", default=None),
        Field("classic_member_metadata", ClassicMemberMetadata, nullable="0+", default=None, tag=0),
    )


class ConsumerGroupTargetAssignmentMetadataKey(_GroupRecord):
    API_KEY = 1016
    VERSIONS = "6"
    FIELDS = (Field("group_id", STRING),)


class ConsumerGroupTargetAssignmentMetadataValue(_GroupRecord):
    API_KEY = 1017
    VERSIONS = "0"
    FLEXIBLE = "0+"
    FIELDS = (Field("assignment_epoch", INT32),)


class ConsumerGroupTargetAssignmentMemberKey(_GroupRecord):
    API_KEY = 1018
    VERSIONS = "7"
    FIELDS = (Field("group_id", STRING), Field("member_id", STRING))


class ConsumerGroupTargetAssignmentMemberValue(_GroupRecord):
    API_KEY = 1019
    VERSIONS = "0"
    FLEXIBLE = "0+"
    FIELDS = (Field("topic_partitions", Array(TopicPartitions)),)


class ConsumerGroupCurrentMemberAssignmentKey(_GroupRecord):
    API_KEY = 1020
    VERSIONS = "8"
    FIELDS = (Field("group_id", STRING), Field("member_id", STRING))


class ConsumerGroupCurrentMemberAssignmentValue(_GroupRecord):
    API_KEY = 1021
    VERSIONS = "0"
    FLEXIBLE = "0+"
    FIELDS = (
        Field("member_epoch", INT32),
        Field("previous_member_epoch", INT32),
        Field("state", INT8),
        Field("assigned_partitions", Array(TopicPartitions)),
        Field("partitions_pending_revocation", Array(TopicPartitions)),
    )


#: record type -> (key class, value class)
RECORD_TYPES = {
    GROUP_METADATA: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    PARTITION_METADATA: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    MEMBER_METADATA: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    TARGET_METADATA: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    TARGET_MEMBER: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    CURRENT_ASSIGNMENT: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
}
_TYPE_OF_KEY = {k: t for t, (k, _) in RECORD_TYPES.items()}


def record(key, value) -> GroupRecord:
    """The bytes of ``key`` (one of the key classes above) and ``value`` (its value, or None: a
    tombstone)."""
    kind = _TYPE_OF_KEY[type(key)]
    kb = _I16.pack(kind) + key.encode(kind)
    return GroupRecord(kb, None if value is None else _I16.pack(0) + value.encode(0))


def topic_partitions(assignment: dict) -> list:
    """{topic id: set of partitions} -> [TopicPartitions] in a stable order."""
    return [TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items(),
                                                                                   key=lambda kv: kv[0].bytes)
            if ps]


def assignment_of(items) -> dict:
    """[TopicPartitions] -> {topic id: set of partitions}."""
    out: dict = {}
    for tp in items or ():
        if tp.partitions:
            out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return out
