"""DescribeTransactions (API key 65) and ListTransactions (API key 66): the admin view of
transaction coordinators (KIP-664, ``kafka-transactions.sh describe / list``).

Schema facts from Kafka's DescribeTransactions{Request,Response}.json (version 0, flexible) and
ListTransactions{Request,Response}.json (versions 0-2, flexible; v1 adds DurationFilter,
KIP-994; v2 adds TransactionalIdPattern, KIP-1152; the response is the same at every
version). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, STRING, Array, Field, Struct


class DescribeTransactionsRequest(Request):
    API_KEY = 65
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("broker",)

    FIELDS = (
        Field("transactional_ids", Array(STRING)),
    )


class DescribeTransactionsResponse(Response):
    API_KEY = 65
    VERSIONS = "0"
    FLEXIBLE = "0+"

    class TransactionState(Struct):
        class TopicData(Struct):
            FIELDS = (
                Field("topic", STRING),
                Field("partitions", Array(INT32)),
            )

        FIELDS = (
            Field("error_code", INT16),
            Field("transactional_id", STRING),
            Field("transaction_state", STRING),
            Field("transaction_timeout_ms", INT32),
            Field("transaction_start_time_ms", INT64),
            Field("producer_id", INT64),
            Field("producer_epoch", INT16),
            Field("topics", Array(TopicData)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("transaction_states", Array(TransactionState)),
    )


class ListTransactionsRequest(Request):
    API_KEY = 66
    VERSIONS = "0-2"
    FLEXIBLE = "0+"
    LISTENERS = ("broker",)

    FIELDS = (
        Field("state_filters", Array(STRING)),
        Field("producer_id_filters", Array(INT64)),
        Field("duration_filter", INT64, "1+", default=-1),
        Field("transactional_id_pattern", STRING, "2+", nullable="2+", default=None),
    )


class ListTransactionsResponse(Response):
    API_KEY = 66
    VERSIONS = "0-2"
    FLEXIBLE = "0+"

    class TransactionState(Struct):
        FIELDS = (
            Field("transactional_id", STRING),
            Field("producer_id", INT64),
            Field("transaction_state", STRING),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("unknown_state_filters", Array(STRING)),
        Field("transaction_states", Array(TransactionState)),
    )
