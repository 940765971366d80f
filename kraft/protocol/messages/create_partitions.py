"""CreatePartitions (API key 37): admin clients adding partitions to existing topics.

Schema facts from Kafka's CreatePartitionsRequest.json / CreatePartitionsResponse.json,
versions 0-3 (flexible from 2). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, STRING, Array, Field, Struct


class CreatePartitionsRequest(Request):
    API_KEY = 37
    VERSIONS = "0-3"
    FLEXIBLE = "2+"
    LISTENERS = ("broker", "controller")

    class Topic(Struct):
        class Assignment(Struct):
            FIELDS = (Field("broker_ids", Array(INT32)),)

        FIELDS = (
            Field("name", STRING),
            Field("count", INT32),
            Field("assignments", Array(Assignment), nullable="0+", default=None),
        )

    FIELDS = (
        Field("topics", Array(Topic)),
        Field("timeout_ms", INT32, default=60000),
        Field("validate_only", BOOL, default=False),
    )


class CreatePartitionsResponse(Response):
    API_KEY = 37
    VERSIONS = "0-3"
    FLEXIBLE = "2+"

    class Result(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("error_code", INT16),
            Field("error_message", STRING, nullable="0+", default=None),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Result)),
    )
