"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): moving partition
replicas between brokers and listing the moves in progress (KIP-455;
``kafka-reassign-partitions.sh``).

Schema facts from Kafka's {Alter,List}PartitionReassignments{Request,Response}.json: all
versions flexible; AlterPartitionReassignments v1 (Kafka 4.1, KIP-860) adds
AllowReplicationFactorChange. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, STRING, Array, Field, Struct


class AlterPartitionReassignmentsRequest(Request):
    API_KEY = 45
    VERSIONS = "0-1"
    FLEXIBLE = "0+"
    LISTENERS = ("broker", "controller")

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                # null cancels the pending reassignment of this partition
                Field("replicas", Array(INT32), nullable="0+", default=None),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("timeout_ms", INT32, default=60000),
        Field("allow_replication_factor_change", BOOL, "1+", default=True),
        Field("topics", Array(Topic)),
    )


class AlterPartitionReassignmentsResponse(Response):
    API_KEY = 45
    VERSIONS = "0-1"
    FLEXIBLE = "0+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
                Field("error_message", STRING, nullable="0+", default=None),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("allow_replication_factor_change", BOOL, "1+", default=True, ignorable=True),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("responses", Array(Topic)),
    )


class ListPartitionReassignmentsRequest(Request):
    API_KEY = 46
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("broker", "controller")

    class Topic(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("partition_indexes", Array(INT32)),
        )

    FIELDS = (
        Field("timeout_ms", INT32, default=60000),
        Field("topics", Array(Topic), nullable="0+", default=None),  # null: every reassignment
    )


class ListPartitionReassignmentsResponse(Response):
    API_KEY = 46
    VERSIONS = "0"
    FLEXIBLE = "0+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("replicas", Array(INT32)),
                Field("adding_replicas", Array(INT32)),
                Field("removing_replicas", Array(INT32)),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("topics", Array(Topic)),
    )
