"""The quorum controller on 3 real ``kraft server start`` processes: 5 simulated brokers
register and heartbeat over TCP, CreateTopics commits, the three controllers' images agree
(their image digests, from the metrics endpoint), SIGKILL of the active controller loses no
acknowledged topic, and a broker that stops heartbeating is fenced with its leaderships moved."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.client.controller_client import ControllerClient, SimulatedBroker

pytestmark = pytest.mark.integration

SETTINGS = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "1500",
    "controller.quorum.append.linger.ms": "2",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}
_GAUGE = re.compile(r"^(kraft_controller_\w+)\{[^}]*\} (\S+)$", re.M)


def gauges(cluster, node_id) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_ports[node_id]}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    return {k[len("kraft_controller_"):]: float(v) for k, v in _GAUGE.findall(text)}


async def eventually(predicate, timeout: float = 30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = await asyncio.to_thread(predicate)
        if v:
            return v
        await asyncio.sleep(0.2)
    return await asyncio.to_thread(predicate)


def agree(cluster, nodes, **expect):
    """All ``nodes`` show the same image digest and offset, and the expected gauges."""
    seen = [gauges(cluster, i) for i in nodes]
    if any(g is None for g in seen):
        return False
    if len({(g["image_digest"], g["last_applied_offset"]) for g in seen}) != 1:
        return False
    return all(g[k] == v for g in seen for k, v in expect.items()) and seen[0]


def active(cluster, nodes):
    for i in nodes:
        g = gauges(cluster, i)
        if g and g["active_controller_count"] == 1:
            return i
    return None


def test_controller_cluster_brokers_topics_failover_and_fencing(tmp_path):
    cluster = LocalCluster(str(tmp_path / "cluster"), 3, overrides=SETTINGS, metrics=True).create()
    cluster.start()

    async def main():
        client = ControllerClient([cluster.address(i) for i in cluster.ids])
        brokers = [SimulatedBroker(client, b, cluster.cluster_id, rack=f"r{b % 3}", heartbeat_interval_s=0.5)
                   for b in range(1, 6)]
        try:
            for b in brokers:
                await b.register()
                b.start()
            assert await eventually(lambda: all(not b.fenced for b in brokers), 30), "brokers not unfenced"
            resp = await client.create_topics([(f"topic-{i}", 10, 3) for i in range(20)])
            assert [t.error_code for t in resp.topics] == [0] * 20
            g = await eventually(lambda: agree(cluster, cluster.ids, global_topic_count=20, global_partition_count=200,
                                               active_broker_count=5, offline_partitions_count=0))
            assert g, [gauges(cluster, i) for i in cluster.ids]

            # SIGKILL the active controller: every acknowledged topic survives, a new one is accepted
            leader = await eventually(lambda: active(cluster, cluster.ids))
            cluster.kill(leader)
            rest = [i for i in cluster.ids if i != leader]
            resp = await client.create_topics([("after-failover", 5, 3)])
            assert resp.topics[0].error_code == 0, resp
            assert await eventually(lambda: agree(cluster, rest, global_topic_count=21, global_partition_count=205,
                                                  active_broker_count=5))
            cluster.start(leader)
            assert await eventually(lambda: agree(cluster, cluster.ids, global_topic_count=21), 60), \
                [gauges(cluster, i) for i in cluster.ids]

            # broker 5 stops heartbeating: fenced, nothing led by it any more, nothing offline (RF 3)
            await brokers[4].stop()
            g = await eventually(lambda: agree(cluster, cluster.ids, fenced_broker_count=1, active_broker_count=4,
                                               partitions_led_by_fenced_brokers=0, offline_partitions_count=0), 30)
            assert g, [gauges(cluster, i) for i in cluster.ids]
            assert g["preferred_replica_imbalance_count"] > 0  # its leaderships moved to other replicas
            assert g["metadata_error_count"] == 0
        finally:
            for b in brokers:
                await b.stop()
            await client.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 240))
        assert cluster.unexpected_exits() == {}
    finally:
        cluster.close()


def test_a_broker_whose_connection_closes_is_fenced_before_one_that_only_went_quiet(tmp_path):
    """SIGKILL closes a broker's sockets: the controller fences it
    ``kraft.broker.disconnected.session.timeout.ms`` after the close. A broker that stops
    heartbeating with its connection open (paused, partitioned) keeps its whole session."""
    settings = {**SETTINGS, "broker.session.timeout.ms": "9000",
                "kraft.broker.disconnected.session.timeout.ms": "2000"}
    cluster = LocalCluster(str(tmp_path / "cluster"), 3, overrides=settings, metrics=True).create()
    cluster.start()

    async def main():
        clients = [ControllerClient([cluster.address(i) for i in cluster.ids]) for _ in range(2)]
        closed, quiet = [SimulatedBroker(c, b, cluster.cluster_id, heartbeat_interval_s=0.5)
                         for c, b in zip(clients, (1, 2))]
        try:
            for b in (closed, quiet):
                await b.register()
                b.start()
            assert await eventually(lambda: agree(cluster, cluster.ids, active_broker_count=2), 30)
            await closed.stop()
            await quiet.stop()
            await clients[0].close()  # the connection closes, as a killed process's does
            began = time.monotonic()
            g = await eventually(lambda: agree(cluster, cluster.ids, fenced_broker_count=1), 8)
            took = time.monotonic() - began
            assert g and g["active_broker_count"] == 1, [gauges(cluster, i) for i in cluster.ids]
            assert took < 4.5, took  # 2 s after the close (the old code: the 9 s session)
            g = await eventually(lambda: agree(cluster, cluster.ids, fenced_broker_count=2), 15)
            assert g and time.monotonic() - began > 6.5  # the quiet one waited out its session
        finally:
            for b in (closed, quiet):
                await b.stop()
            for c in clients:
                await c.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
        assert cluster.unexpected_exits() == {}
    finally:
        cluster.close()
