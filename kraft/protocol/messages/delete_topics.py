"""DeleteTopics (API key 20): admin clients deleting topics by name (v1-5) or by name or id (v6).

Schema facts from Kafka's DeleteTopicsRequest.json / DeleteTopicsResponse.json, versions 1-6
(Kafka 4 dropped v0; flexible from 4; topic ids from 6). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, STRING, UUID, Array, Field, Struct


class DeleteTopicsRequest(Request):
    API_KEY = 20
    VERSIONS = "1-6"
    FLEXIBLE = "4+"
    LISTENERS = ("broker", "controller")

    class Topic(Struct):
        FIELDS = (
            Field("name", STRING, "6+", nullable="6+", default=None),
            Field("topic_id", UUID, "6+"),
        )

    FIELDS = (
        Field("topics", Array(Topic), "6+"),
        Field("topic_names", Array(STRING), "0-5"),
        Field("timeout_ms", INT32, default=60000),
    )


class DeleteTopicsResponse(Response):
    API_KEY = 20
    VERSIONS = "1-6"
    FLEXIBLE = "4+"

    class Result(Struct):
        FIELDS = (
            Field("name", STRING, nullable="6+"),
            Field("topic_id", UUID, "6+", ignorable=True),
            Field("error_code", INT16),
            Field("error_message", STRING, "5+", nullable="5+", default=None, ignorable=True),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("responses", Array(Result)),
    )
