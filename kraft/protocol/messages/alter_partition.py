"""AlterPartition (API key 56): a partition leader asking the controller to change the ISR
(KIP-497; leader recovery state KIP-704; topic ids KIP-841; broker epochs in the ISR KIP-903).

Schema facts from Kafka's AlterPartitionRequest.json / AlterPartitionResponse.json: versions
0-3, all flexible, served by controllers only; topics are named up to v1 and identified by id
from v2; v3 replaces NewIsr with NewIsrWithEpochs. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT8, INT16, INT32, INT64, STRING, UUID, Array, Field, Struct


class AlterPartitionRequest(Request):
    API_KEY = 56
    VERSIONS = "0-3"
    FLEXIBLE = "0+"
    LISTENERS = ("controller",)

    class Topic(Struct):
        class Partition(Struct):
            class BrokerState(Struct):
                FIELDS = (
                    Field("broker_id", INT32, "3+"),
                    Field("broker_epoch", INT64, "3+", default=-1),  # -1: epoch check unsupported
                )

            FIELDS = (
                Field("partition_index", INT32),
                Field("leader_epoch", INT32),
                Field("new_isr", Array(INT32), "0-2"),
                Field("new_isr_with_epochs", Array(BrokerState), "3+"),
                Field("leader_recovery_state", INT8, "1+", default=0),
                Field("partition_epoch", INT32),
            )

        FIELDS = (
            Field("topic_name", STRING, "0-1", ignorable=True),
            Field("topic_id", UUID, "2+", ignorable=True),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("broker_id", INT32),
        Field("broker_epoch", INT64, default=-1),
        Field("topics", Array(Topic)),
    )


class AlterPartitionResponse(Response):
    API_KEY = 56
    VERSIONS = "0-3"
    FLEXIBLE = "0+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
                Field("leader_id", INT32),
                Field("leader_epoch", INT32),
                Field("isr", Array(INT32)),
                Field("leader_recovery_state", INT8, "1+", default=0, ignorable=True),
                Field("partition_epoch", INT32),
            )

        FIELDS = (
            Field("topic_name", STRING, "0-1", ignorable=True),
            Field("topic_id", UUID, "2+", ignorable=True),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("topics", Array(Topic)),
    )
