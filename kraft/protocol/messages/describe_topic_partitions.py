"""DescribeTopicPartitions (API key 75, KIP-966): topics and their partitions with leaders,
replicas, ISR and ELR, paginated by a cursor (Kafka 3.8+ ``kafka-topics.sh --describe`` and the
Java admin's ``describeTopics`` use it in place of Metadata).

Schema facts from Kafka's DescribeTopicPartitionsRequest.json / Response.json: version 0 only,
flexible; ResponsePartitionLimit defaults to 2000; Cursor and NextCursor are nullable structs.
Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, STRING, UUID, Array, Field, Struct


class Cursor(Struct):
    FIELDS = (
        Field("topic_name", STRING),
        Field("partition_index", INT32),
    )


class DescribeTopicPartitionsRequest(Request):
    API_KEY = 75
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("broker",)

    class Topic(Struct):
        FIELDS = (Field("name", STRING),)

    FIELDS = (
        Field("topics", Array(Topic)),
        Field("response_partition_limit", INT32, default=2000),
        Field("cursor", Cursor, nullable="0+", default=None),
    )


class DescribeTopicPartitionsResponse(Response):
    API_KEY = 75
    VERSIONS = "0"
    FLEXIBLE = "0+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("error_code", INT16),
                Field("partition_index", INT32),
                Field("leader_id", INT32),
                Field("leader_epoch", INT32, default=-1, ignorable=True),
                Field("replica_nodes", Array(INT32)),
                Field("isr_nodes", Array(INT32)),
                Field("eligible_leader_replicas", Array(INT32), nullable="0+", default=None),
                Field("last_known_elr", Array(INT32), nullable="0+", default=None),
                Field("offline_replicas", Array(INT32), ignorable=True),
            )

        FIELDS = (
            Field("error_code", INT16),
            Field("name", STRING, nullable="0+"),
            Field("topic_id", UUID, ignorable=True),
            Field("is_internal", BOOL, default=False, ignorable=True),
            Field("partitions", Array(Partition)),
            Field("topic_authorized_operations", INT32, default=-2147483648),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, ignorable=True),
        Field("topics", Array(Topic)),
        Field("next_cursor", Cursor, nullable="0+", default=None),
    )
