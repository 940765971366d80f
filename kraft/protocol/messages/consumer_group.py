"""The KIP-848 consumer group protocol: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

Schema facts from Kafka's ConsumerGroupHeartbeat/ConsumerGroupDescribe Request and Response JSON
files: ConsumerGroupHeartbeat 0-1, flexible from 0 (v1 adds SubscribedTopicRegex; librdkafka
2.x sends only v1), its response's ``Assignment`` is a nullable struct (an int8 marker);
ConsumerGroupDescribe 0, flexible. Assignments name topics by id. Schemas only:
``kraft.coordinator`` answers them.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, STRING, UUID, Array, Field, Struct

#: MemberEpoch values with a meaning of their own (Kafka's ConsumerGroupHeartbeatRequest).
JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2


class TopicPartitions(Struct):
    """Kafka's common struct of the heartbeat: a topic by id and some of its partitions."""
    FIELDS = (
        Field("topic_id", UUID),
        Field("partitions", Array(INT32)),
    )


class Assignment(Struct):
    FIELDS = (Field("topic_partitions", Array(TopicPartitions)),)


class ConsumerGroupHeartbeatRequest(Request):
    API_KEY = 68
    VERSIONS = "0-1"
    FLEXIBLE = "0+"
    LISTENERS = ("broker",)

    TopicPartitions = TopicPartitions

    # Most fields are null when unchanged since the member's last heartbeat.
    FIELDS = (
        Field("group_id", STRING),
        Field("member_id", STRING),
        Field("member_epoch", INT32),
        Field("instance_id", STRING, nullable="0+", default=None),
        Field("rack_id", STRING, nullable="0+", default=None),
        Field("rebalance_timeout_ms", INT32, default=-1),
        Field("subscribed_topic_names", Array(STRING), nullable="0+", default=None),
        Field("subscribed_topic_regex", STRING, "1+", nullable="1+", default=None),
        Field("server_assignor", STRING, nullable="0+", default=None),
        Field("topic_partitions", Array(TopicPartitions), nullable="0+", default=None),
    )


class ConsumerGroupHeartbeatResponse(Response):
    API_KEY = 68
    VERSIONS = "0-1"
    FLEXIBLE = "0+"

    TopicPartitions = TopicPartitions
    Assignment = Assignment

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("member_id", STRING, nullable="0+", default=None),
        Field("member_epoch", INT32),
        Field("heartbeat_interval_ms", INT32),
        Field("assignment", Assignment, nullable="0+", default=None),
    )


class DescribedTopicPartitions(Struct):
    FIELDS = (
        Field("topic_id", UUID),
        Field("topic_name", STRING),
        Field("partitions", Array(INT32)),
    )


class DescribedAssignment(Struct):
    FIELDS = (Field("topic_partitions", Array(DescribedTopicPartitions)),)


class ConsumerGroupDescribeRequest(Request):
    API_KEY = 69
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("broker",)

    FIELDS = (
        Field("group_ids", Array(STRING)),
        Field("include_authorized_operations", BOOL),
    )


class ConsumerGroupDescribeResponse(Response):
    API_KEY = 69
    VERSIONS = "0"
    FLEXIBLE = "0+"

    TopicPartitions = DescribedTopicPartitions
    Assignment = DescribedAssignment

    class Group(Struct):
        class Member(Struct):
            FIELDS = (
                Field("member_id", STRING),
                Field("instance_id", STRING, nullable="0+", default=None),
                Field("rack_id", STRING, nullable="0+", default=None),
                Field("member_epoch", INT32),
                Field("client_id", STRING),
                Field("client_host", STRING),
                Field("subscribed_topic_names", Array(STRING)),
                Field("subscribed_topic_regex", STRING, nullable="0+", default=None),
                Field("assignment", DescribedAssignment),
                Field("target_assignment", DescribedAssignment),
            )

        FIELDS = (
            Field("error_code", INT16),
            Field("error_message", STRING, nullable="0+", default=None),
            Field("group_id", STRING),
            Field("group_state", STRING),
            Field("group_epoch", INT32),
            Field("assignment_epoch", INT32),
            Field("assignor_name", STRING),
            Field("members", Array(Member)),
            Field("authorized_operations", INT32, default=-2147483648),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("groups", Array(Group)),
    )
