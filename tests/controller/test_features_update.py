"""UpdateFeatures on the controller (Kafka's ``FeatureControlManager``): levels checked against
what this controller and every registered node supports, upgrade/downgrade types, and the
metadata.version downgrade rule; the records replayed give the finalized levels asked for."""

from __future__ import annotations

import pytest

from kraft.controller.features import HANDLERS, handle_update_features, metadata_changed_between
from kraft.errors import ErrorCode
from kraft.metadata import EMPTY_IMAGE, FeatureLevelRecord
from kraft.protocol import UpdateFeaturesRequest, UpdateFeaturesResponse
from kraft.protocol.messages.update_features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, UPGRADE_UNKNOWN
from admin_fixtures import apply, broker, cluster_image, context

ALL_FEATURES = (("metadata.version", 7, 25), ("group.version", 0, 1), ("transaction.version", 0, 2),
                ("eligible.leader.replicas.version", 0, 1))


def image_with(metadata_version=21, broker_features=ALL_FEATURES, extra=()):
    image = apply(EMPTY_IMAGE, [FeatureLevelRecord(name="metadata.version", feature_level=metadata_version),
                                broker(1, features=broker_features), broker(2, features=broker_features)])
    return apply(image, list(extra))


def update(image, *updates, version=2, validate_only=False):
    request = UpdateFeaturesRequest(validate_only=validate_only, feature_updates=[
        UpdateFeaturesRequest.FeatureUpdate(feature=f, max_version_level=level, upgrade_type=kind,
                                            allow_downgrade=kind != UPGRADE) for f, level, kind in updates])
    return handle_update_features(context(image, version), request)


def test_handlers_table():
    assert set(HANDLERS) == {57}


def test_upgrade_metadata_version_and_a_feature_together():
    image = image_with(21)
    result = update(image, ("metadata.version", 23, UPGRADE), ("eligible.leader.replicas.version", 1, UPGRADE))
    assert result.response.error_code == 0 and result.atomic
    after = apply(image, result.records)
    assert after.features.finalized_versions == {"metadata.version": 23, "eligible.leader.replicas.version": 1}


def test_a_feature_needing_a_newer_metadata_version_is_refused():
    result = update(image_with(21), ("eligible.leader.replicas.version", 1, UPGRADE))
    assert result.response.error_code == ErrorCode.INVALID_UPDATE_VERSION and result.records == []
    assert "requires metadata.version at least 23" in result.response.error_message


def test_safe_downgrade_to_zero_removes_the_feature():
    image = image_with(22, extra=[FeatureLevelRecord(name="group.version", feature_level=1)])
    result = update(image, ("group.version", 0, SAFE_DOWNGRADE))
    assert result.response.error_code == 0
    assert apply(image, result.records).features.finalized_versions == {"metadata.version": 22}


@pytest.mark.parametrize("updates,message", [
    ([("group.version", 0, UPGRADE)], "Can't downgrade the version of this feature without setting the upgrade type"),
    ([("transaction.version", 1, SAFE_DOWNGRADE)], "Can't downgrade to a newer version."),
    ([("transaction.version", 1, UPGRADE_UNKNOWN)], "The controller does not support the given upgrade type."),
    ([("transaction.version", -1, SAFE_DOWNGRADE)], "A feature version cannot be less than 0."),
    ([("transaction.version", 3, UPGRADE)], "Local controller 3000 only supports versions 0-2"),
    ([("no.such.feature", 1, UPGRADE)], "Local controller 3000 does not support this feature."),
    ([("kraft.version", 1, UPGRADE)], "Local controller 3000 does not support this feature."),
    ([("metadata.version", 26, UPGRADE)], "Local controller 3000 only supports versions 7-25"),
    ([("metadata.version", 0, SAFE_DOWNGRADE)], "Local controller 3000 only supports versions 7-25"),
])
def test_refused_updates_are_invalid_update_version(updates, message):
    image = image_with(22, extra=[FeatureLevelRecord(name="group.version", feature_level=1)])
    result = update(image, *updates)
    assert result.response.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert message in result.response.error_message
    assert result.records == []


def test_one_bad_update_sinks_the_whole_request():
    result = update(image_with(22), ("transaction.version", 2, UPGRADE), ("group.version", 5, UPGRADE))
    assert result.response.error_code == ErrorCode.INVALID_UPDATE_VERSION and result.records == []


def test_every_registered_broker_must_support_the_level():
    image = apply(image_with(21), [broker(3, features=(("metadata.version", 7, 21),))])
    result = update(image, ("metadata.version", 22, UPGRADE))
    assert result.response.error_message.endswith("Broker 3 only supports versions 7-21")
    result = update(image, ("group.version", 1, UPGRADE))
    assert "Broker 3 does not support this feature." in result.response.error_message


def test_metadata_version_downgrade_rules():
    # 22 -> 21 crosses no format change: allowed as a safe downgrade
    image = image_with(22)
    result = update(image, ("metadata.version", 21, SAFE_DOWNGRADE))
    assert result.response.error_code == 0
    assert apply(image, result.records).features.metadata_version == 21
    # 17 -> 16 crosses 3.7-IV2 (a format change): refused either way
    image = image_with(17)
    safe = update(image, ("metadata.version", 16, SAFE_DOWNGRADE)).response
    unsafe = update(image, ("metadata.version", 16, UNSAFE_DOWNGRADE)).response
    assert safe.error_code == unsafe.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert "might delete metadata information" in safe.error_message
    assert "Unsafe metadata downgrade is not supported" in unsafe.error_message


def test_metadata_changed_between_follows_kafkas_table():
    assert not metadata_changed_between(18, 22)
    assert metadata_changed_between(16, 17) and metadata_changed_between(7, 9)
    assert not metadata_changed_between(8, 10)


def test_validate_only_and_request_shape_errors():
    image = image_with(21)
    result = update(image, ("metadata.version", 22, UPGRADE), validate_only=True)
    assert result.response.error_code == 0 and result.records == []
    result = update(image, ("group.version", 1, UPGRADE), ("group.version", 0, SAFE_DOWNGRADE))
    assert result.response.error_code == ErrorCode.INVALID_REQUEST
    result = update(image, ("", 1, UPGRADE))
    assert result.response.error_code == ErrorCode.INVALID_REQUEST


def test_version_0_allow_downgrade_and_per_feature_results():
    image = image_with(22, extra=[FeatureLevelRecord(name="group.version", feature_level=1)])
    result = update(image, ("group.version", 0, SAFE_DOWNGRADE), version=0)  # allow_downgrade=True
    assert result.response.error_code == 0
    assert [(r.feature, r.error_code) for r in result.response.results] == [("group.version", 0)]
    refused = update(image, ("group.version", 0, UPGRADE), version=1)
    assert [r.error_code for r in refused.response.results] == [ErrorCode.INVALID_UPDATE_VERSION]
    assert update(image, ("group.version", 0, UPGRADE), version=2).response.results == []


@pytest.mark.parametrize("version", [0, 1, 2])
def test_response_encodes_and_kafka_python_reads_it(version):
    response = update(cluster_image(), ("metadata.version", 99, UPGRADE), version=version).response
    assert UpdateFeaturesResponse.decode(response.encode(version), version) == response
    cluster = pytest.importorskip("kafka.protocol.admin.cluster", reason="kafka-python is not installed")
    theirs = cluster.UpdateFeaturesResponse.decode(response.encode(version), version=version)
    assert theirs.error_code == ErrorCode.INVALID_UPDATE_VERSION
