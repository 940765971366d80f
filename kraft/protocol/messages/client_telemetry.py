"""GetTelemetrySubscriptions (71) and PushTelemetry (72): KIP-714 client metrics. A client asks
which metrics to push and how often, then pushes them as OpenTelemetry (OTLP) MetricsData,
compressed with one of the accepted codecs.

Schema facts from Kafka's GetTelemetrySubscriptions*.json / PushTelemetry*.json: version 0,
flexible. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, BYTES, INT8, INT16, INT32, STRING, UUID, Array, Field


class GetTelemetrySubscriptionsRequest(Request):
    API_KEY = 71
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("broker",)
    FIELDS = (Field("client_instance_id", UUID),)


class GetTelemetrySubscriptionsResponse(Response):
    API_KEY = 71
    VERSIONS = "0"
    FLEXIBLE = "0+"
    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("client_instance_id", UUID),
        Field("subscription_id", INT32),
        Field("accepted_compression_types", Array(INT8)),
        Field("push_interval_ms", INT32),
        Field("telemetry_max_bytes", INT32),
        Field("delta_temporality", BOOL),
        Field("requested_metrics", Array(STRING)),
    )


class PushTelemetryRequest(Request):
    API_KEY = 72
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("broker",)
    FIELDS = (
        Field("client_instance_id", UUID),
        Field("subscription_id", INT32),
        Field("terminating", BOOL),
        Field("compression_type", INT8),
        Field("metrics", BYTES),
    )


class PushTelemetryResponse(Response):
    API_KEY = 72
    VERSIONS = "0"
    FLEXIBLE = "0+"
    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
    )
