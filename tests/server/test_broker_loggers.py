"""BROKER_LOGGER resources (KIP-412) over a private logging hierarchy: what DescribeConfigs lists,
what IncrementalAlterConfigs changes, and Kafka's refusals, each leaving every level as it was."""

from __future__ import annotations

import logging

import pytest

from kraft.protocol.messages.configs import DescribeConfigsRequest as D, IncrementalAlterConfigsRequest as I
from kraft.server.broker_loggers import OFF, TRACE, alter, describe, level_name


@pytest.fixture
def manager():
    m = logging.Manager(logging.RootLogger(logging.INFO))
    m.getLogger("kraft.broker.fetch")
    m.getLogger("kraft.raft").setLevel(logging.WARNING)
    return m


def _levels(m):
    r = describe(D.Resource(resource_type=8, resource_name="1", configuration_keys=None), 1, m)
    return {c.name: c.value for c in r.configs}


def _set(m, *ops, validate_only=False, name="1"):
    configs = [I.Resource.Config(name=n, config_operation=op, value=v) for n, op, v in ops]
    return alter(I.Resource(resource_type=8, resource_name=name, configs=configs), 1, validate_only, m)


def test_every_logger_its_parents_and_root_with_effective_log4j_levels(manager):
    r = describe(D.Resource(resource_type=8, resource_name="1", configuration_keys=None), 1, manager)
    assert r.error_code == 0
    assert {c.name: c.value for c in r.configs} == {
        "root": "INFO", "kraft": "INFO", "kraft.broker": "INFO", "kraft.broker.fetch": "INFO", "kraft.raft": "WARN"}
    assert all(c.config_source == 6 and not c.read_only and not c.is_sensitive and c.synonyms == [] for c in r.configs)
    only = describe(D.Resource(resource_type=8, resource_name="1", configuration_keys=["kraft.raft"]), 1, manager)
    assert [c.name for c in only.configs] == ["kraft.raft"]


@pytest.mark.parametrize("level,name", [(logging.CRITICAL, "FATAL"), (logging.WARNING, "WARN"), (TRACE, "TRACE"),
                                        (OFF, "OFF"), (logging.DEBUG + 3, "INFO")])
def test_level_names_are_log4js(level, name):
    assert level_name(level) == name


def test_set_then_delete_inherits_again(manager):
    assert _set(manager, ("kraft", 0, "debug"), ("kraft.raft", 1, None)).error_code == 0
    assert _levels(manager)["kraft.broker.fetch"] == "DEBUG" and _levels(manager)["kraft.raft"] == "DEBUG"
    assert _set(manager, ("kraft", 1, None)).error_code == 0
    assert _levels(manager)["kraft.broker.fetch"] == "INFO"
    assert _set(manager, ("root", 0, "OFF")).error_code == 0 and _levels(manager)["kraft"] == "OFF"


@pytest.mark.parametrize("ops,name,code,message", [
    ([("kraft", 0, "DEBUG"), ("nope", 0, "DEBUG")], "1", 40, "Logger nope does not exist!"),
    ([("kraft", 0, "DEBUG"), ("kraft.raft", 0, "LOUD")], "1", 40,
     "Cannot set the log level of kraft.raft to LOUD as it is not a supported log level. "
     "Valid log levels are OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE"),
    ([("kraft", 0, "DEBUG"), ("root", 1, None)], "1", 42, "Removing the log level of the root logger is not allowed"),
    ([("kraft", 2, "DEBUG")], "1", 42, "APPEND operation is not allowed for the BROKER_LOGGER resource"),
    ([("kraft", 3, "DEBUG")], "1", 42, "SUBTRACT operation is not allowed for the BROKER_LOGGER resource"),
    ([("kraft", 0, "DEBUG")], "", 42, "Broker id must not be empty"),
    ([("kraft", 0, "DEBUG")], "2", 42, "Unexpected broker id, expected 1 but received 2"),
])
def test_refusals_change_nothing(manager, ops, name, code, message):
    before = _levels(manager)
    r = _set(manager, *ops, name=name)
    assert (r.error_code, r.error_message) == (code, message)
    assert _levels(manager) == before


def test_validate_only_changes_nothing(manager):
    before = _levels(manager)
    assert _set(manager, ("kraft", 0, "DEBUG"), validate_only=True).error_code == 0
    assert _levels(manager) == before
