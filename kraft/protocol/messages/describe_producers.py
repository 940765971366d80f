"""DescribeProducers (API key 61, KIP-664): the producers a partition leader holds state for
(``kafka-transactions.sh describe-producers``, the admin client's ``describeProducers``).

Schema facts from Kafka's DescribeProducersRequest.json / DescribeProducersResponse.json:
version 0 only, flexible. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, STRING, Array, Field, Struct


class DescribeProducersRequest(Request):
    API_KEY = 61
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("broker",)

    class Topic(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("partition_indexes", Array(INT32)),
        )

    FIELDS = (
        Field("topics", Array(Topic)),
    )


class DescribeProducersResponse(Response):
    API_KEY = 61
    VERSIONS = "0"
    FLEXIBLE = "0+"

    class Topic(Struct):
        class Partition(Struct):
            class ProducerState(Struct):
                FIELDS = (
                    Field("producer_id", INT64),
                    Field("producer_epoch", INT32),
                    Field("last_sequence", INT32, default=-1),
                    Field("last_timestamp", INT64, default=-1),
                    Field("coordinator_epoch", INT32),
                    Field("current_txn_start_offset", INT64, default=-1),
                )

            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
                Field("error_message", STRING, nullable="0+", default=None),
                Field("active_producers", Array(ProducerState)),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("topics", Array(Topic)),
    )
