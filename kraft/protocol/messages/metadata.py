"""Metadata (API key 3): clients discovering brokers, topics, partitions and leaders.

Schema facts from Kafka's MetadataRequest.json / MetadataResponse.json, versions 0-13 (flexible
from 9). In v0 an empty topic list means "all topics"; from v1 that is a null list. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, STRING, UUID, Array, Field, Struct

_NO_AUTHORIZED_OPERATIONS = -2147483648  # INT32_MIN: "not requested"


class MetadataRequest(Request):
    API_KEY = 3
    VERSIONS = "0-13"
    FLEXIBLE = "9+"
    LISTENERS = ("broker",)
    #: librdkafka (2.x) asks for all topics at v9+ with its 4-byte array-count placeholder
    #: left in place (a compact null plus 3 extra bytes); Kafka ignores what follows a body.
    TRAILING_BYTES_FROM_VERSION = 9

    class Topic(Struct):
        FIELDS = (
            Field("topic_id", UUID, "10+", ignorable=True),
            Field("name", STRING, nullable="10+"),
        )

    FIELDS = (
        Field("topics", Array(Topic), nullable="1+"),
        Field("allow_auto_topic_creation", BOOL, "4+", default=True),
        Field("include_cluster_authorized_operations", BOOL, "8-10"),
        Field("include_topic_authorized_operations", BOOL, "8+"),
    )


class MetadataResponse(Response):
    API_KEY = 3
    VERSIONS = "0-13"
    FLEXIBLE = "9+"

    class Broker(Struct):
        FIELDS = (
            Field("node_id", INT32),
            Field("host", STRING),
            Field("port", INT32),
            Field("rack", STRING, "1+", nullable="1+", default=None, ignorable=True),
        )

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("error_code", INT16),
                Field("partition_index", INT32),
                Field("leader_id", INT32),
                Field("leader_epoch", INT32, "7+", default=-1, ignorable=True),
                Field("replica_nodes", Array(INT32)),
                Field("isr_nodes", Array(INT32)),
                Field("offline_replicas", Array(INT32), "5+", ignorable=True),
            )

        FIELDS = (
            Field("error_code", INT16),
            Field("name", STRING, nullable="12+"),
            Field("topic_id", UUID, "10+", ignorable=True),
            Field("is_internal", BOOL, "1+", default=False, ignorable=True),
            Field("partitions", Array(Partition)),
            Field("topic_authorized_operations", INT32, "8+", default=_NO_AUTHORIZED_OPERATIONS),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "3+", ignorable=True),
        Field("brokers", Array(Broker)),
        Field("cluster_id", STRING, "2+", nullable="2+", default=None, ignorable=True),
        Field("controller_id", INT32, "1+", default=-1, ignorable=True),
        Field("topics", Array(Topic)),
        Field("cluster_authorized_operations", INT32, "8-10", default=_NO_AUTHORIZED_OPERATIONS),
        Field("error_code", INT16, "13+", ignorable=True),
    )
