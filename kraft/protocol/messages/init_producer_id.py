"""InitProducerId (API key 22): a producer asking for a producer id and epoch (idempotence,
KIP-98; transactions when it names a transactional id; KIP-360 lets it pass its current id
and epoch to have the epoch bumped).

Schema facts from Kafka's InitProducerIdRequest.json / InitProducerIdResponse.json: versions
0-5 (v1 same as v0, v2 flexible, v3 adds ProducerId/ProducerEpoch to the request, v4 and v5
change only error semantics); served by brokers. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, STRING, Field


class InitProducerIdRequest(Request):
    API_KEY = 22
    VERSIONS = "0-5"
    FLEXIBLE = "2+"
    LISTENERS = ("broker",)

    FIELDS = (
        Field("transactional_id", STRING, nullable="0+"),
        Field("transaction_timeout_ms", INT32),
        Field("producer_id", INT64, "3+", default=-1),
        Field("producer_epoch", INT16, "3+", default=-1),
    )


class InitProducerIdResponse(Response):
    API_KEY = 22
    VERSIONS = "0-5"
    FLEXIBLE = "2+"

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id", INT64, default=-1),
        Field("producer_epoch", INT16),
    )
