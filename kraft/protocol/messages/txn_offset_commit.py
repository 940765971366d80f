"""TxnOffsetCommit (API key 28): a transactional producer committing a group's offsets as part
of its transaction (KIP-98, ``send_offsets_to_transaction``); sent to the group coordinator,
the offsets become visible when the transaction's COMMIT marker lands on the group's
``__consumer_offsets`` partition.

Schema facts from Kafka's TxnOffsetCommitRequest.json / TxnOffsetCommitResponse.json: versions
0-5, flexible from 3; v2 adds the committed leader epoch, v3 the member id, group instance id
and generation; v4 (TRANSACTION_ABORTABLE) and v5 (KIP-890 part 2) change no field.
Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, STRING, Array, Field, Struct


class TxnOffsetCommitRequest(Request):
    API_KEY = 28
    VERSIONS = "0-5"
    FLEXIBLE = "3+"
    LISTENERS = ("broker",)

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("committed_offset", INT64),
                Field("committed_leader_epoch", INT32, "2+", default=-1, ignorable=True),
                Field("committed_metadata", STRING, nullable="0+"),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("transactional_id", STRING),
        Field("group_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("generation_id", INT32, "3+", default=-1),
        Field("member_id", STRING, "3+", default=""),
        Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
        Field("topics", Array(Topic)),
    )


class TxnOffsetCommitResponse(Response):
    API_KEY = 28
    VERSIONS = "0-5"
    FLEXIBLE = "3+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("topics", Array(Topic)),
    )
