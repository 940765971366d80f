"""Partition replication between real ``kraft server start`` processes: 3 combined nodes, an
RF-3 topic, confluent-kafka producing with acks=all. Followers fetch from the leader and hold
the same batches byte for byte, the high watermark advances (so acks=all completes and a
consumer reads everything), and after SIGKILL of a partition's leader the controller fences it
on lease expiry and elects a new leader from the ISR that still serves every acknowledged
record, at the offset it was acknowledged at, and takes new acks=all writes."""

from __future__ import annotations

import glob
import os
import signal

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.records import iter_batches

from .test_broker_cluster import QUIET, SETTINGS, all_see_all, consume, create, partition, produce

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "replicated"
PARTITIONS = 3
REPLICATION = {**SETTINGS, "replica.fetch.backoff.ms": "100", "replica.fetch.wait.max.ms": "200",
               "replica.lag.time.max.ms": "10000"}


def segment_bytes(cluster, node: int, topic: str, p: int) -> bytes:
    """The partition's record batches as this broker holds them on disk (every .log, in order)."""
    files = sorted(glob.glob(os.path.join(cluster.partition_dir(node), f"{topic}-{p}", "*.log")))
    out = b""
    for name in files:
        with open(name, "rb") as f:
            out += f.read()
    return out


def produce_idempotent(bootstrap: str, topic: str, values) -> list:
    """confluent-kafka with ``enable.idempotence=true`` (InitProducerId, sequences, acks=all)."""
    out, errors = [], []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **QUIET})

    def done(err, msg):
        (errors if err is not None else out).append(err or (msg.partition(), msg.offset(), msg.key(), msg.value()))
    for v in values:
        producer.produce(topic, value=v, key=v[-2:], on_delivery=done)
    assert producer.flush(30) == 0, "idempotent produce did not finish"
    assert not errors, errors[:3]
    return out


def producer_ids(data: bytes) -> set:
    return {b.producer_id for b in iter_batches(data) if b.producer_id >= 0}


def admin_for(cluster, nodes) -> AdminClient:
    return AdminClient({"bootstrap.servers": ",".join(f"127.0.0.1:{cluster.broker_ports[i]}" for i in nodes),
                        **QUIET})


def start(tmp_path, overrides) -> LocalCluster:
    c = LocalCluster(str(tmp_path), 3, combined=True, overrides=overrides).create()
    c.start()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"brokers did not all register; {c.unexpected_exits()}"
    except BaseException:
        c.close()
        raise
    return c


@pytest.fixture
def cluster(tmp_path):
    c = start(tmp_path, REPLICATION)
    try:
        yield c
    finally:
        c.close()


