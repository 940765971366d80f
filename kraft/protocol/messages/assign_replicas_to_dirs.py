"""AssignReplicasToDirs (API key 73): a broker tells the controller which of its log
directories holds each of its replicas (KIP-858), so PartitionRecord ``Directories`` says where
every replica lives and a failed directory's partitions can be moved.

Schema facts from Kafka's AssignReplicasToDirs{Request,Response}.json, version 0, flexible.
Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, UUID, Array, Field, Struct


class AssignReplicasToDirsRequest(Request):
    API_KEY = 73
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("controller",)

    class Directory(Struct):
        class Topic(Struct):
            FIELDS = (
                Field("topic_id", UUID),
                Field("partitions", Array(INT32)),
            )

        FIELDS = (
            Field("id", UUID),
            Field("topics", Array(Topic)),
        )

    FIELDS = (
        Field("broker_id", INT32),
        Field("broker_epoch", INT64, default=-1),
        Field("directories", Array(Directory)),
    )


class AssignReplicasToDirsResponse(Response):
    API_KEY = 73
    VERSIONS = "0"
    FLEXIBLE = "0+"

    class Directory(Struct):
        class Topic(Struct):
            class Partition(Struct):
                FIELDS = (
                    Field("partition_index", INT32),
                    Field("error_code", INT16),
                )

            FIELDS = (
                Field("topic_id", UUID),
                Field("partitions", Array(Partition)),
            )

        FIELDS = (
            Field("id", UUID),
            Field("topics", Array(Topic)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("directories", Array(Directory)),
    )
