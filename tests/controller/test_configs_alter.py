"""IncrementalAlterConfigs and AlterConfigs on the controller (Kafka's
``ConfigurationControlManager``): the records each request yields, replayed, give the configs it
asked for; refusals carry Kafka's error codes and leave no records."""

from __future__ import annotations

import pytest

from kraft.controller.configs import HANDLERS, handle_alter_configs, handle_incremental_alter_configs
from kraft.errors import ErrorCode
from kraft.metadata import ConfigRecord
from kraft.metadata.configs import BROKER, TOPIC
from kraft.protocol import (AlterConfigsRequest, AlterConfigsResponse, IncrementalAlterConfigsRequest,
                            IncrementalAlterConfigsResponse)
from kraft.protocol.messages.configs import OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT
from admin_fixtures import NODE_ID, apply, cluster_image, context

IAC = IncrementalAlterConfigsRequest


def iac(resources, validate_only=False):
    return IAC(validate_only=validate_only, resources=[
        IAC.Resource(resource_type=kind, resource_name=name, configs=[
            IAC.Resource.Config(name=k, config_operation=op, value=v) for k, op, v in ops])
        for kind, name, ops in resources])


def run_iac(image, resources, validate_only=False, version=1):
    result = handle_incremental_alter_configs(context(image, version), iac(resources, validate_only))
    return result, [(r.error_code, r.error_message) for r in result.response.responses]


def test_handlers_table_names_the_three_config_apis():
    assert set(HANDLERS) == {32, 33, 44}


def test_set_then_replay_gives_the_topic_override():
    image = cluster_image()
    result, errors = run_iac(image, [(TOPIC, "foo", [("retention.ms", OP_SET, "1000"),
                                                     ("cleanup.policy", OP_SET, "compact")])])
    assert errors == [(0, None)]
    assert result.atomic and len(result.records) == 2
    assert apply(image, result.records).configs.config(TOPIC, "foo") == {"retention.ms": "1000",
                                                                         "cleanup.policy": "compact"}


def test_delete_removes_the_key_and_a_missing_key_writes_nothing():
    image = apply(cluster_image(), [ConfigRecord(resource_type=TOPIC, resource_name="foo", name="retention.ms",
                                                 value="1000")])
    result, errors = run_iac(image, [(TOPIC, "foo", [("retention.ms", OP_DELETE, None),
                                                     ("segment.ms", OP_DELETE, None)])])
    assert errors == [(0, None)]
    assert result.records == [ConfigRecord(resource_type=TOPIC, resource_name="foo", name="retention.ms", value=None)]
    assert apply(image, result.records).configs.config(TOPIC, "foo") == {}


def test_setting_the_same_value_writes_no_record_for_topics_but_does_for_brokers():
    image = apply(cluster_image(), [
        ConfigRecord(resource_type=TOPIC, resource_name="foo", name="retention.ms", value="1000"),
        ConfigRecord(resource_type=BROKER, resource_name="", name="log.retention.ms", value="5000")])
    result, errors = run_iac(image, [(TOPIC, "foo", [("retention.ms", OP_SET, "1000")]),
                                     (BROKER, "", [("log.retention.ms", OP_SET, "5000")])])
    assert errors == [(0, None), (0, None)]
    assert [(r.resource_type, r.name) for r in result.records] == [(BROKER, "log.retention.ms")]


def test_append_starts_from_the_default_and_skips_present_items():
    image = cluster_image()
    result, _ = run_iac(image, [(TOPIC, "foo", [("cleanup.policy", OP_APPEND, "compact,delete")])])
    # default "delete" + compact; delete is already present
    assert apply(image, result.records).configs.config(TOPIC, "foo") == {"cleanup.policy": "delete,compact"}


def test_subtract_removes_items_and_may_leave_an_empty_list():
    image = apply(cluster_image(), [ConfigRecord(resource_type=TOPIC, resource_name="foo", name="cleanup.policy",
                                                 value="compact,delete")])
    result, _ = run_iac(image, [(TOPIC, "foo", [("cleanup.policy", OP_SUBTRACT, "delete")])])
    assert apply(image, result.records).configs.config(TOPIC, "foo") == {"cleanup.policy": "compact"}
    result, _ = run_iac(image, [(TOPIC, "foo", [("cleanup.policy", OP_SUBTRACT, "compact,delete")])])
    assert apply(image, result.records).configs.config(TOPIC, "foo") == {"cleanup.policy": ""}


