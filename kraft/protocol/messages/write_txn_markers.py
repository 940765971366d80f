"""WriteTxnMarkers (API key 27): the transaction coordinator asking partition leaders to
append COMMIT or ABORT control markers for a producer's transaction (KIP-98). Broker to
broker; a client never sends it.

Schema facts from Kafka's WriteTxnMarkersRequest.json / WriteTxnMarkersResponse.json:
versions 0-1, flexible from 1. ``transaction_result`` false = ABORT, true = COMMIT.
Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, Struct


class WriteTxnMarkersRequest(Request):
    API_KEY = 27
    VERSIONS = "0-1"
    FLEXIBLE = "1+"
    LISTENERS = ("broker",)

    class Marker(Struct):
        class Topic(Struct):
            FIELDS = (
                Field("name", STRING),
                Field("partition_indexes", Array(INT32)),
            )

        FIELDS = (
            Field("producer_id", INT64),
            Field("producer_epoch", INT16),
            Field("transaction_result", BOOL),
            Field("topics", Array(Topic)),
            Field("coordinator_epoch", INT32),
        )

    FIELDS = (
        Field("markers", Array(Marker)),
    )


class WriteTxnMarkersResponse(Response):
    API_KEY = 27
    VERSIONS = "0-1"
    FLEXIBLE = "1+"

    class Marker(Struct):
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
            Field("producer_id", INT64),
            Field("topics", Array(Topic)),
        )

    FIELDS = (
        Field("markers", Array(Marker)),
    )
