"""ListOffsets (API key 2): clients looking up the offset for a timestamp (or earliest/latest).

Schema facts from Kafka's ListOffsetsRequest.json / ListOffsetsResponse.json, versions 1-11
(Kafka 4 dropped v0, and with it MaxNumOffsets and OldStyleOffsets, which we therefore leave
out; flexible from 6). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT8, INT16, INT32, INT64, STRING, Array, Field, Struct


class ListOffsetsRequest(Request):
    API_KEY = 2
    VERSIONS = "1-11"
    FLEXIBLE = "6+"
    LISTENERS = ("broker",)

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("current_leader_epoch", INT32, "4+", default=-1, ignorable=True),
                Field("timestamp", INT64),  # -1 latest, -2 earliest, -3 max timestamp, ...
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("replica_id", INT32),  # -1 for consumers; Kafka's schema default is 0
        Field("isolation_level", INT8, "2+"),
        Field("topics", Array(Topic)),
        Field("timeout_ms", INT32, "10+", ignorable=True),
    )


class ListOffsetsResponse(Response):
    API_KEY = 2
    VERSIONS = "1-11"
    FLEXIBLE = "6+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
                Field("timestamp", INT64, "1+", default=-1),
                Field("offset", INT64, "1+", default=-1),
                Field("leader_epoch", INT32, "4+", default=-1),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "2+", ignorable=True),
        Field("topics", Array(Topic)),
    )
