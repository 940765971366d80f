"""Brokers in real ``kraft server start`` processes, registered with the controller quorum:
3 combined nodes (``broker,controller``) and broker-only observers, with confluent-kafka
(librdkafka) as the client. Admin writes go through a broker (forwarded to the active
controller); produce and consume RF 1 and RF 3 (replication itself: test_replication_cluster.py);
a paused broker is fenced and then rejects produce; a second
process with a taken node id is refused and never serves; SIGTERM is a controlled shutdown;
a restarted broker re-registers and keeps every acknowledged record; deleting a topic removes
its files from every broker."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import time

import pytest

from kraft.cli.local_cluster import LocalCluster, _die_with_parent, wait_for
from kraft.client.node_client import NodeClient
from kraft.config import NodeConfig, load_properties
from kraft.errors import ErrorCode, KraftError
from kraft.log.formatting import format_storage
from kraft.protocol import MetadataRequest, ProduceRequest
from kraft.records import build_batch

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

from .quorum_helpers import describe, run  # noqa: E402

pytestmark = pytest.mark.integration

SETTINGS = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "1500",
    "controller.quorum.append.linger.ms": "0",
    "broker.session.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "300",
}
_SILENT = logging.getLogger("kraft-test-rdkafka")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False
QUIET = {"logger": _SILENT}  # librdkafka: no connection-refused noise on stderr


def start(tmp_path, **kw) -> LocalCluster:
    cluster = LocalCluster(str(tmp_path), 3, combined=True, overrides=SETTINGS, **kw).create()
    cluster.start()
    assert wait_for(lambda: all_see_all(cluster), 60, 0.2), \
        f"brokers did not all register; exits {cluster.unexpected_exits()}"
    return cluster


def metadata_from(address):
    """Our own Metadata request to one broker (librdkafka asks any broker it likes)."""
    async def ask():
        client = NodeClient(*address, client_id="test-metadata")
        try:
            return await client.request(MetadataRequest(topics=None), 9)
        finally:
            await client.close()
    try:
        return run(ask())
    except Exception:
        return None


def all_see_all(cluster) -> bool:
    """Every broker's own Metadata answer lists every broker."""
    want = sorted(cluster.broker_ids)
    for i in cluster.broker_ids:
        md = metadata_from(cluster.broker_address(i))
        if md is None or sorted(b.node_id for b in md.brokers) != want:
            return False
    return True


def brokers(admin) -> dict:
    try:
        return admin.list_topics(timeout=2).brokers
    except ck.KafkaException:
        return {}


def create(admin, *topics: NewTopic) -> None:
    for name, fut in admin.create_topics(list(topics), operation_timeout=20).items():
        fut.result(30)


def partition(admin, topic: str, p: int = 0):
    md = admin.list_topics(topic, timeout=5)
    t = md.topics.get(topic)
    return None if t is None or t.error is not None else t.partitions.get(p)


def produce(bootstrap: str, topic: str, values, *, acks="all", partition_=None, key_of=None) -> list:
    """Produce and flush; returns the delivered (partition, offset, key, value) (errors raise)."""
    out, errors = [], []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, **QUIET})

    def done(err, msg):
        if err is not None:
            errors.append(err)
        else:
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))

    for v in values:
        kwargs = {"partition": partition_} if partition_ is not None else {}
        producer.produce(topic, value=v, key=key_of(v) if key_of else None, on_delivery=done, **kwargs)
    assert producer.flush(30) == 0, "produce did not finish"
    assert not errors, errors[:3]
    return out


