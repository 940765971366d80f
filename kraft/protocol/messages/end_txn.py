"""EndTxn (API key 26): a transactional producer asking its coordinator to commit or abort the
ongoing transaction (KIP-98).

Schema facts from Kafka's EndTxnRequest.json / EndTxnResponse.json: versions 0-5, flexible
from 3; v2 adds PRODUCER_FENCED, v4 TRANSACTION_ABORTABLE; v5 (KIP-890 part 2, an epoch bump
per transaction) adds the producer id and epoch to the response. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, INT64, STRING, Field


class EndTxnRequest(Request):
    API_KEY = 26
    VERSIONS = "0-5"
    FLEXIBLE = "3+"
    LISTENERS = ("broker",)

    FIELDS = (
        Field("transactional_id", STRING),
        Field("producer_id", INT64),
        Field("producer_epoch", INT16),
        Field("committed", BOOL),  # true: commit, false: abort
    )


class EndTxnResponse(Response):
    API_KEY = 26
    VERSIONS = "0-5"
    FLEXIBLE = "3+"

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id", INT64, "5+", default=-1, ignorable=True),
        Field("producer_epoch", INT16, "5+", default=-1, ignorable=True),
    )
