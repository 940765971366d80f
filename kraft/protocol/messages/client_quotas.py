"""DescribeClientQuotas (48) and AlterClientQuotas (49): client quotas (KIP-546). Schema facts
from Kafka's {Describe,Alter}ClientQuotas{Request,Response}.json: versions 0-1, flexible from
1. DescribeClientQuotas is served by brokers only (Kafka's listeners: broker); Alter by brokers
(forwarded) and controllers. MatchType: 0 exact name, 1 default entity, 2 any specified name.
Schemas only; the meaning is in ``kraft.controller.client_quotas``."""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, FLOAT64, INT8, INT16, INT32, STRING, Array, Field, Struct

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class EntityData(Struct):
    FIELDS = (
        Field("entity_type", STRING),
        Field("entity_name", STRING, nullable="0+", default=None),  # null: the default entity
    )


class DescribeClientQuotasRequest(Request):
    API_KEY = 48
    VERSIONS = "0-1"
    FLEXIBLE = "1+"
    LISTENERS = ("broker",)

    class Component(Struct):
        FIELDS = (
            Field("entity_type", STRING),
            Field("match_type", INT8),
            Field("match", STRING, nullable="0+", default=None),
        )

    FIELDS = (
        Field("components", Array(Component)),
        Field("strict", BOOL, default=False),
    )


class DescribeClientQuotasResponse(Response):
    API_KEY = 48
    VERSIONS = "0-1"
    FLEXIBLE = "1+"

    class Entry(Struct):
        class Value(Struct):
            FIELDS = (
                Field("key", STRING),
                Field("value", FLOAT64),
            )

        FIELDS = (
            Field("entity", Array(EntityData)),
            Field("values", Array(Value)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, default=0),
        Field("error_code", INT16, default=0),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("entries", Array(Entry), nullable="0+", default=None),
    )


class AlterClientQuotasRequest(Request):
    API_KEY = 49
    VERSIONS = "0-1"
    FLEXIBLE = "1+"
    LISTENERS = ("broker", "controller")

    class Entry(Struct):
        class Op(Struct):
            FIELDS = (
                Field("key", STRING),
                Field("value", FLOAT64, default=0.0),
                Field("remove", BOOL, default=False),
            )

        FIELDS = (
            Field("entity", Array(EntityData)),
            Field("ops", Array(Op)),
        )

    FIELDS = (
        Field("entries", Array(Entry)),
        Field("validate_only", BOOL, default=False),
    )


class AlterClientQuotasResponse(Response):
    API_KEY = 49
    VERSIONS = "0-1"
    FLEXIBLE = "1+"

    class Entry(Struct):
        FIELDS = (
            Field("error_code", INT16, default=0),
            Field("error_message", STRING, nullable="0+", default=None),
            Field("entity", Array(EntityData)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, default=0),
        Field("entries", Array(Entry)),
    )
