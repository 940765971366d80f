"""CreateTopics (API key 19): admin clients creating topics (served by brokers, which forward
to the controller, and by controllers directly).

Schema facts from Kafka's CreateTopicsRequest.json / CreateTopicsResponse.json, versions 2-7
(Kafka 4 dropped 0-1; flexible from 5; topic ids in the response from 7). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT8, INT16, INT32, STRING, UUID, Array, Field, Struct


class CreateTopicsRequest(Request):
    API_KEY = 19
    VERSIONS = "2-7"
    FLEXIBLE = "5+"

    class Topic(Struct):
        class Assignment(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("broker_ids", Array(INT32)),
            )

        class Config(Struct):
            FIELDS = (
                Field("name", STRING),
                Field("value", STRING, nullable="0+"),
            )

        FIELDS = (
            Field("name", STRING),
            Field("num_partitions", INT32),  # -1: use the default
            Field("replication_factor", INT16),  # -1: use the default
            Field("assignments", Array(Assignment)),
            Field("configs", Array(Config)),
        )

    FIELDS = (
        Field("topics", Array(Topic)),
        Field("timeout_ms", INT32, default=60000),
        Field("validate_only", BOOL, "1+", default=False),
    )


class CreateTopicsResponse(Response):
    API_KEY = 19
    VERSIONS = "2-7"
    FLEXIBLE = "5+"

    class Topic(Struct):
        class Config(Struct):
            FIELDS = (
                Field("name", STRING, "5+"),
                Field("value", STRING, "5+", nullable="5+"),
                Field("read_only", BOOL, "5+"),
                Field("config_source", INT8, "5+", default=-1, ignorable=True),
                Field("is_sensitive", BOOL, "5+"),
            )

        FIELDS = (
            Field("name", STRING),
            Field("topic_id", UUID, "7+", ignorable=True),
            Field("error_code", INT16),
            Field("error_message", STRING, "1+", nullable="0+", ignorable=True),
            Field("topic_config_error_code", INT16, "5+", tag=0, ignorable=True),
            Field("num_partitions", INT32, "5+", default=-1, ignorable=True),
            Field("replication_factor", INT16, "5+", default=-1, ignorable=True),
            Field("configs", Array(Config), "5+", nullable="5+", ignorable=True),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "2+", ignorable=True),
        Field("topics", Array(Topic)),
    )
