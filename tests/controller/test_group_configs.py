"""GROUP config resources (Kafka 4, KIP-848) on the controller: IncrementalAlterConfigs with
Kafka's GroupConfig checks (names, types, the broker's min/max bounds, session > interval), the
records it writes, and DescribeConfigs of a group (its own values, else the broker's)."""

from __future__ import annotations

import pytest

from admin_fixtures import apply, cluster_image, context
from kraft.controller.configs import handle_describe_configs, handle_incremental_alter_configs
from kraft.errors import ErrorCode
from kraft.metadata.configs import GROUP
from kraft.protocol import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kraft.protocol.messages.configs import OP_DELETE, OP_SET

I, D = IncrementalAlterConfigsRequest, DescribeConfigsRequest


def alter(image, name, ops, settings=None, validate_only=False):
    req = I(resources=[I.Resource(resource_type=GROUP, resource_name=name, configs=[
        I.Resource.Config(name=k, config_operation=op, value=v) for k, op, v in ops])], validate_only=validate_only)
    result = handle_incremental_alter_configs(context(image, 1, settings), req)
    r = result.response.responses[0]
    return result, (r.error_code, r.error_message)


def describe(image, name, settings=None):
    req = D(resources=[D.Resource(resource_type=GROUP, resource_name=name, configuration_keys=None)],
            include_synonyms=True, include_documentation=False)
    return handle_describe_configs(context(image, 4, settings), req).response.results[0]


def test_a_group_that_does_not_exist_yet_takes_its_configs():
    result, error = alter(cluster_image(), "my-group", [("consumer.session.timeout.ms", OP_SET, "50000")])
    assert error == (0, None)
    assert [(r.resource_type, r.resource_name, r.name, r.value) for r in result.records] == [
        (GROUP, "my-group", "consumer.session.timeout.ms", "50000")]
    image = apply(cluster_image(), result.records)
    got = {c.name: (c.value, c.config_source) for c in describe(image, "my-group").configs}
    assert got["consumer.session.timeout.ms"] == ("50000", 8)  # DYNAMIC_GROUP_CONFIG
    assert got["consumer.heartbeat.interval.ms"][0] == "5000"
    assert set(got) == {"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.session.timeout.ms",
                        "share.heartbeat.interval.ms", "share.record.lock.duration.ms"}
    # DELETE goes back to the broker's value
    result, error = alter(image, "my-group", [("consumer.session.timeout.ms", OP_DELETE, None)])
    image = apply(image, result.records)
    assert {c.name: c.value for c in describe(image, "my-group").configs}["consumer.session.timeout.ms"] == "45000"


@pytest.mark.parametrize("ops,code,message", [
    ([("consumer.session.timeout.ms", OP_SET, "30000")], ErrorCode.INVALID_CONFIG,
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ([("consumer.session.timeout.ms", OP_SET, "90000")], ErrorCode.INVALID_CONFIG,
     "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ([("consumer.heartbeat.interval.ms", OP_SET, "16000")], ErrorCode.INVALID_CONFIG,
     "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ([("consumer.heartbeat.interval.ms", OP_SET, "soon")], ErrorCode.INVALID_CONFIG, None),
    ([("retention.ms", OP_SET, "1")], ErrorCode.INVALID_CONFIG, "Unknown group config name: retention.ms"),
])
def test_refusals_are_kafkas_and_write_nothing(ops, code, message):
    result, (got, text) = alter(cluster_image(), "g", ops)
    assert got == code and (message is None or text == message), text
    assert result.records == []


def test_the_bounds_come_from_the_broker_settings_and_session_must_exceed_the_interval():
    settings = {"group.consumer.min.session.timeout.ms": "6000", "group.consumer.min.heartbeat.interval.ms": "1000"}
    _, error = alter(cluster_image(), "g", [("consumer.session.timeout.ms", OP_SET, "6000")], settings)
    assert error == (0, None)
    _, error = alter(cluster_image(), "g", [("consumer.session.timeout.ms", OP_SET, "6000"),
                                            ("consumer.heartbeat.interval.ms", OP_SET, "6000")], settings)
    assert error == (ErrorCode.INVALID_CONFIG,
                     "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")


def test_the_default_group_resource_is_refused():
    _, error = alter(cluster_image(), "", [("consumer.session.timeout.ms", OP_SET, "50000")])
    assert error == (ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    assert describe(cluster_image(), "").error_code == ErrorCode.INVALID_REQUEST


def test_validate_only_writes_nothing():
    result, error = alter(cluster_image(), "g", [("consumer.session.timeout.ms", OP_SET, "50000")],
                          validate_only=True)
    assert error == (0, None) and result.records == []
