"""OffsetForLeaderEpoch (API key 23): the end offset of a leader epoch on the partition leader,
used by consumers to detect log truncation (KIP-320) and by followers.

Schema facts from Kafka's OffsetForLeaderEpochRequest.json / OffsetForLeaderEpochResponse.json,
versions 2-4 (Kafka 4 dropped 0-1; flexible from 4; ReplicaId from 3, default -2). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, STRING, Array, Field, Struct


class OffsetForLeaderEpochRequest(Request):
    API_KEY = 23
    VERSIONS = "2-4"
    FLEXIBLE = "4+"
    LISTENERS = ("broker",)

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition", INT32),
                Field("current_leader_epoch", INT32, "2+", default=-1, ignorable=True),
                Field("leader_epoch", INT32),
            )

        FIELDS = (
            Field("topic", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("replica_id", INT32, "3+", default=-2, ignorable=True),
        Field("topics", Array(Topic)),
    )


class OffsetForLeaderEpochResponse(Response):
    API_KEY = 23
    VERSIONS = "2-4"
    FLEXIBLE = "4+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("error_code", INT16),
                Field("partition", INT32),
                Field("leader_epoch", INT32, "1+", default=-1),
                Field("end_offset", INT64, default=-1),
            )

        FIELDS = (
            Field("topic", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "2+", ignorable=True),
        Field("topics", Array(Topic)),
    )
