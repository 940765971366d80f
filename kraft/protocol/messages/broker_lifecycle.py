"""BrokerRegistration (62) and BrokerHeartbeat (63): a broker registering with the KRaft
controller and keeping its lease alive (KIP-631; LogDirs from KIP-858, PreviousBrokerEpoch from
KIP-966).

Schema facts from Kafka's BrokerRegistration{Request,Response}.json and
BrokerHeartbeat{Request,Response}.json; all versions are flexible. BrokerRegistration v4 has the
same fields as v3 (it only lifts a restriction on feature min versions). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, INT64, STRING, UINT16, UUID, Array, Field, Struct


class BrokerRegistrationRequest(Request):
    API_KEY = 62
    VERSIONS = "0-4"
    FLEXIBLE = "0+"
    LISTENERS = ("controller",)

    class Listener(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("host", STRING),
            Field("port", UINT16),
            Field("security_protocol", INT16),
        )

    class Feature(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("min_supported_version", INT16),
            Field("max_supported_version", INT16),
        )

    FIELDS = (
        Field("broker_id", INT32),
        Field("cluster_id", STRING),
        Field("incarnation_id", UUID),
        Field("listeners", Array(Listener)),
        Field("features", Array(Feature)),
        Field("rack", STRING, nullable="0+"),
        Field("is_migrating_zk_broker", BOOL, "1+", default=False),
        Field("log_dirs", Array(UUID), "2+", ignorable=True),
        Field("previous_broker_epoch", INT64, "3+", default=-1, ignorable=True),
    )


class BrokerRegistrationResponse(Response):
    API_KEY = 62
    VERSIONS = "0-4"
    FLEXIBLE = "0+"

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("broker_epoch", INT64, default=-1),
    )


class BrokerHeartbeatRequest(Request):
    API_KEY = 63
    VERSIONS = "0-1"
    FLEXIBLE = "0+"
    LISTENERS = ("controller",)

    FIELDS = (
        Field("broker_id", INT32),
        Field("broker_epoch", INT64, default=-1),
        Field("current_metadata_offset", INT64),
        Field("want_fence", BOOL),
        Field("want_shut_down", BOOL),
        Field("offline_log_dirs", Array(UUID), "1+", tag=0),
    )


class BrokerHeartbeatResponse(Response):
    API_KEY = 63
    VERSIONS = "0-1"
    FLEXIBLE = "0+"

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("is_caught_up", BOOL, default=False),
        Field("is_fenced", BOOL, default=True),
        Field("should_shut_down", BOOL),
    )


class UnregisterBrokerRequest(Request):
    """UnregisterBroker (64, KIP-631): an operator removes a broker's registration for good."""

    API_KEY = 64
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("broker", "controller")

    FIELDS = (Field("broker_id", INT32),)


class UnregisterBrokerResponse(Response):
    API_KEY = 64
    VERSIONS = "0"
    FLEXIBLE = "0+"

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
    )
