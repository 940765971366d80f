"""Produce (API key 0): clients appending record batches to partition leaders.

Schema facts from Kafka's ProduceRequest.json / ProduceResponse.json, versions 3-13 (Kafka 4
dropped 0-2; flexible from 9; topic ids replace names from 13). ``records`` decode to zero-copy
views of the request. A request with ``acks == 0`` gets no response at all; that rule belongs to
the broker, not here. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, RECORDS, STRING, UUID, Array, Field, Struct


class ProduceRequest(Request):
    API_KEY = 0
    VERSIONS = "3-13"
    FLEXIBLE = "9+"
    LISTENERS = ("broker",)

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("index", INT32),
                Field("records", RECORDS, nullable="0+"),
            )

        FIELDS = (
            Field("name", STRING, "0-12", ignorable=True),
            Field("topic_id", UUID, "13+", ignorable=True),
            Field("partition_data", Array(Partition)),
        )

    FIELDS = (
        Field("transactional_id", STRING, "3+", nullable="3+", default=None),
        Field("acks", INT16),
        Field("timeout_ms", INT32),
        Field("topic_data", Array(Topic)),
    )


class LeaderIdAndEpoch(Struct):
    FIELDS = (
        Field("leader_id", INT32, "10+", default=-1),
        Field("leader_epoch", INT32, "10+", default=-1),
    )


class ProduceResponse(Response):
    API_KEY = 0
    VERSIONS = "3-13"
    FLEXIBLE = "9+"
    LeaderIdAndEpoch = LeaderIdAndEpoch

    class Topic(Struct):
        class Partition(Struct):
            class BatchIndexAndErrorMessage(Struct):
                FIELDS = (
                    Field("batch_index", INT32, "8+"),
                    Field("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
                )

            FIELDS = (
                Field("index", INT32),
                Field("error_code", INT16),
                Field("base_offset", INT64),
                Field("log_append_time_ms", INT64, "2+", default=-1, ignorable=True),
                Field("log_start_offset", INT64, "5+", default=-1, ignorable=True),
                Field("record_errors", Array(BatchIndexAndErrorMessage), "8+", ignorable=True),
                Field("error_message", STRING, "8+", nullable="8+", default=None, ignorable=True),
                Field("current_leader", LeaderIdAndEpoch, "10+", tag=0),
            )

        FIELDS = (
            Field("name", STRING, "0-12", ignorable=True),
            Field("topic_id", UUID, "13+", ignorable=True),
            Field("partition_responses", Array(Partition)),
        )

    class NodeEndpoint(Struct):
        FIELDS = (
            Field("node_id", INT32, "10+"),
            Field("host", STRING, "10+"),
            Field("port", INT32, "10+"),
            Field("rack", STRING, "10+", nullable="10+", default=None),
        )

    FIELDS = (
        Field("responses", Array(Topic)),
        Field("throttle_time_ms", INT32, "1+", default=0, ignorable=True),
        Field("node_endpoints", Array(NodeEndpoint), "10+", tag=0),
    )
