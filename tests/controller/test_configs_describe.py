"""DescribeConfigs as a read over the image plus Kafka's defaults (``ConfigHelper``): values,
sources, synonyms, read-only/sensitive flags and types, topics and brokers, and the errors
Kafka returns. The same function serves brokers (``kraft.metadata.config_describe``)."""

from __future__ import annotations

import pytest

from kraft.controller.configs import handle_describe_configs
from kraft.errors import ErrorCode
from kraft.metadata import ConfigRecord
from kraft.metadata.config_defs import TOPIC_CONFIGS, ConfigSource, ConfigType
from kraft.metadata.config_describe import describe_configs
from kraft.metadata.configs import BROKER, BROKER_LOGGER, TOPIC
from kraft.protocol import DescribeConfigsRequest, DescribeConfigsResponse
from admin_fixtures import NODE_ID, apply, cluster_image, context

DC = DescribeConfigsRequest


def describe(image, resources, synonyms=False, docs=False, settings=None, version=4):
    request = DC(include_synonyms=synonyms, include_documentation=docs, resources=[
        DC.Resource(resource_type=kind, resource_name=name, configuration_keys=keys) for kind, name, keys in resources])
    result = handle_describe_configs(context(image, version, settings), request)
    assert result.records == []
    return result.response.results


def by_name(result):
    return {c.name: c for c in result.configs}


def test_topic_lists_every_topic_config_with_defaults():
    [result] = describe(cluster_image(), [(TOPIC, "foo", None)])
    assert result.error_code == 0
    configs = by_name(result)
    assert set(configs) == set(TOPIC_CONFIGS)
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only, retention.is_sensitive) == \
        ("604800000", ConfigSource.DEFAULT_CONFIG, False, False)
    assert retention.config_type == ConfigType.LONG and retention.synonyms == [] and retention.documentation is None
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].config_type == ConfigType.LIST


def test_topic_override_wins_and_its_synonyms_follow_kafka():
    image = apply(cluster_image(), [
        ConfigRecord(resource_type=TOPIC, resource_name="foo", name="segment.bytes", value="2097152"),
        ConfigRecord(resource_type=BROKER, resource_name="", name="log.segment.bytes", value="4194304")])
    [result] = describe(image, [(TOPIC, "foo", ["segment.bytes"])], synonyms=True,
                        settings={"log.segment.bytes": 8388608})
    [config] = result.configs
    assert (config.value, config.config_source) == ("2097152", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.value, s.source) for s in config.synonyms] == [
        ("segment.bytes", "2097152", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.segment.bytes", "4194304", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.segment.bytes", "8388608", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG)]


