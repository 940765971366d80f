"""Flush settings of partition logs: Kafka's ``log.flush.interval.ms`` / ``.messages`` keep
Kafka's meaning and defaults (never), kraft's group-commit linger has its own name
(``kraft.log.flush.linger.ms``), and ``flush.messages`` requests a flush without waiting
out the linger."""

from __future__ import annotations

import asyncio
import time

from kraft.config import INT64_MAX, NodeConfig, log_flush_linger_ms, log_flush_messages
from kraft.log import LogConfig, SegmentedLog
from kraft.log.shared_flusher import SharedFlusher
from kraft.records import build_batch
from kraft.server.broker_node import BrokerNode, broker_config


def _values(**props):
    base = {"node.id": "1", "process.roles": "broker", "controller.quorum.voters": "3000@127.0.0.1:1",
            "controller.listener.names": "CONTROLLER", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/x",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}
    base.update({k.replace("_", "."): str(v) for k, v in props.items()})
    return NodeConfig.from_properties(base).values


def test_kafkas_flush_settings_default_to_never_and_the_linger_has_its_own_name():
    v = _values()
    assert v["log.flush.interval.ms"] == INT64_MAX and v["log.flush.interval.messages"] == INT64_MAX
    assert log_flush_linger_ms(v) == 1000.0 and log_flush_messages(v) is None
    v = _values(kraft_log_flush_linger_ms=20)
    assert log_flush_linger_ms(v) == 20.0
    # Kafka's interval is an upper bound on how long a record stays unflushed: it can only shorten it.
    assert log_flush_linger_ms(_values(log_flush_interval_ms=5)) == 5.0
    assert log_flush_linger_ms(_values(log_flush_interval_ms=60_000)) == 1000.0
    assert log_flush_messages(_values(log_flush_interval_messages=100)) == 100


def test_broker_logs_take_the_linger_from_its_own_setting(tmp_path):
    async def go(props):
        node = BrokerNode(broker_config(1, str(tmp_path / "logs"), props=props), cluster_id="c")
        await node.start()
        try:
            return node.logs.config.append_linger_ms, node.logs.config.flush_interval_messages
        finally:
            await node.shutdown()
    assert asyncio.run(go({})) == (1000.0, None)
    assert asyncio.run(go({"kraft.log.flush.linger.ms": 7})) == (7.0, None)
    assert asyncio.run(go({"log.flush.interval.ms": 3, "log.flush.interval.messages": 50})) == (3.0, 50)


def _wait(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_flush_messages_flushes_without_waiting_out_an_hour_long_linger(tmp_path):
    flusher = SharedFlusher("t", 1)
    for shared in (flusher, None):
        d = tmp_path / ("shared" if shared else "own")
        log = SegmentedLog.open(str(d), LogConfig(append_linger_ms=3_600_000, flush_interval_messages=10),
                                flusher=shared)
        try:
            log.append(bytearray(build_batch([b"x"] * 9)), leader_epoch=0)
            assert not _wait(lambda: log.flushed_offset == 9, timeout=0.3)  # 9 < 10: the linger holds
            log.append(bytearray(build_batch([b"y"])), leader_epoch=0)
            assert _wait(lambda: log.flushed_offset == 10)
        finally:
            log.close()
    flusher.stop()