def test_append_to_a_non_list_config_is_invalid_config():
    _, errors = run_iac(cluster_image(), [(TOPIC, "foo", [("retention.ms", OP_APPEND, "5")])])
    assert errors == [(ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")]


@pytest.mark.parametrize("key,value,reason", [
    ("retention.ms", "abc", "Not a number of type LONG"),
    ("retention.ms", "-2", "Value must be at least -1"),
    ("min.insync.replicas", "0", "Value must be at least 1"),
    ("cleanup.policy", "compact,shred", "String must be one of: compact, delete"),
    ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("unclean.leader.election.enable", "yes", "Expected value to be either true or false"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
    ("max.message.bytes", "99999999999", "Not a number of type INT"),
])
def test_invalid_values_are_invalid_config_with_kafkas_wording(key, value, reason):
    image = cluster_image()
    result, errors = run_iac(image, [(TOPIC, "foo", [(key, OP_SET, value)])])
    assert errors == [(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {key}: {reason}")]
    assert result.records == []


def test_unknown_topic_config_is_invalid_config():
    _, errors = run_iac(cluster_image(), [(TOPIC, "foo", [("retention.weeks", OP_SET, "1")])])
    assert errors == [(ErrorCode.INVALID_CONFIG, "Unknown topic config name: retention.weeks")]


def test_conflicting_compaction_lags_are_invalid_config():
    image = apply(cluster_image(), [ConfigRecord(resource_type=TOPIC, resource_name="foo",
                                                 name="max.compaction.lag.ms", value="100")])
    _, errors = run_iac(image, [(TOPIC, "foo", [("min.compaction.lag.ms", OP_SET, "200")])])
    assert errors[0][0] == ErrorCode.INVALID_CONFIG and "min.compaction.lag.ms (200)" in errors[0][1]


def test_unknown_topic_is_unknown_topic_or_partition_after_validation():
    _, errors = run_iac(cluster_image(), [(TOPIC, "nope", [("retention.ms", OP_SET, "1")])])
    assert errors == [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")]
    # an invalid value is reported before existence, as Kafka validates first
    _, errors = run_iac(cluster_image(), [(TOPIC, "nope", [("retention.ms", OP_SET, "x")])])
    assert errors[0][0] == ErrorCode.INVALID_CONFIG


@pytest.mark.parametrize("name,code", [("", ErrorCode.INVALID_REQUEST), ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
                                       ("..", ErrorCode.INVALID_TOPIC_EXCEPTION)])
def test_bad_topic_resource_names(name, code):
    _, errors = run_iac(cluster_image(), [(TOPIC, name, [("retention.ms", OP_SET, "1")])])
    assert errors[0][0] == code


def test_request_shape_errors_are_invalid_request():
    image = cluster_image()
    _, errors = run_iac(image, [(TOPIC, "foo", [("retention.ms", OP_SET, "1"), ("retention.ms", OP_DELETE, None)])])
    assert errors == [(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")]
    _, errors = run_iac(image, [(TOPIC, "foo", [("retention.ms", OP_SET, None)])])
    assert errors[0][0] == ErrorCode.INVALID_REQUEST
    _, errors = run_iac(image, [(TOPIC, "foo", [("retention.ms", 9, "1")])])
    assert errors[0][0] == ErrorCode.INVALID_REQUEST
    _, errors = run_iac(image, [(TOPIC, "foo", [("retention.ms", OP_SET, "1")]),
                                (TOPIC, "foo", [("segment.ms", OP_SET, "1000")])])
    assert [e[0] for e in errors] == [ErrorCode.INVALID_REQUEST] * 2
    _, errors = run_iac(image, [(99, "x", [("a", OP_SET, "1")])])
    assert errors[0][0] == ErrorCode.INVALID_REQUEST


def test_one_bad_resource_does_not_stop_the_others():
    image = cluster_image()
    result, errors = run_iac(image, [(TOPIC, "foo", [("retention.ms", OP_SET, "bad")]),
                                     (TOPIC, "bar", [("retention.ms", OP_SET, "42")])])
    assert [e[0] for e in errors] == [ErrorCode.INVALID_CONFIG, 0]
    after = apply(image, result.records)
    assert after.configs.config(TOPIC, "foo") == {} and after.configs.config(TOPIC, "bar") == {"retention.ms": "42"}


def test_validate_only_checks_everything_and_writes_nothing():
    image = cluster_image()
    result, errors = run_iac(image, [(TOPIC, "foo", [("retention.ms", OP_SET, "1")]),
                                     (TOPIC, "bar", [("retention.ms", OP_SET, "x")])], validate_only=True)
    assert [e[0] for e in errors] == [0, ErrorCode.INVALID_CONFIG]
    assert result.records == []


def test_broker_configs_cluster_default_and_per_broker():
    image = cluster_image()
    result, errors = run_iac(image, [(BROKER, "", [("log.retention.ms", OP_SET, "86400000")]),
                                     (BROKER, "2", [("message.max.bytes", OP_SET, "2000000"),
                                                    ("max.connections.per.ip", OP_SET, "50")])])
    assert errors == [(0, None), (0, None)]
    after = apply(image, result.records)
    assert after.configs.config(BROKER, "") == {"log.retention.ms": "86400000"}
    assert after.configs.config(BROKER, "2") == {"message.max.bytes": "2000000", "max.connections.per.ip": "50"}


def test_replication_throttles_are_accepted_for_topics_brokers_and_the_cluster_default():
    image = cluster_image()
    _, errors = run_iac(image, [(BROKER, "", [("leader.replication.throttled.rate", OP_SET, "1048576")]),
                                (BROKER, "2", [("follower.replication.throttled.rate", OP_SET, "2097152")])])
    assert errors == [(0, None), (0, None)]
    _, errors = run_iac(image, [(BROKER, "", [("leader.replication.throttled.rate", OP_SET, "-1")])])
    assert errors[0][0] == ErrorCode.INVALID_REQUEST


def test_a_listeners_keystore_may_change_per_broker():
    image = cluster_image()
    result, errors = run_iac(image, [(BROKER, "2", [("listener.name.ssl.ssl.keystore.location", OP_SET, "/k2.p12"),
                                                    ("listener.name.ssl.ssl.keystore.password", OP_SET, "pw")])])
    assert errors == [(0, None)]
    assert apply(image, result.records).configs.config(BROKER, "2") == {
        "listener.name.ssl.ssl.keystore.location": "/k2.p12", "listener.name.ssl.ssl.keystore.password": "pw"}


def test_broker_config_errors():
    image = cluster_image()
    _, errors = run_iac(image, [(BROKER, "7", [("message.max.bytes", OP_SET, "4096")])])
    assert errors == [(ErrorCode.BROKER_ID_NOT_REGISTERED, "No broker with id 7 found.")]
    _, errors = run_iac(image, [(BROKER, str(NODE_ID), [("message.max.bytes", OP_SET, "4096")])])
    assert errors == [(0, None)]  # the controller itself may be configured
    _, errors = run_iac(image, [(BROKER, "one", [("message.max.bytes", OP_SET, "4")])])
    assert errors[0][0] == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("resource,key,value,code,message", [
    # What Kafka's broker answers (DynamicBrokerConfig.validateConfigs, INVALID_REQUEST: KAFKA-13609).
    ("", "log.dirs", "/tmp", ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)"),
    ("2", "broker.id", "5", ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(broker.id)"),
    ("", "log.retention.hours", "24", ErrorCode.INVALID_REQUEST,
     "Cannot update these configs dynamically: Set(log.retention.hours)"),
    ("", "message.max.bytes", "lots", ErrorCode.INVALID_REQUEST,
     "Invalid value lots for configuration message.max.bytes: Not a number of type INT"),
    ("", "log.segment.bytes", "1000", ErrorCode.INVALID_REQUEST,
     "Invalid value 1000 for configuration log.segment.bytes: Value must be at least 1048576"),
    ("", "ssl.keystore.location", "/x", ErrorCode.INVALID_REQUEST, "These security configs can be dynamically "
     "updated only per-listener using the listener prefix: Set(ssl.keystore.location)"),
    ("", "listener.name.plaintext.ssl.protocol", "TLSv1.3", ErrorCode.INVALID_REQUEST,
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(listener.name.plaintext.ssl.protocol)"),
    # What kraft cannot honour (INVALID_CONFIG with the reason).
    ("", "num.io.threads", "16", ErrorCode.INVALID_CONFIG, "Configuration num.io.threads is not supported by kraft: "
     "kraft serves requests on one event loop; its worker counts are fixed at start-up"),
    ("2", "listener.name.plaintext.max.connections", "5", ErrorCode.INVALID_CONFIG,
     "Configuration listener.name.plaintext.max.connections is not supported by kraft: kraft reads "
     "per-listener ssl.* settings from server.properties at start; at run time it updates only a listener's "
     "keystore (listener.name.<listener>.ssl.keystore.*, per broker)"),
    ("", "listener.name.ssl.ssl.keystore.location", "/k.p12", ErrorCode.INVALID_REQUEST,
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(listener.name.ssl.ssl.keystore.location)"),
    ("2", "custom.plugin.setting", "x", ErrorCode.INVALID_CONFIG,
     "Unknown broker config name: custom.plugin.setting (kraft loads no plugins that read custom configs)"),
    ("", "log.preallocate", "true", ErrorCode.INVALID_CONFIG,
     "Invalid value true for configuration log.preallocate: kraft does not preallocate segment files"),
])
def test_broker_config_refusals(resource, key, value, code, message):
    result, errors = run_iac(cluster_image(), [(BROKER, resource, [(key, OP_SET, value)])])
    assert errors == [(code, message)] and result.records == []


@pytest.mark.parametrize("key,value,message", [
    ("preallocate", "true", "Invalid value true for configuration preallocate: kraft does not preallocate segment "
     "files"),
    ("remote.storage.enable", "true", "Tiered Storage functionality is disabled in the broker. Topic cannot be "
     "configured with remote log storage."),
])
def test_topic_values_kraft_cannot_honour_are_invalid_config(key, value, message):
    _, errors = run_iac(cluster_image(), [(TOPIC, "foo", [(key, OP_SET, value)])])
    assert errors == [(ErrorCode.INVALID_CONFIG, message)]


# --- legacy AlterConfigs ------------------------------------------------------------------------

AC = AlterConfigsRequest


def run_ac(image, resources, validate_only=False, version=2):
    request = AC(validate_only=validate_only, resources=[
        AC.Resource(resource_type=kind, resource_name=name,
                    configs=[AC.Resource.Config(name=k, value=v) for k, v in configs.items()])
        for kind, name, configs in resources])
    result = handle_alter_configs(context(image, version), request)
    return result, [(r.error_code, r.error_message) for r in result.response.responses]


def test_legacy_alter_configs_replaces_the_whole_set():
    image = apply(cluster_image(), [
        ConfigRecord(resource_type=TOPIC, resource_name="foo", name="retention.ms", value="1000"),
        ConfigRecord(resource_type=TOPIC, resource_name="foo", name="segment.ms", value="2000")])
    result, errors = run_ac(image, [(TOPIC, "foo", {"segment.ms": "2000", "cleanup.policy": "compact"})])
    assert errors == [(0, None)]
    assert result.atomic
    assert apply(image, result.records).configs.config(TOPIC, "foo") == {"segment.ms": "2000",
                                                                         "cleanup.policy": "compact"}
    # unchanged segment.ms writes nothing; retention.ms is deleted implicitly
    assert sorted((r.name, r.value) for r in result.records) == [("cleanup.policy", "compact"),
                                                                 ("retention.ms", None)]


def test_legacy_alter_configs_errors_and_validate_only():
    image = cluster_image()
    _, errors = run_ac(image, [(TOPIC, "foo", {"retention.ms": None})])
    assert errors[0][0] == ErrorCode.INVALID_REQUEST
    _, errors = run_ac(image, [(TOPIC, "nope", {"retention.ms": "1"})])
    assert errors[0][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    result, errors = run_ac(image, [(TOPIC, "foo", {"retention.ms": "1"})], validate_only=True)
    assert errors == [(0, None)] and result.records == []


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_responses_encode_at_every_version(version):
    result, _ = run_ac(cluster_image(), [(TOPIC, "foo", {"retention.ms": "1"}), (TOPIC, "nope", {})], version=version)
    data = result.response.encode(version)
    assert AlterConfigsResponse.decode(data, version) == result.response


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_responses_encode_at_every_version(version):
    result, _ = run_iac(cluster_image(), [(TOPIC, "nope", [("x", OP_SET, "1")])], version=version)
    assert IncrementalAlterConfigsResponse.decode(result.response.encode(version), version) == result.response


def test_kafka_python_reads_our_incremental_alter_configs_response():
    configs = pytest.importorskip("kafka.protocol.admin.configs", reason="kafka-python is not installed")
    result, _ = run_iac(cluster_image(), [(TOPIC, "foo", [("retention.ms", OP_SET, "1")]),
                                          (TOPIC, "nope", [("retention.ms", OP_SET, "1")])])
    theirs = configs.IncrementalAlterConfigsResponse.decode(result.response.encode(1), version=1)
    assert [(r.error_code, r.resource_name) for r in theirs.responses] == [(0, "foo"), (3, "nope")]


def test_gssapi_tuning_is_kept_per_broker_as_kafka_keeps_it_without_gssapi():
    """librdkafka's admin test (0081) alters sasl.kerberos.min.time.before.relogin on a broker
    and expects success, as Kafka gives; kraft stores it (GSSAPI itself is refused at start)."""
    result, errors = run_iac(cluster_image(), [(BROKER, "2", [("sasl.kerberos.min.time.before.relogin", OP_SET,
                                                                "58000")])])
    assert errors == [(0, None)]
    assert [(r.resource_name, r.name, r.value) for r in result.records] == [
        ("2", "sasl.kerberos.min.time.before.relogin", "58000")]
    _, errors = run_iac(cluster_image(), [(BROKER, "2", [("sasl.kerberos.min.time.before.relogin", OP_SET, "soon")])])
    assert errors[0][0] == ErrorCode.INVALID_REQUEST
