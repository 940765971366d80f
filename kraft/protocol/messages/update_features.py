"""UpdateFeatures (API key 57): raising or lowering finalized feature levels such as
``metadata.version`` (KIP-584, KIP-778); ``kafka-features.sh upgrade/downgrade`` sends it.

Schema facts from Kafka's UpdateFeaturesRequest.json / UpdateFeaturesResponse.json: all versions
flexible; v1 replaces AllowDowngrade with UpgradeType and adds ValidateOnly; v2 answers with the
top-level error only (no per-feature results). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT8, INT16, INT32, STRING, Array, Field, Struct

# FeatureUpdate.UpgradeType
UPGRADE_UNKNOWN, UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 0, 1, 2, 3


class UpdateFeaturesRequest(Request):
    API_KEY = 57
    VERSIONS = "0-2"
    FLEXIBLE = "0+"
    LISTENERS = ("broker", "controller")

    class FeatureUpdate(Struct):
        FIELDS = (
            Field("feature", STRING),
            Field("max_version_level", INT16),  # < 1 asks to remove the feature
            Field("allow_downgrade", BOOL, "0"),
            Field("upgrade_type", INT8, "1+", default=UPGRADE),
        )

    FIELDS = (
        Field("timeout_ms", INT32, default=60000),
        Field("feature_updates", Array(FeatureUpdate)),
        Field("validate_only", BOOL, "1+", default=False),
    )


class UpdateFeaturesResponse(Response):
    API_KEY = 57
    VERSIONS = "0-2"
    FLEXIBLE = "0+"

    class Result(Struct):
        FIELDS = (
            Field("feature", STRING),
            Field("error_code", INT16),
            Field("error_message", STRING, nullable="0+", default=None),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("results", Array(Result), "0-1", ignorable=True),
    )