def test_broker_layers_feed_topic_values_in_priority_order():
    image = apply(cluster_image(), [
        ConfigRecord(resource_type=BROKER, resource_name="", name="min.insync.replicas", value="2"),
        ConfigRecord(resource_type=BROKER, resource_name=str(NODE_ID), name="min.insync.replicas", value="3")])
    [result] = describe(image, [(TOPIC, "foo", ["min.insync.replicas", "unclean.leader.election.enable"])],
                        settings={"unclean.leader.election.enable": True})
    configs = by_name(result)
    assert (configs["min.insync.replicas"].value, configs["min.insync.replicas"].config_source) == \
        ("3", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert (configs["unclean.leader.election.enable"].value,
            configs["unclean.leader.election.enable"].config_source) == ("true", ConfigSource.STATIC_BROKER_CONFIG)


def test_hours_synonym_is_converted_to_the_topic_unit():
    image = apply(cluster_image(), [ConfigRecord(resource_type=BROKER, resource_name="", name="log.retention.hours",
                                                 value="24")])
    [result] = describe(image, [(TOPIC, "foo", ["retention.ms"])], synonyms=True)
    [config] = result.configs
    assert config.value == str(24 * 3_600_000)
    # Kafka lists a topic's broker synonyms only from the group's first name (log.retention.ms) on
    assert config.synonyms == [] and config.config_source == ConfigSource.DEFAULT_CONFIG


def test_configuration_keys_filter_and_documentation():
    [result] = describe(cluster_image(), [(TOPIC, "foo", ["retention.ms", "no.such.key"])], docs=True)
    assert [c.name for c in result.configs] == ["retention.ms"]
    assert "retained" in result.configs[0].documentation


@pytest.mark.parametrize("name,code", [("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                       ("", ErrorCode.INVALID_TOPIC_EXCEPTION),
                                       ("a b", ErrorCode.INVALID_TOPIC_EXCEPTION)])
def test_topic_errors(name, code):
    [result] = describe(cluster_image(), [(TOPIC, name, None)])
    assert result.error_code == code and result.configs == [] and result.error_message


def test_broker_resource_of_this_node_shows_every_broker_config():
    image = apply(cluster_image(), [
        ConfigRecord(resource_type=BROKER, resource_name=str(NODE_ID), name="num.io.threads", value="16"),
        ConfigRecord(resource_type=BROKER, resource_name="", name="num.io.threads", value="12"),
        ConfigRecord(resource_type=BROKER, resource_name=str(NODE_ID), name="ssl.key.password", value="secret")])
    [result] = describe(image, [(BROKER, str(NODE_ID), None)], synonyms=True, settings={"num.partitions": 6})
    configs = by_name(result)
    io = configs["num.io.threads"]
    assert (io.value, io.config_source, io.read_only) == ("16", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert [(s.value, s.source) for s in io.synonyms] == [
        ("16", ConfigSource.DYNAMIC_BROKER_CONFIG), ("12", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("8", ConfigSource.DEFAULT_CONFIG)]
    partitions = configs["num.partitions"]
    assert (partitions.value, partitions.config_source, partitions.read_only) == \
        ("6", ConfigSource.STATIC_BROKER_CONFIG, True)
    password = configs["ssl.key.password"]
    assert password.value is None and password.is_sensitive and password.config_type == ConfigType.PASSWORD
    assert all(s.value is None for s in password.synonyms)


def test_cluster_default_resource_lists_only_what_is_set():
    image = apply(cluster_image(), [
        ConfigRecord(resource_type=BROKER, resource_name="", name="log.retention.ms", value="1000"),
        ConfigRecord(resource_type=BROKER, resource_name="", name="my.plugin.key", value="v")])
    [result] = describe(image, [(BROKER, "", None)], synonyms=True)
    configs = by_name(result)
    assert set(configs) == {"log.retention.ms", "my.plugin.key"}
    assert configs["log.retention.ms"].config_source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert [s.source for s in configs["log.retention.ms"].synonyms] == [ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    # a key of unknown type may hold a secret: Kafka hides it
    assert configs["my.plugin.key"].is_sensitive and configs["my.plugin.key"].value is None


@pytest.mark.parametrize("kind,name", [(BROKER, "1"), (BROKER, "x"), (BROKER_LOGGER, str(NODE_ID)), (77, "a")])
def test_other_resources_are_invalid_request(kind, name):
    [result] = describe(cluster_image(), [(kind, name, None)])
    assert result.error_code == ErrorCode.INVALID_REQUEST and result.configs == []


def test_results_keep_request_order_and_are_independent():
    results = describe(cluster_image(), [(TOPIC, "nope", None), (TOPIC, "bar", ["retention.ms"])])
    assert [(r.resource_name, r.error_code, len(r.configs)) for r in results] == [("nope", 3, 0), ("bar", 0, 1)]


def test_broker_can_use_the_same_read_with_its_own_id():
    response = describe_configs(cluster_image(), DC(resources=[DC.Resource(resource_type=BROKER, resource_name="2")]),
                                node_id=2)
    assert response.results[0].error_code == 0 and response.results[0].configs


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_response_encodes_at_every_version(version):
    results = describe(cluster_image(), [(TOPIC, "foo", None), (TOPIC, "nope", None)], synonyms=True, docs=True,
                       version=version)
    response = DescribeConfigsResponse(results=results)
    back = DescribeConfigsResponse.decode(response.encode(version), version)
    assert [len(r.configs) for r in back.results] == [len(TOPIC_CONFIGS), 0]
    assert bool(back.results[0].configs[0].documentation) == (version >= 3)  # absent below v3


def test_kafka_python_reads_our_describe_configs_response():
    configs = pytest.importorskip("kafka.protocol.admin.configs", reason="kafka-python is not installed")
    results = describe(cluster_image(), [(TOPIC, "foo", ["retention.ms", "cleanup.policy"])], synonyms=True)
    theirs = configs.DescribeConfigsResponse.decode(DescribeConfigsResponse(results=results).encode(4), version=4)
    [result] = theirs.results
    assert result.resource_name == "foo"
    assert sorted((c.name, c.value, c.config_source) for c in result.configs) == [
        ("cleanup.policy", "delete", 5), ("retention.ms", "604800000", 5)]
