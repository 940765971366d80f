"""AllocateProducerIds (API key 67): a broker asking the controller for its next block of
producer ids (KIP-730), which it hands out to idempotent and transactional producers.

Schema facts from Kafka's AllocateProducerIdsRequest.json / AllocateProducerIdsResponse.json:
one version, flexible; served by controllers only. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, Field


class AllocateProducerIdsRequest(Request):
    API_KEY = 67
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("controller",)

    FIELDS = (
        Field("broker_id", INT32),
        Field("broker_epoch", INT64, default=-1),
    )


class AllocateProducerIdsResponse(Response):
    API_KEY = 67
    VERSIONS = "0"
    FLEXIBLE = "0+"

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("producer_id_start", INT64),  # first id of the block, inclusive
        Field("producer_id_len", INT32),
    )