def test_rf3_replicates_acks_all_and_survives_leader_kill(cluster):
    admin = admin_for(cluster, cluster.broker_ids)
    create(admin, NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"}))
    assert wait_for(lambda: all(partition(admin, TOPIC, p) for p in range(PARTITIONS)), 20)
    values = [b"a-%04d" % i for i in range(600)]
    acked = produce(cluster.broker_bootstrap, TOPIC, values, acks="all", key_of=lambda v: v[-2:])
    assert len(acked) == len(values) and len({p for p, *_ in acked}) == PARTITIONS
    acked += produce_idempotent(cluster.broker_bootstrap, TOPIC, [b"i-%04d" % i for i in range(300)])
    got = consume(cluster.broker_bootstrap, TOPIC, range(PARTITIONS), len(acked))
    assert sorted(got) == sorted(acked)

    # Every replica holds the leader's batches byte for byte (followers append as fetched).
    md = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
    for p, meta in md.partitions.items():
        assert sorted(meta.replicas) == [1, 2, 3] and sorted(meta.isrs) == [1, 2, 3], (p, meta.isrs)
        leader_bytes = segment_bytes(cluster, meta.leader, TOPIC, p)
        # The idempotent producer's id came from a controller block (AllocateProducerIds
        # hands out 0, 1000, ...; the controller-less fallback is the wall clock << 20).
        assert producer_ids(leader_bytes) and max(producer_ids(leader_bytes)) < 1_000_000, producer_ids(leader_bytes)
        for node in meta.replicas:
            assert wait_for(lambda: segment_bytes(cluster, node, TOPIC, p) == leader_bytes, 20), (p, node)

    # SIGKILL partition 0's leader: the controller fences it when its session ends and picks
    # a new leader from the ISR; nothing acknowledged is lost and nothing moves.
    victim = md.partitions[0].leader
    survivors = [i for i in cluster.broker_ids if i != victim]
    cluster.kill(victim)
    admin = admin_for(cluster, survivors)

    def moved():
        try:
            m = admin.list_topics(TOPIC, timeout=2).topics[TOPIC].partitions
        except ck.KafkaException:
            return False
        return all(m[p].leader in survivors and victim not in m[p].isrs for p in range(PARTITIONS))
    assert wait_for(moved, 30, 0.2), "no new leaders from the ISR after the kill"
    bootstrap = ",".join(f"127.0.0.1:{cluster.broker_ports[i]}" for i in survivors)
    after = consume(bootstrap, TOPIC, range(PARTITIONS), len(acked))
    assert sorted(after) == sorted(acked)
    # acks=all with the shrunken ISR (2 >= min.insync.replicas) is accepted and replicated.
    more = produce(bootstrap, TOPIC, [b"b-%04d" % i for i in range(60)], acks="all", key_of=lambda v: v[-2:])
    more += produce_idempotent(bootstrap, TOPIC, [b"j-%04d" % i for i in range(60)])
    everything = consume(bootstrap, TOPIC, range(PARTITIONS), len(acked) + len(more))
    assert sorted(everything) == sorted(acked + more)
    assert set(cluster.unexpected_exits()) <= {victim}


def isr(admin, topic: str, p: int):
    try:
        return sorted(admin.list_topics(topic, timeout=2).topics[topic].partitions[p].isrs)
    except (ck.KafkaException, KeyError):
        return None


def test_a_stalled_follower_leaves_the_isr_through_alter_partition_and_rejoins(tmp_path):
    """The leader, not the controller, shrinks the ISR: the follower is paused for longer than
    ``replica.lag.time.max.ms`` but well within its broker session (so it is never fenced);
    acks=all waits for the shrink and then completes without it; once it runs again it catches
    up and the leader proposes it back."""
    c = start(tmp_path, {**REPLICATION, "replica.lag.time.max.ms": "1000", "broker.session.timeout.ms": "30000"})
    try:
        admin = admin_for(c, c.broker_ids)
        create(admin, NewTopic(TOPIC, 1, 3))
        assert wait_for(lambda: isr(admin, TOPIC, 0) == [1, 2, 3], 20)
        produce(c.broker_bootstrap, TOPIC, [b"first-%d" % i for i in range(20)], acks="all")
        leader = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0].leader
        follower = next(i for i in c.broker_ids if i != leader)
        others = [i for i in c.broker_ids if i != follower]
        admin = admin_for(c, others)
        bootstrap = ",".join(f"127.0.0.1:{c.broker_ports[i]}" for i in others)
        os.kill(c.procs[follower].pid, signal.SIGSTOP)
        try:
            # A follower at the leader's end stays in sync however long it is silent (Kafka's
            # rule): writes make it lag; acks=all completes once the leader has shrunk the ISR.
            acked = produce(bootstrap, TOPIC, [b"while-out-%d" % i for i in range(20)], acks="all")
            assert wait_for(lambda: isr(admin, TOPIC, 0) == others, 20), isr(admin, TOPIC, 0)
        finally:
            os.kill(c.procs[follower].pid, signal.SIGCONT)
        assert wait_for(lambda: isr(admin, TOPIC, 0) == [1, 2, 3], 30), isr(admin, TOPIC, 0)
        leader_bytes = segment_bytes(c, leader, TOPIC, 0)
        assert segment_bytes(c, follower, TOPIC, 0) == leader_bytes  # back in the ISR: it has everything
        assert len(acked) == 20
        assert c.unexpected_exits() == {}
    finally:
        c.close()
