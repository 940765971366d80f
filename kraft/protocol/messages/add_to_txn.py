"""AddPartitionsToTxn (API key 24) and AddOffsetsToTxn (API key 25): a transactional producer
telling its transaction coordinator which partitions (or which group's offsets) the ongoing
transaction writes to, before it writes there (KIP-98).

Schema facts from Kafka's AddPartitionsToTxnRequest/Response.json and
AddOffsetsToTxnRequest/Response.json. AddPartitionsToTxn: versions 0-5, flexible from 3;
v0-3 carry one transaction (the client form, ``v3_and_below_*`` fields), v4+ carry a batch of
transactions with ``verify_only`` (the broker-verification form of KIP-890) and a top-level
error code in the response; v5 only adds TRANSACTION_ABORTABLE. AddOffsetsToTxn: versions 0-4,
flexible from 3. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, Struct


class AddPartitionsToTxnTopic(Struct):
    FIELDS = (
        Field("name", STRING),
        Field("partitions", Array(INT32)),
    )


class AddPartitionsToTxnPartitionResult(Struct):
    FIELDS = (
        Field("partition_index", INT32),
        Field("partition_error_code", INT16),
    )


class AddPartitionsToTxnTopicResult(Struct):
    FIELDS = (
        Field("name", STRING),
        Field("results_by_partition", Array(AddPartitionsToTxnPartitionResult)),
    )


class AddPartitionsToTxnRequest(Request):
    API_KEY = 24
    VERSIONS = "0-5"
    FLEXIBLE = "3+"
    LISTENERS = ("broker",)

    class Transaction(Struct):
        FIELDS = (
            Field("transactional_id", STRING, "4+"),
            Field("producer_id", INT64, "4+"),
            Field("producer_epoch", INT16, "4+"),
            Field("verify_only", BOOL, "4+", default=False),
            Field("topics", Array(AddPartitionsToTxnTopic), "4+"),
        )

    FIELDS = (
        Field("transactions", Array(Transaction), "4+"),
        Field("v3_and_below_transactional_id", STRING, "0-3"),
        Field("v3_and_below_producer_id", INT64, "0-3"),
        Field("v3_and_below_producer_epoch", INT16, "0-3"),
        Field("v3_and_below_topics", Array(AddPartitionsToTxnTopic), "0-3"),
    )


class AddPartitionsToTxnResponse(Response):
    API_KEY = 24
    VERSIONS = "0-5"
    FLEXIBLE = "3+"

    class Result(Struct):
        FIELDS = (
            Field("transactional_id", STRING, "4+"),
            Field("topic_results", Array(AddPartitionsToTxnTopicResult), "4+"),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "4+", ignorable=True),
        Field("results_by_transaction", Array(Result), "4+"),
        Field("results_by_topic_v3_and_below", Array(AddPartitionsToTxnTopicResult), "0-3"),
    )


class AddOffsetsToTxnRequest(Request):
    API_KEY = 25
    VERSIONS = "0-4"
    FLEXIBLE = "3+"
    LISTENERS = ("broker",)

    FIELDS = (
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("group_id", STRING),
    )


class AddOffsetsToTxnResponse(Response):
    API_KEY = 25
    VERSIONS = "0-4"
    FLEXIBLE = "3+"

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
    )
