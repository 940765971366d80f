"""KIP-392 fetch from follower on real processes with librdkafka: three combined nodes in racks
RACK1..RACK3 with the rack-aware replica selector. A consumer whose ``client.rack`` is a
follower's rack is sent there by the leader (``preferred_read_replica``) and reads every
record from that follower, in order, including records produced while it waits (the follower's
parked Fetch wakes when its high watermark moves); when that follower is killed, the consumer
goes back to the leader and loses nothing. A node refuses a selector kraft does not have."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .test_broker_cluster import QUIET, SETTINGS, all_see_all  # noqa: E402

pytestmark = pytest.mark.integration
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
TOPIC = "ffr"


def _produce(cluster, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": cluster.broker_bootstrap, "acks": "all", "linger.ms": 2, **QUIET})
    for i in range(start, start + count):
        p.produce(TOPIC, value=b"v%06d" % i, partition=0)
    assert p.flush(30) == 0


def test_a_consumer_reads_from_the_follower_in_its_rack_and_falls_back_to_the_leader(tmp_path):
    cluster = LocalCluster(str(tmp_path / "c"), 3, combined=True,
                           overrides={**SETTINGS, "replica.selector.class": RACK_AWARE},
                           node_overrides={i: {"broker.rack": f"RACK{i}"} for i in (1, 2, 3)}).create()
    cluster.start()
    consumer = None
    try:
        assert wait_for(lambda: all_see_all(cluster), 60, 0.2), cluster.unexpected_exits()
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
        for f in admin.create_topics([NewTopic(TOPIC, 1, 3)]).values():
            f.result()
        _produce(cluster, 0, 2000)
        md = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
        leader = md.leader
        follower = next(r for r in md.replicas if r != leader)
        stats: list[dict] = []
        consumer = Consumer({"bootstrap.servers": cluster.broker_bootstrap, "group.id": "ffr",
                             "client.rack": f"RACK{follower}", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "statistics.interval.ms": 200,
                             "stats_cb": lambda s: stats.append(json.loads(s)), **QUIET})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])

        def read(expect: int, timeout: float) -> list:
            out, end = [], time.monotonic() + timeout
            while len(out) < expect and time.monotonic() < end:
                m = consumer.poll(0.2)
                if m is not None and not m.error():
                    out.append(m.value())
            return out

        assert read(2000, 30) == [b"v%06d" % i for i in range(2000)]

        def fetching_from():
            consumer.poll(0.1)
            parts = stats[-1]["topics"][TOPIC]["partitions"] if stats and TOPIC in stats[-1]["topics"] else {}
            return parts.get("0", {}).get("broker")
        assert wait_for(lambda: fetching_from() == follower, 10, 0.1), (fetching_from(), leader, follower)
        # The follower's rx bytes carry the records: the leader only redirected (statistics come
        # every 200 ms: wait for one taken after the reads)
        def rx() -> dict:
            consumer.poll(0.1)
            return {int(b["nodeid"]): b["rxbytes"] for b in stats[-1]["brokers"].values() if b["nodeid"] > 0}
        assert wait_for(lambda: rx()[follower] > 2000 * 7, 10, 0.1), rx()
        assert rx()[leader] < 5000, rx()

        # Records produced while the consumer waits on the follower arrive promptly
        t0 = time.monotonic()
        _produce(cluster, 2000, 10)
        assert read(10, 10) == [b"v%06d" % i for i in range(2000, 2010)]
        assert time.monotonic() - t0 < 5

        # The follower dies: the consumer goes back to the leader and misses nothing
        cluster.kill(follower)
        _produce(cluster, 2010, 500)
        assert read(500, 60) == [b"v%06d" % i for i in range(2010, 2510)]
    finally:
        if consumer is not None:
            consumer.close()
        cluster.close()


def test_an_unknown_replica_selector_is_refused_at_start(tmp_path):
    cluster = LocalCluster(str(tmp_path / "c"), 1, combined=True,
                           overrides={"replica.selector.class": "com.example.MySelector"}).create
    with pytest.raises(Exception) as info:
        cluster()  # formatting reads the config and refuses it too
    assert "replica.selector.class" in str(info.value)
    props = tmp_path / "server.properties"
    props.write_text("node.id=1\nprocess.roles=broker,controller\ncontroller.quorum.voters=1@127.0.0.1:1\n"
                     "controller.listener.names=CONTROLLER\nlisteners=PLAINTEXT://:0,CONTROLLER://:1\n"
                     f"log.dirs={tmp_path / 'd'}\nreplica.selector.class=com.example.MySelector\n")
    r = subprocess.run([sys.executable, "-P", "-m", "kraft", "server", "start", str(props)], capture_output=True,
                       text=True, timeout=60, cwd=str(tmp_path), env=dict(os.environ))
    assert r.returncode != 0 and "replica.selector.class" in r.stderr and "Traceback" not in r.stderr, r.stderr