def consume(bootstrap: str, topic: str, partitions, count: int, timeout: float = 30.0) -> list:
    """Read from the earliest offset of ``partitions`` (assign, no group) until ``count`` records."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kraft-test", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", **QUIET})
    consumer.assign([TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
    got = []
    end = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < end:
            m = consumer.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.partition(), m.offset(), m.key(), m.value()))
    finally:
        consumer.close()
    return got


async def raw_produce(client: NodeClient, topic: str, p: int, value: bytes) -> int:
    P = ProduceRequest
    req = P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        P.Topic(name=topic, partition_data=[P.Topic.Partition(index=p, records=build_batch([value]))])])
    resp = await client.request(req, 9, timeout_ms=10_000)
    return resp.responses[0].partition_responses[0].error_code


def log_text(cluster, node_id) -> str:
    with open(cluster.log_path(node_id), errors="replace") as f:
        return f.read()


def non_leader(cluster) -> int:
    d = run(describe(cluster))
    return next(i for i in cluster.controller_ids if i != d.leader_id)


@pytest.fixture(scope="module")
def combined(tmp_path_factory):
    cluster = start(tmp_path_factory.mktemp("combined"))
    yield cluster
    assert cluster.unexpected_exits() == {}
    codes = cluster.stop()
    cluster.close()
    assert set(codes.values()) == {0}, codes


def test_admin_creates_describes_and_deletes_topics_through_a_broker(combined):
    admin = AdminClient({"bootstrap.servers": combined.broker_bootstrap, **QUIET})
    md = admin.list_topics(timeout=5)
    assert sorted(md.brokers) == [1, 2, 3]
    assert md.controller_id in md.brokers  # KRaft brokers name an alive broker
    assert {b.port for b in md.brokers.values()} == set(combined.broker_ports.values())
    create(admin, NewTopic("adm", 4, 1), NewTopic("adm3", 2, 3, config={"retention.ms": "123456"}))
    assert wait_for(lambda: partition(admin, "adm", 3) is not None and partition(admin, "adm3", 1), 20)
    # Reads answered from a broker's image: the topic's config override, the cluster.
    (fut,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "adm3")]).values()
    entry = fut.result(10)["retention.ms"]
    assert entry.value == "123456" and entry.source == ck.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    cluster_desc = admin.describe_cluster().result(10)
    assert sorted(n.id for n in cluster_desc.nodes) == [1, 2, 3]
    assert cluster_desc.controller.id in (1, 2, 3)
    md = admin.list_topics(timeout=5)
    assert len(md.topics["adm"].partitions) == 4
    assert all(len(p.replicas) == 3 and sorted(p.isrs) == [1, 2, 3] for p in md.topics["adm3"].partitions.values())
    # Every partition's log exists on exactly the brokers the controller placed it on.
    for topic in ("adm", "adm3"):
        for pid, p in md.topics[topic].partitions.items():
            for node in combined.broker_ids:
                there = os.path.isdir(os.path.join(combined.partition_dir(node), f"{topic}-{pid}"))
                assert wait_for(lambda: os.path.isdir(os.path.join(combined.partition_dir(node),
                                                                   f"{topic}-{pid}")) == (node in p.replicas), 10), \
                    (topic, pid, node, there)
    produce(combined.broker_bootstrap, "adm", [b"%d" % i for i in range(40)])
    with pytest.raises(ck.KafkaException) as exc:
        create(admin, NewTopic("adm", 1, 1))
    assert exc.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
    for fut in admin.delete_topics(["adm"], operation_timeout=20).values():
        fut.result(30)
    assert wait_for(lambda: "adm" not in admin.list_topics(timeout=5).topics, 20)

    def no_files():
        return not any(e.startswith("adm-") and e[4:].split(".")[0].isdigit()
                       for n in combined.broker_ids for e in os.listdir(combined.partition_dir(n)))
    assert wait_for(no_files, 30), [os.listdir(combined.partition_dir(n)) for n in combined.broker_ids]
    assert "adm3" in admin.list_topics(timeout=5).topics


def test_produce_and_consume_rf1_and_rf3(combined):
    admin = AdminClient({"bootstrap.servers": combined.broker_bootstrap, **QUIET})
    create(admin, NewTopic("one", 3, 1), NewTopic("three", 1, 3))
    assert wait_for(lambda: partition(admin, "one", 2) is not None and partition(admin, "three", 0), 20)
    values = [b"v-%03d" % i for i in range(300)]
    acked = produce(combined.broker_bootstrap, "one", values, key_of=lambda v: b"k%d" % (int(v[2:]) % 7))
    assert len(acked) == 300 and len({p for p, *_ in acked}) > 1
    got = consume(combined.broker_bootstrap, "one", [0, 1, 2], 300)
    assert sorted(got) == sorted(acked)
    for key in {k for *_, k, _ in acked}:  # per-key order as produced
        assert [v for *_, k, v in sorted(got) if k == key] == [v for v in values if b"k%d" % (int(v[2:]) % 7) == key]
    # RF 3 with acks=1: only the leader need have it (acks=all: test_replication_cluster.py).
    acked3 = produce(combined.broker_bootstrap, "three", [b"x%d" % i for i in range(20)], acks=1)
    assert [o for _, o, *_ in acked3] == list(range(20))
    p = partition(admin, "three", 0)
    assert len(p.replicas) == 3 and p.leader in p.replicas
    # A producer naming an unknown topic creates it (auto.create.topics.enable, num.partitions=1).
    assert "auto-made" not in admin.list_topics(timeout=5).topics
    auto = produce(combined.broker_bootstrap, "auto-made", [b"first"], acks=1)
    assert auto[0][:2] == (0, 0)
    assert len(admin.list_topics("auto-made", timeout=5).topics["auto-made"].partitions) == 1


def test_paused_broker_is_fenced_then_rejects_produce(tmp_path):
    cluster = start(tmp_path)
    try:
        x = non_leader(cluster)  # keep the Raft leader running: the point is the broker's lease
        others = ",".join(f"127.0.0.1:{cluster.broker_ports[i]}" for i in cluster.broker_ids if i != x)
        admin = AdminClient({"bootstrap.servers": others, **QUIET})
        create(admin, NewTopic("p", 1, replica_assignment=[[x]]))
        assert wait_for(lambda: (partition(admin, "p") or None) and partition(admin, "p").leader == x, 20)
        acked = produce(cluster.broker_bootstrap, "p", [b"before-%d" % i for i in range(10)])

        async def scenario():
            client = NodeClient(*cluster.broker_address(x), client_id="fence-test")
            try:
                await client.request(MetadataRequest(topics=[]), 9)  # connected before the pause
                os.kill(cluster.procs[x].pid, signal.SIGSTOP)
                try:
                    fenced = await asyncio.to_thread(
                        wait_for, lambda: x not in brokers(admin) and partition(admin, "p").leader == -1, 30)
                    assert fenced, "the controller did not fence the paused broker"
                    pending = asyncio.ensure_future(raw_produce(client, "p", 0, b"while-fenced"))
                    await asyncio.sleep(0.3)  # the request waits in the paused process's socket
                finally:
                    os.kill(cluster.procs[x].pid, signal.SIGCONT)
                return await pending
            finally:
                await client.close()

        code = run(scenario())
        assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode(code).name
        # It heartbeats again, is unfenced, leads its partition again and serves.
        assert wait_for(lambda: x in brokers(admin) and (partition(admin, "p").leader == x), 30)
        more = produce(cluster.broker_bootstrap, "p", [b"after"])
        got = consume(cluster.broker_bootstrap, "p", [0], 11)
        assert [v for *_, v in sorted(got)] == [v for *_, v in acked] + [b"after"]
        assert more[0][1] == 10  # the rejected record never reached the log
        assert cluster.unexpected_exits() == {}
    finally:
        cluster.close()


def _second_process(cluster, node_id: int, tmp_path) -> tuple[subprocess.Popen, str, int]:
    """Another broker process configured with ``node_id`` (own port and directories)."""
    props = load_properties(cluster.config_path(node_id))
    port = cluster.broker_ports[node_id] + 0
    from kraft.cli.local_cluster import free_ports

    port = free_ports(1)[0]
    data = str(tmp_path / "dup")
    props.update({"listeners": f"PLAINTEXT://127.0.0.1:{port}", "metadata.log.dir": data,
                  "log.dirs": os.path.join(data, "logs")})
    path = str(tmp_path / "dup.properties")
    with open(path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in props.items())
    format_storage(NodeConfig.from_properties(props), cluster.cluster_id, ignore_formatted=True)
    log_path = str(tmp_path / "dup.log")
    cmd = cluster.command(node_id)
    cmd[cmd.index(cluster.config_path(node_id))] = path
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=cluster.environment(),
                                cwd=cluster.directory, preexec_fn=_die_with_parent)
    return proc, log_path, port


def test_duplicate_node_id_is_refused_and_never_serves(tmp_path):
    cluster = start(tmp_path / "c", brokers=1)  # 3 combined + broker-only node 4 (an observer)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
        create(admin, NewTopic("d", 1, replica_assignment=[[4]]))
        assert wait_for(lambda: (partition(admin, "d") or None) and partition(admin, "d").leader == 4, 20)
        acked = produce(cluster.broker_bootstrap, "d", [b"a", b"b"])
        proc, log_path, port = _second_process(cluster, 4, tmp_path)
        try:
            def refused():
                with open(log_path, errors="replace") as f:
                    return "DUPLICATE_BROKER_REGISTRATION" in f.read()
            assert wait_for(refused, 30), open(log_path).read()[-3000:]

            async def ask_the_duplicate():
                client = NodeClient("127.0.0.1", port, client_id="dup-test")
                try:
                    # It follows the metadata log (once its image holds d, it says broker 4
                    # leads d-0) but it is not the registered incarnation: no write accepted.
                    for _ in range(300):
                        try:
                            md = await client.request(MetadataRequest(topics=None), 9)
                        except KraftError:  # refused until it has caught up with the metadata
                            await asyncio.sleep(0.1)
                            continue
                        if any(t.name == "d" and t.error_code == 0 for t in md.topics):
                            break
                        await asyncio.sleep(0.1)
                    else:
                        raise AssertionError("the duplicate never learned of topic d")
                    return md, await raw_produce(client, "d", 0, b"from-the-duplicate")
                finally:
                    await client.close()

            md, code = run(ask_the_duplicate())
            assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode(code).name
            assert all(b.port != port for b in md.brokers)
            listed = brokers(admin)
            assert listed[4].port == cluster.broker_ports[4]  # the first process keeps the id
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(15) == 0
        got = consume(cluster.broker_bootstrap, "d", [0], 2)
        assert [v for *_, v in got] == [v for *_, v in acked]
        more = produce(cluster.broker_bootstrap, "d", [b"c"])
        assert more[0][1] == 2
        assert cluster.unexpected_exits() == {}
    finally:
        cluster.close()


def test_sigterm_is_a_controlled_shutdown_and_restart_keeps_acknowledged_records(tmp_path):
    cluster = start(tmp_path)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
        create(admin, NewTopic("keep", 3, 1), NewTopic("moved", 1, 3))
        assert wait_for(lambda: partition(admin, "keep", 2) is not None and partition(admin, "moved"), 20)
        acked = produce(cluster.broker_bootstrap, "keep", [b"r%d" % i for i in range(150)])
        leader = partition(admin, "moved").leader
        epochs_before = len(re.findall("registered with broker epoch", log_text(cluster, leader)))
        assert cluster.stop(leader) == {leader: 0}
        text = log_text(cluster, leader)
        assert "controlled shutdown (from RUNNING)" in text
        assert "the controller moved every leadership away" in text
        others = ",".join(f"127.0.0.1:{cluster.broker_ports[i]}" for i in cluster.broker_ids if i != leader)
        admin2 = AdminClient({"bootstrap.servers": others, **QUIET})
        # The controller said should_shut_down only once it led nothing (the log line above);
        # the other brokers' images show it once they fetched that far.
        assert wait_for(lambda: partition(admin2, "moved").leader not in (leader, -1), 10)
        assert leader not in partition(admin2, "moved").isrs
        assert wait_for(lambda: leader not in brokers(admin2), 10)  # fenced as it was let go

        cluster.start(leader)
        assert wait_for(lambda: leader in brokers(admin2), 30)
        assert len(re.findall("registered with broker epoch", log_text(cluster, leader))) == epochs_before + 1
        # kill -9 another node and bring it back too: nothing acknowledged is lost.
        victim = next(i for i in cluster.broker_ids if i != leader)
        cluster.kill(victim)
        cluster.start(victim)
        assert wait_for(lambda: len(brokers(admin2)) == 3 and all(
            partition(admin2, "keep", i).leader != -1 for i in range(3)), 30)
        got = consume(cluster.broker_bootstrap, "keep", [0, 1, 2], 150)
        assert sorted(got) == sorted(acked)
        assert cluster.unexpected_exits() == {}
    finally:
        cluster.close()


def test_broker_only_nodes_follow_a_controller_quorum_as_observers(tmp_path):
    """3 controllers + 2 broker-only nodes: the brokers learn metadata only by fetching the
    metadata log as Raft observers, and keep doing so after the Raft leader is killed."""
    cluster = LocalCluster(str(tmp_path), 3, combined=False, brokers=2, overrides=SETTINGS).create()
    cluster.start()
    try:
        assert cluster.broker_ids == [4, 5]
        assert wait_for(lambda: all_see_all(cluster), 60, 0.2), cluster.unexpected_exits()
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
        create(admin, NewTopic("obs", 4, 1))
        assert wait_for(lambda: partition(admin, "obs", 3) is not None, 20)
        acked = produce(cluster.broker_bootstrap, "obs", [b"o%d" % i for i in range(50)])
        assert sorted(consume(cluster.broker_bootstrap, "obs", range(4), 50)) == sorted(acked)
        md = admin.list_topics("obs", timeout=5)
        assert {p.leader for p in md.topics["obs"].partitions.values()} == {4, 5}
        for b in (4, 5):
            assert "observing the metadata quorum" in log_text(cluster, b)
            assert not os.path.exists(os.path.join(cluster.data_dir(b), "logs", "__cluster_metadata-0"))
        leader = run(describe(cluster)).leader_id
        cluster.kill(leader)
        create(admin, NewTopic("after-failover", 2, 1))
        assert wait_for(lambda: partition(admin, "after-failover", 1) is not None
                        and partition(admin, "after-failover", 1).leader in (4, 5), 30)
        more = produce(cluster.broker_bootstrap, "after-failover", [b"x", b"y"])
        assert len(more) == 2
        assert not {i: c for i, c in cluster.unexpected_exits().items() if i != leader}
        codes = cluster.stop()  # brokers first: their controlled shutdown finds a controller
        assert {i: c for i, c in codes.items() if i != leader} == {i: 0 for i in cluster.ids if i != leader}
        for b in (4, 5):
            assert "the controller moved every leadership away" in log_text(cluster, b)
    finally:
        cluster.close()
