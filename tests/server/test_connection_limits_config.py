"""Connection-limit settings (Kafka's SocketServerConfigs): names, defaults and validation in
kraft/config.py, and how they reach KafkaServer (kraft/server/connection_limits.py)."""

from __future__ import annotations

import pytest

from kraft.config import NodeConfig, parse_connection_overrides
from kraft.errors import ConfigError
from kraft.server.metrics import NodeMetrics
from kraft.server.connection_limits import connection_limits
from kraft.server.network import KafkaServer

BASE = {
    "process.roles": "controller",
    "node.id": "1",
    "controller.quorum.voters": "1@localhost:9093",
    "listeners": "CONTROLLER://localhost:9093",
    "controller.listener.names": "CONTROLLER",
    "log.dirs": "/data/kraft",
}


def cfg(**props) -> NodeConfig:
    return NodeConfig.from_properties({**BASE, **props})


def test_defaults_are_kafkas():
    limits = connection_limits(cfg())
    assert limits == dict(max_in_flight=500, connections_max_idle_ms=600_000, max_connections_per_ip=2**31 - 1,
                          max_connections_per_ip_overrides={}, failed_authentication_delay_ms=100,
                          quota_samples=11, quota_window_ms=1000)


def test_settings_reach_the_server_arguments():
    c = cfg(**{"connections.max.idle.ms": "-1", "max.connections.per.ip": "5", "queued.max.requests": "3",
               "max.connections.per.ip.overrides": "localhost:7, 10.0.0.1:0,[::1]:3",
               "connection.failed.authentication.delay.ms": "250"})
    assert connection_limits(c) == dict(max_in_flight=3, connections_max_idle_ms=-1, max_connections_per_ip=5,
                                        max_connections_per_ip_overrides={"localhost": 7, "10.0.0.1": 0, "::1": 3},
                                        failed_authentication_delay_ms=250, quota_samples=11, quota_window_ms=1000)
    assert KafkaServer(None, "127.0.0.1", 0, listener_name="X", **connection_limits(c)).max_in_flight == 3


def test_idle_timeout_is_a_long_as_in_kafka():
    assert cfg(**{"connections.max.idle.ms": str(1 << 40)}).int("connections.max.idle.ms") == 1 << 40


@pytest.mark.parametrize("props", [
    {"max.connections.per.ip": "0"},  # Kafka: zero only with overrides
    {"max.connections.per.ip": "-1"},
    {"connections.max.idle.ms": "-2"},
    {"max.connections.per.ip.overrides": "localhost"},
    {"max.connections.per.ip.overrides": "localhost:many"},
    {"max.connections.per.ip.overrides": ":5"},
    {"max.connections.per.ip.overrides": "localhost:-1"},
], ids=repr)
def test_invalid_settings_are_config_errors_naming_the_key(props):
    with pytest.raises(ConfigError, match=list(props)[0].replace(".", r"\.")):
        cfg(**props)


def test_zero_per_ip_with_overrides_is_valid():
    c = cfg(**{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:2"})
    assert parse_connection_overrides("k", c.values["max.connections.per.ip.overrides"]) == {"127.0.0.1": 2}


def test_connection_counters_are_exported_as_metrics():
    server = KafkaServer(None, "127.0.0.1", 0, listener_name="X")
    server.rejected_total, server.refused_total, server.idle_closed_total = 1, 2, 3
    m = NodeMetrics(1)
    m.on_render(lambda: server.export_counters(m))
    text = m.render()
    for line in ('kraft_rejected_connections_total{node_id="1"} 1', 'kraft_refused_connections_total{node_id="1"} 2',
                 'kraft_idle_connections_closed_total{node_id="1"} 3'):
        assert line in text

