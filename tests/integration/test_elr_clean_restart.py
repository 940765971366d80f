"""KIP-966 with real processes: the last eligible replica of a partition that shut down cleanly
leads it again when it comes back (its registration names the broker epoch it shut down in,
from its log dirs' clean-shutdown files); one that was SIGKILLed may have lost unflushed data
and does not (the partition waits for an unclean election, as in Kafka). Found by the
replication simulator (seed 203747): before, every restart counted as unclean and a cleanly
restarted last member left its partition offline for good.

One controller-only node and two broker-only nodes; a topic of one partition on both brokers
with min.insync.replicas=2 and ELR on."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kraft.cli.local_cluster import LocalCluster, wait_for

pytestmark = pytest.mark.integration

SETTINGS = {"eligible.leader.replicas.enable": "true", "min.insync.replicas": "2",
            "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}


def _brokers(admin) -> int:
    try:
        return len(admin.list_topics(timeout=2).brokers)
    except Exception:  # noqa: BLE001 - no broker answering yet
        return 0


def _leader(admin, topic: str):
    try:
        md = admin.list_topics(topic, timeout=2)
    except Exception:  # noqa: BLE001 - no broker answering yet
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None or 0 not in t.partitions:
        return None
    return t.partitions[0].leader


def _read(bootstrap: str, topic: str, n: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}", "log_level": 0,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, end = [], time.monotonic() + 30
    while len(got) < n and time.monotonic() < end:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


@pytest.mark.parametrize("how", ["clean", "kill"])
def test_the_last_eligible_replica_leads_again_only_after_a_clean_shutdown(tmp_path, how):
    cluster = LocalCluster(str(tmp_path), 1, brokers=2, overrides=SETTINGS).create()
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, "log_level": 0})
        assert wait_for(lambda: _brokers(admin) == 2, 60, 0.3)
        admin.create_topics([NewTopic("e", 1, replica_assignment=[[2, 3]])])["e"].result(30)
        assert wait_for(lambda: _leader(admin, "e") == 2, 30, 0.2)
        p = Producer({"bootstrap.servers": cluster.broker_bootstrap, "acks": "all", "log_level": 0})
        for i in range(10):
            p.produce("e", b"v%d" % i)
        assert p.flush(30) == 0
        cluster.stop(3)  # the follower: ISR [2], below min ISR, so 3 becomes eligible
        time.sleep(2)
        if how == "clean":
            cluster.stop(2)
        else:
            cluster.kill(2)
        cluster.start(2)
        two = f"127.0.0.1:{cluster.broker_ports[2]}"
        admin = AdminClient({"bootstrap.servers": two, "log_level": 0})
        if how == "clean":
            assert wait_for(lambda: _leader(admin, "e") == 2, 60, 0.3), "the cleanly restarted replica does not lead"
            assert _read(two, "e", 10) == [b"v%d" % i for i in range(10)]
        else:
            # Fenced, registered again (uncleanly: out of the ELR), unfenced: still no leader.
            assert wait_for(lambda: _leader(admin, "e") is not None, 60, 0.3)
            time.sleep(6)
            assert _leader(admin, "e") == -1
    finally:
        cluster.close()
