"""AlterReplicaLogDirs (API key 34): move replicas of a broker to other log directories of the
same broker (``kafka-reassign-partitions.sh`` with ``log_dirs``, KIP-113).

Schema facts from Kafka's AlterReplicaLogDirs{Request,Response}.json: versions 1-2 (Kafka 4
dropped v0, which v1 equals), flexible from 2. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, STRING, Array, Field, Struct


class AlterReplicaLogDirsRequest(Request):
    API_KEY = 34
    VERSIONS = "1-2"
    FLEXIBLE = "2+"
    LISTENERS = ("broker",)

    class Dir(Struct):
        class Topic(Struct):
            FIELDS = (
                Field("name", STRING),
                Field("partitions", Array(INT32)),
            )

        FIELDS = (
            Field("path", STRING),
            Field("topics", Array(Topic)),
        )

    FIELDS = (Field("dirs", Array(Dir)),)


class AlterReplicaLogDirsResponse(Response):
    API_KEY = 34
    VERSIONS = "1-2"
    FLEXIBLE = "2+"

    class Result(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
            )

        FIELDS = (
            Field("topic_name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Result)),
    )
