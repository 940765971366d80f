"""ApiVersions (API key 18): how clients learn which versions of each API a node speaks.

Schema facts from Kafka's ApiVersionsRequest.json / ApiVersionsResponse.json (v3 is the first
flexible version). Two rules live elsewhere: the response header is always v0
(``headers.py``), and a request at an unsupported version is answered at v0 with
UNSUPPORTED_VERSION (``framing.py`` / ``api_table.py``). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, Struct


class ApiVersionsRequest(Request):
    API_KEY = 18
    VERSIONS = "0-4"
    FLEXIBLE = "3+"

    FIELDS = (
        Field("client_software_name", STRING, "3+", ignorable=True),
        Field("client_software_version", STRING, "3+", ignorable=True),
    )


class ApiVersionsResponse(Response):
    API_KEY = 18
    VERSIONS = "0-4"
    FLEXIBLE = "3+"

    class ApiVersion(Struct):
        FIELDS = (
            Field("api_key", INT16),
            Field("min_version", INT16),
            Field("max_version", INT16),
        )

    class SupportedFeatureKey(Struct):
        FIELDS = (
            Field("name", STRING, "3+"),
            Field("min_version", INT16, "3+"),
            Field("max_version", INT16, "3+"),
        )

    class FinalizedFeatureKey(Struct):
        FIELDS = (
            Field("name", STRING, "3+"),
            Field("max_version_level", INT16, "3+"),
            Field("min_version_level", INT16, "3+"),
        )

    FIELDS = (
        Field("error_code", INT16),
        Field("api_keys", Array(ApiVersion)),
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("supported_features", Array(SupportedFeatureKey), "3+", tag=0, ignorable=True),
        Field("finalized_features_epoch", INT64, "3+", tag=1, default=-1, ignorable=True),
        Field("finalized_features", Array(FinalizedFeatureKey), "3+", tag=2, ignorable=True),
        Field("zk_migration_ready", BOOL, "3+", tag=3, default=False, ignorable=True),
    )
