"""KIP-714 with a real librdkafka client: confluent-kafka pushes its metrics by default once the
broker advertises GetTelemetrySubscriptions/PushTelemetry, and they appear on that broker's
/metrics as ``kraft_client_telemetry`` rows (the producer's per-node request latencies among
them). One combined node, pushes every second."""

from __future__ import annotations

import time
import urllib.request

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for

pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
pytestmark = pytest.mark.integration


def rows(cluster) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_ports[1]}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return []
    return [line for line in text.splitlines() if line.startswith("kraft_client_telemetry{")]


def test_a_librdkafka_producer_pushes_its_metrics_to_the_broker(tmp_path):
    from confluent_kafka import Producer
    cluster = LocalCluster(str(tmp_path / "c"), 1, combined=True, metrics=True,
                           overrides={"kraft.client.telemetry.push.interval.ms": "1000"}).create()
    cluster.start()
    try:
        p = Producer({"bootstrap.servers": cluster.broker_bootstrap, "client.id": "telemetry-app", "acks": "all"})
        end = time.monotonic() + 60
        mine = []
        while time.monotonic() < end and not mine:
            for _ in range(20):
                p.produce("telemetry-t", b"x")
                p.poll(0.01)
            mine = [r for r in rows(cluster) if 'client_id="telemetry-app"' in r and
                    'metric="org.apache.kafka.producer.node.request.latency.avg",attributes="node.id=1"' in r]
        assert mine, rows(cluster)
        assert p.flush(10) == 0
    finally:
        cluster.close()
