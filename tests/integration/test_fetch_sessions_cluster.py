"""Fetch sessions (KIP-227) between real ``kraft server start`` processes: 3 combined nodes,
a 300-partition RF-3 topic, so every broker follows 200 partitions from two leaders. Each
follower's fetchers hold a session on each leader (the leaders' fetch session gauges count
them and their partitions); records written in two waves, the second after the sessions are
established and most partitions are idle (only incremental fetches carry them), reach every
replica byte for byte."""

from __future__ import annotations

import re
import urllib.request

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for

from .test_broker_cluster import QUIET, all_see_all, create
from .test_replication_cluster import REPLICATION, segment_bytes

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "many"
PARTITIONS = 300


def gauge(cluster, node: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_ports[node]}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(rf"^{name}{{[^}}]*}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else -1.0


def created(admin) -> bool:
    """CreateTopics, again while the (loaded) controller quorum settles; True once it exists."""
    try:
        create(admin, NewTopic(TOPIC, PARTITIONS, 3))
    except ck.KafkaException as exc:
        return exc.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
    return True


def leaders(admin) -> dict:
    try:
        parts = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions
    except (ck.KafkaException, KeyError):
        return {}
    return {p: m.leader for p, m in parts.items() if m.leader >= 0 and len(m.isrs) == 3}


def test_followers_of_many_partitions_replicate_everything_through_fetch_sessions(tmp_path):
    c = LocalCluster(str(tmp_path), 3, combined=True, overrides=REPLICATION, metrics=True).create()
    c.start()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"brokers did not all register; {c.unexpected_exits()}"
        admin = AdminClient({"bootstrap.servers": c.broker_bootstrap, **QUIET})
        assert wait_for(lambda: created(admin), 90, 1.0), "CreateTopics never succeeded"
        assert wait_for(lambda: len(leaders(admin)) == PARTITIONS, 60, 0.5), len(leaders(admin))
        led = leaders(admin)

        first = [(b"w1-%03d" % p, p) for p in range(PARTITIONS)]
        acked = produce_all(c.broker_bootstrap, first)
        assert len(acked) == PARTITIONS

        # Every follower replica sits in a session on its leader: 2 followers per partition.
        def cached():
            return sum(gauge(c, n, "kraft_fetch_session_partitions") for n in c.broker_ids)

        def detail():  # (node, sessions, partitions in them, partitions led)
            return [(n, gauge(c, n, "kraft_fetch_sessions"), gauge(c, n, "kraft_fetch_session_partitions"),
                     sum(1 for p in led.values() if p == n)) for n in c.broker_ids]
        assert wait_for(lambda: cached() == 2 * PARTITIONS, 30, 0.5), detail()
        for n in c.broker_ids:  # one per follower fetcher on each leader
            assert gauge(c, n, "kraft_fetch_sessions") == (2 if n in led.values() else 0), detail()

        second = [(b"w2-%03d" % p, p) for p in range(0, PARTITIONS, 7)]  # most partitions stay idle
        acked += produce_all(c.broker_bootstrap, second)
        for p in range(PARTITIONS):
            leader_bytes = segment_bytes(c, led[p], TOPIC, p)
            want = 2 if p % 7 == 0 else 1
            assert leader_bytes.count(b"w1-%03d" % p) == 1 and leader_bytes.count(b"w2-%03d" % p) == want - 1
            for node in c.broker_ids:
                assert wait_for(lambda: segment_bytes(c, node, TOPIC, p) == leader_bytes, 20), (p, node)
        assert cached() == 2 * PARTITIONS  # the sessions lived through it (no session errors, no restarts)
        assert c.unexpected_exits() == {}
    finally:
        c.close()


def produce_all(bootstrap: str, values) -> list:
    """acks=all, each value to its partition, one producer."""
    out, errors = [], []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **QUIET})

    def done(err, msg):
        (errors if err is not None else out).append(err or (msg.partition(), msg.offset()))
    for value, p in values:
        producer.produce(TOPIC, value=value, partition=p, on_delivery=done)
    assert producer.flush(60) == 0, "produce did not finish"
    assert not errors, errors[:3]
    return out
