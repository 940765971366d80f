"""UpdateFeatures (57): Kafka's ``FeatureControlManager.updateFeatures`` as a pure handler.

Each update is checked in Kafka's order: a known upgrade type; a level >= 0; supported by this
controller (:data:`SUPPORTED_FEATURES`), by every registered broker and every registered
controller (a node that does not name the feature supports only level 0); an upgrade type that
fits the direction (raising needs UPGRADE, lowering needs SAFE_DOWNGRADE or UNSAFE_DOWNGRADE);
then ``metadata.version`` rules (a downgrade across a level that changed the metadata format is
refused: unsafe downgrades are not supported, as in Kafka) or the feature's dependencies on
``metadata.version``. The first failure answers the whole request with INVALID_UPDATE_VERSION
and no records; otherwise one ``FeatureLevelRecord`` per update (level 0 removes the feature),
proposed atomically, none when ``validate_only``. Nothing here mutates the image or does I/O.
"""

from __future__ import annotations

from collections import Counter

from kraft.controller.api_error import ApiError
from kraft.controller.result import ControllerContext, ControllerResult
from kraft.errors import ErrorCode
from kraft.metadata.features import METADATA_VERSION
from kraft.metadata.records import FeatureLevelRecord
from kraft.protocol.messages.update_features import (SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE,
                                                     UpdateFeaturesResponse)

#: feature -> (min, max) level this controller supports. metadata.version spans 3.3-IV3 to
#: 4.0-IV3; kraft.version is changed through the Raft layer (KIP-853), not by this request.
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (7, 25),
    "transaction.version": (0, 2),
    "group.version": (0, 1),
    "eligible.leader.replicas.version": (0, 1),
}

#: metadata.version levels whose introduction changed the metadata format (Kafka's
#: ``MetadataVersion.didMetadataChange``): downgrading across one might lose information.
METADATA_CHANGED_AT = frozenset({7, 8, 11, 13, 14, 15, 17, 23})

#: (feature, level) -> the lowest metadata.version it needs (Kafka's feature dependencies).
DEPENDENCIES: dict[tuple[str, int], int] = {("group.version", 1): 22, ("eligible.leader.replicas.version", 1): 23}

_UPGRADE_TYPES = (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE)


def metadata_changed_between(low: int, high: int) -> bool:
    """Kafka's ``checkIfMetadataChanged``: some level in (low, high] changed the format."""
    return any(level in METADATA_CHANGED_AT for level in range(low + 1, high + 1))


def _invalid(feature: str, level: int, why: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature {feature}. {why}")


def _not_supported(level: int, who: str, supported) -> str | None:
    lo, hi = supported
    if lo <= level <= hi:
        return None
    return f"{who} does not support this feature." if hi == 0 else f"{who} only supports versions {lo}-{hi}"


def _reason_not_supported(ctx: ControllerContext, feature: str, level: int) -> str | None:
    reason = _not_supported(level, f"Local controller {ctx.node_id}", SUPPORTED_FEATURES.get(feature, (0, 0)))
    if reason:
        return reason
    cluster = ctx.image.cluster
    for kind, nodes in (("Broker", cluster.brokers), ("Controller", cluster.controllers)):
        for node_id in sorted(nodes):
            if kind == "Controller" and node_id == ctx.node_id:
                continue
            ranges = {f.name: (f.min_version, f.max_version) for f in nodes[node_id].supported_features}
            reason = _not_supported(level, f"{kind} {node_id}", ranges.get(feature, (0, 0)))
            if reason:
                return reason
    return None


def _check_update(ctx: ControllerContext, feature: str, level: int, upgrade_type: int, proposed: dict) -> None:
    finalized = ctx.image.features.finalized_versions
    if upgrade_type not in _UPGRADE_TYPES:
        raise _invalid(feature, level, "The controller does not support the given upgrade type.")
    current = finalized.get(feature, 0)
    if level < 0:
        raise _invalid(feature, level, "A feature version cannot be less than 0.")
    reason = _reason_not_supported(ctx, feature, level)
    if reason:
        raise _invalid(feature, level, reason)
    if level < current and upgrade_type == UPGRADE:
        raise _invalid(feature, level, "Can't downgrade the version of this feature without setting the upgrade "
                                       "type to either safe or unsafe downgrade.")
    if level > current and upgrade_type != UPGRADE:
        raise _invalid(feature, level, "Can't downgrade to a newer version.")
    if feature == METADATA_VERSION:
        if level < current and metadata_changed_between(level, current):
            why = ("Unsafe metadata downgrade is not supported in this version." if upgrade_type == UNSAFE_DOWNGRADE
                   else "Refusing to perform the requested downgrade because it might delete metadata information.")
            raise ApiError(ErrorCode.INVALID_UPDATE_VERSION, f"Invalid metadata.version {level}. {why}")
        return
    needed = DEPENDENCIES.get((feature, level))
    metadata_version = proposed.get(METADATA_VERSION, 0)
    if needed is not None and metadata_version < needed:
        raise _invalid(feature, level, f"{feature} level {level} requires metadata.version at least {needed}, "
                                       f"but it is {metadata_version}.")


def _updates(ctx: ControllerContext, request) -> list[tuple[str, int, int]]:
    """(feature, level, upgrade type) per update; v0's AllowDowngrade becomes SAFE_DOWNGRADE."""
    names = Counter(u.feature for u in request.feature_updates)
    for name, count in names.items():
        if not name:
            raise ApiError(ErrorCode.INVALID_REQUEST, "Feature name can not be empty.")
        if count > 1:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Duplicate feature update for {name}.")
    out = []
    for update in request.feature_updates:
        if ctx.version == 0:
            upgrade_type = SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE
        else:
            upgrade_type = update.upgrade_type
        out.append((update.feature, update.max_version_level, upgrade_type))
    return out


def handle_update_features(ctx: ControllerContext, request) -> ControllerResult:
    records = []
    error = None
    try:
        updates = _updates(ctx, request)
        proposed = dict(ctx.image.features.finalized_versions)
        proposed.update((feature, max(level, 0)) for feature, level, _ in updates)
        for feature, level, upgrade_type in updates:
            _check_update(ctx, feature, level, upgrade_type, proposed)
            records.append(FeatureLevelRecord(name=feature, feature_level=level))
    except ApiError as e:
        error, records = e, []
    code, message = (ErrorCode.NONE, None) if error is None else (error.code, error.message)
    response = UpdateFeaturesResponse(error_code=int(code), error_message=message)
    if ctx.version < 2:  # v0-1 also answer per feature, each with the request's outcome
        response.results = [UpdateFeaturesResponse.Result(feature=u.feature, error_code=int(code),
                                                          error_message=message)
                            for u in request.feature_updates]
    if request.validate_only:
        records = []
    return ControllerResult(records=records, response=response, atomic=bool(records))


HANDLERS = {57: handle_update_features}
