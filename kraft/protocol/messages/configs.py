"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44): reading and changing
dynamic configs of topics, brokers (and the cluster-wide broker default, resource name "").

Schema facts from Kafka's {DescribeConfigs,AlterConfigs,IncrementalAlterConfigs}{Request,Response}
.json as of Kafka 4: DescribeConfigs v0 was removed (v1 is the baseline, so IsDefault, a v0-only
field, is absent); flexible from DescribeConfigs v4, AlterConfigs v2, IncrementalAlterConfigs v1.
Schemas only; the meaning lives in ``kraft.metadata.config_describe`` and ``kraft.controller``.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT8, INT16, INT32, STRING, Array, Field, Struct

# ConfigResource.Type
RESOURCE_UNKNOWN, RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER = 0, 2, 4, 8
RESOURCE_CLIENT_METRICS, RESOURCE_GROUP = 16, 32
# AlterConfigOp.OpType
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


class DescribeConfigsRequest(Request):
    API_KEY = 32
    VERSIONS = "1-4"
    FLEXIBLE = "4+"
    LISTENERS = ("broker", "controller")

    class Resource(Struct):
        FIELDS = (
            Field("resource_type", INT8),
            Field("resource_name", STRING),
            Field("configuration_keys", Array(STRING), nullable="0+", default=None),  # null: every key
        )

    FIELDS = (
        Field("resources", Array(Resource)),
        Field("include_synonyms", BOOL, "1+", default=False),
        Field("include_documentation", BOOL, "3+", default=False),
    )


class DescribeConfigsResponse(Response):
    API_KEY = 32
    VERSIONS = "1-4"
    FLEXIBLE = "4+"

    class Result(Struct):
        class Config(Struct):
            class Synonym(Struct):
                FIELDS = (
                    Field("name", STRING, "1+"),
                    Field("value", STRING, "1+", nullable="0+"),
                    Field("source", INT8, "1+"),
                )

            FIELDS = (
                Field("name", STRING),
                Field("value", STRING, nullable="0+"),
                Field("read_only", BOOL),
                Field("config_source", INT8, "1+", default=-1, ignorable=True),
                Field("is_sensitive", BOOL),
                Field("synonyms", Array(Synonym), "1+", ignorable=True),
                Field("config_type", INT8, "3+", default=0, ignorable=True),
                Field("documentation", STRING, "3+", nullable="0+", ignorable=True),
            )

        FIELDS = (
            Field("error_code", INT16),
            Field("error_message", STRING, nullable="0+", default=None),
            Field("resource_type", INT8),
            Field("resource_name", STRING),
            Field("configs", Array(Config)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Result)),
    )


class AlterConfigsRequest(Request):
    API_KEY = 33
    VERSIONS = "0-2"
    FLEXIBLE = "2+"
    LISTENERS = ("broker", "controller")

    class Resource(Struct):
        class Config(Struct):
            FIELDS = (
                Field("name", STRING),
                Field("value", STRING, nullable="0+"),
            )

        FIELDS = (
            Field("resource_type", INT8),
            Field("resource_name", STRING),
            Field("configs", Array(Config)),
        )

    FIELDS = (
        Field("resources", Array(Resource)),
        Field("validate_only", BOOL),
    )


class AlterConfigsResponse(Response):
    API_KEY = 33
    VERSIONS = "0-2"
    FLEXIBLE = "2+"

    class Resource(Struct):
        FIELDS = (
            Field("error_code", INT16),
            Field("error_message", STRING, nullable="0+", default=None),
            Field("resource_type", INT8),
            Field("resource_name", STRING),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("responses", Array(Resource)),
    )


class IncrementalAlterConfigsRequest(Request):
    API_KEY = 44
    VERSIONS = "0-1"
    FLEXIBLE = "1+"
    LISTENERS = ("broker", "controller")

    class Resource(Struct):
        class Config(Struct):
            FIELDS = (
                Field("name", STRING),
                Field("config_operation", INT8),  # OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT
                Field("value", STRING, nullable="0+"),
            )

        FIELDS = (
            Field("resource_type", INT8),
            Field("resource_name", STRING),
            Field("configs", Array(Config)),
        )

    FIELDS = (
        Field("resources", Array(Resource)),
        Field("validate_only", BOOL),
    )


class IncrementalAlterConfigsResponse(Response):
    API_KEY = 44
    VERSIONS = "0-1"
    FLEXIBLE = "1+"

    class Resource(Struct):
        FIELDS = (
            Field("error_code", INT16),
            Field("error_message", STRING, nullable="0+", default=None),
            Field("resource_type", INT8),
            Field("resource_name", STRING),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("responses", Array(Resource)),
    )
