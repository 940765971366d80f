"""Reassignment with data movement and preferred leader election between real ``kraft server
start`` processes (3 combined nodes), driven by the operator commands ``kraft
reassign-partitions`` and ``kraft leader-election`` (seed 003's reassignment; Kafka's
AlterPartitionReassignments, KIP-455). While a confluent-kafka producer writes with acks=all:
an RF-1 partition moves to another broker, and an RF-1 partition grows to RF 3. Afterwards
every acknowledged record sits at its acknowledged offset in the files of every new replica,
the old replica's directory is gone, and the producer saw no error. A reassignment to a
broker that cannot catch up is cancelled back to the original replicas; a replica removed
while its broker was down leaves that broker's disk when it comes back (deleted when its
replayed image still named it, else renamed ``-stray``, Kafka's stray handling); after a
restart the preferred replica leads again once ``leader-election --election-type preferred``
runs, or by itself with ``auto.leader.rebalance.enable``."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from kraft.cli import main as kraft_main
from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.errors import KraftError
from kraft.records import iter_batches

from .test_broker_cluster import QUIET, SETTINGS, all_see_all, create, produce

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

OVERRIDES = {**SETTINGS, "replica.fetch.backoff.ms": "100", "replica.fetch.wait.max.ms": "200",
             # the throttle test: a replication rate measured over 2 s rather than 11 s
             "replication.quota.window.num": "2",
             "replica.lag.time.max.ms": "10000",
             # The preferred-election test shows the command moving leadership back, not the timer.
             "auto.leader.rebalance.enable": "false"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(str(tmp_path_factory.mktemp("reassign")), 3, combined=True, overrides=OVERRIDES).create()
    c.start()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"brokers did not all register; {c.unexpected_exits()}"
        yield c
    finally:
        c.close()
    assert not c.unexpected_exits(), {i: c.log_tail(i) for i in c.unexpected_exits()}


def admin_of(cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})


def partition_meta(cluster, topic: str, p: int = 0):
    try:
        return admin_of(cluster).list_topics(topic, timeout=3).topics[topic].partitions[p]
    except (ck.KafkaException, KeyError):
        return None


def kraft(capsys, *args) -> tuple[int, str]:
    """A ``kraft`` command run in this process (the same code as the console script); its exit
    code and what it printed."""
    capsys.readouterr()
    code = kraft_main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


def reassignment_file(tmp_path, topic: str, replicas, p: int = 0) -> str:
    path = os.path.join(str(tmp_path), f"{topic}-{p}.json")
    with open(path, "w") as f:
        json.dump({"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": list(replicas)}]}, f)
    return path


def local_records(cluster, node: int, topic: str, p: int = 0) -> dict[int, bytes] | None:
    """offset -> value of the partition as this broker's files hold it; None without a
    directory (a torn tail being written is left out)."""
    directory = os.path.join(cluster.partition_dir(node), f"{topic}-{p}")
    if not os.path.isdir(directory):
        return None
    out = {}
    for name in sorted(glob.glob(os.path.join(directory, "*.log"))):
        try:
            with open(name, "rb") as f:
                data = f.read()
            for batch in iter_batches(data):
                for r in batch:
                    out[r.offset] = r.value
        except (OSError, KraftError):  # a batch half written right now ends the scan
            continue
    return out


def holds_all(cluster, node: int, topic: str, acked) -> bool:
    have = local_records(cluster, node, topic)
    return have is not None and all(have.get(off) == value for off, value in acked)


class BackgroundProducer:
    """confluent-kafka with acks=all writing unique values to partition 0 until stopped:
    what was acknowledged (offset, value), and every error a delivery report carried
    (librdkafka retries retriable errors itself; one that reaches the report is final)."""

    def __init__(self, cluster, topic: str):
        self.topic = topic
        self.acked: list[tuple[int, bytes]] = []
        self.errors: list = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": cluster.broker_bootstrap, "acks": "all", "linger.ms": 5,
                                   "message.timeout.ms": 60000, **QUIET})
        self._thread = threading.Thread(target=self._run, name=f"producer-{topic}", daemon=True)
        self._thread.start()

    def _done(self, err, msg):
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append((msg.offset(), msg.value()))

    def _run(self):
        i = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(self.topic, value=b"%s-%07d" % (self.topic.encode(), i), partition=0,
                                       on_delivery=self._done)
                i += 1
            except BufferError:
                pass
            self._producer.poll(0.002 if i % 20 == 0 else 0)

    def wait_acked(self, n: int, timeout: float = 60) -> bool:
        return wait_for(lambda: len(self.acked) >= n, timeout, 0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        left = self._producer.flush(90)
        assert left == 0, f"{left} records never answered"


def move_with_writes(cluster, tmp_path, capsys, topic: str, start: list, target: list):
    """Create ``topic`` on ``start``, write through the reassignment to ``target`` with the
    CLI, and return the producer once the move completed and the writes stopped."""
    create(admin_of(cluster), NewTopic(topic, 1, replica_assignment=[start]))
    assert wait_for(lambda: (m := partition_meta(cluster, topic)) is not None and m.leader == start[0], 30)
    writer = BackgroundProducer(cluster, topic)
    try:
        assert writer.wait_acked(2000), f"only {len(writer.acked)} acknowledged before the move"
        f = reassignment_file(tmp_path, topic, target)
        # --execute as the real console command, in its own process.
        run = subprocess.run([sys.executable, "-m", "kraft", "reassign-partitions", "--bootstrap-server",
                              cluster.broker_bootstrap, "--reassignment-json-file", f, "--execute"],
                             capture_output=True, text=True, timeout=60, env=cluster.environment(), check=False)
        assert run.returncode == 0, run.stderr
        assert f"Successfully started partition reassignment for {topic}-0" in run.stdout
        rollback = run.stdout.split("\n\n")[1]
        assert json.loads(rollback)["partitions"][0]["replicas"] == start  # the rollback file

        def completed():
            code, out = kraft(capsys, "reassign-partitions", "--bootstrap-server", cluster.broker_bootstrap,
                              "--reassignment-json-file", f, "--verify")
            return code == 0 and f"Reassignment of partition {topic}-0 is completed." in out
        assert wait_for(completed, 60, 0.3), "the reassignment did not complete"
        moved_at = len(writer.acked)
        assert writer.wait_acked(moved_at + 1000), "writes stopped after the move"
    finally:
        writer.stop()
    assert writer.errors == [], writer.errors[:5]
    return writer


def test_an_rf1_partition_moves_to_another_broker_with_its_data_under_acks_all_writes(cluster, tmp_path, capsys):
    writer = move_with_writes(cluster, tmp_path, capsys, "moved", [1], [2])
    meta = partition_meta(cluster, "moved")
    assert meta.replicas == [2] and meta.isrs == [2] and meta.leader == 2
    assert len({off for off, _ in writer.acked}) == len(writer.acked)  # one value per acknowledged offset
    assert holds_all(cluster, 2, "moved", writer.acked)
    # The old replica stopped and its directory went (renamed -delete, then removed).
    assert wait_for(lambda: not glob.glob(os.path.join(cluster.partition_dir(1), "moved-0*")), 30), \
        os.listdir(cluster.partition_dir(1))
    assert local_records(cluster, 3, "moved") is None


def test_a_throttled_reassignment_is_held_to_its_rate_and_verify_removes_the_throttle(cluster, tmp_path, capsys):
    from confluent_kafka.admin import ConfigResource
    admin = admin_of(cluster)
    create(admin, NewTopic("throttled", 1, replica_assignment=[[1]]))
    acked = produce(cluster.broker_bootstrap, "throttled", [b"x" * 1000] * 4000)  # 4 MB on broker 1
    f = reassignment_file(tmp_path, "throttled", [1, 2])
    code, out = kraft(capsys, "reassign-partitions", "--bootstrap-server", cluster.broker_bootstrap,
                      "--reassignment-json-file", f, "--execute", "--throttle", "100000")
    assert code == 0 and "The inter-broker throttle limit was set to 100000 B/s" in out, out
    started = time.monotonic()

    def configs(rtype, name):
        resource = ConfigResource(rtype, name)
        return {k: e.value for k, e in admin.describe_configs([resource])[resource].result(10).items()}
    assert configs("topic", "throttled")["leader.replication.throttled.replicas"] == "0:1"
    assert configs("topic", "throttled")["follower.replication.throttled.replicas"] == "0:2"
    assert configs("broker", "2")["follower.replication.throttled.rate"] == "100000"
    # Fetches of up to replica.fetch.max.bytes (1 MB) while the 2 s rate is under 100 kB/s:
    # 4 MB take several seconds; unthrottled they take well under one.
    time.sleep(1.5)
    code, out = kraft(capsys, "reassign-partitions", "--bootstrap-server", cluster.broker_bootstrap,
                      "--reassignment-json-file", f, "--verify")
    assert "Reassignment of partition throttled-0 is still in progress." in out, out
    assert "Clearing" not in out  # the throttle stays while the move runs

    def completed():
        code, out = kraft(capsys, "reassign-partitions", "--bootstrap-server", cluster.broker_bootstrap,
                          "--reassignment-json-file", f, "--verify")
        return out if "Reassignment of partition throttled-0 is completed." in out else None
    out = wait_for(completed, 90, 0.5)
    assert out and time.monotonic() - started >= 3.0, out
    assert "Clearing broker-level throttles on brokers 1,2,3" in out and "Clearing topic-level throttles" in out
    assert wait_for(lambda: configs("broker", "2")["follower.replication.throttled.rate"] == str(2**63 - 1)
                    and not configs("topic", "throttled")["leader.replication.throttled.replicas"], 10)
    assert wait_for(lambda: holds_all(cluster, 2, "throttled", [(o, v) for _, o, _, v in acked]), 30)


def test_an_rf1_partition_grows_to_rf3_and_every_replica_holds_every_acknowledged_record(cluster, tmp_path,
                                                                                          capsys):
    writer = move_with_writes(cluster, tmp_path, capsys, "grown", [1], [1, 2, 3])
    meta = partition_meta(cluster, "grown")
    assert meta.replicas == [1, 2, 3] and sorted(meta.isrs) == [1, 2, 3] and meta.leader == 1
    for node in (1, 2, 3):
        assert wait_for(lambda node=node: holds_all(cluster, node, "grown", writer.acked), 30), f"broker {node} lacks records"
    # ... and byte for byte the same log: followers append the leader's batches as fetched.
    leader = local_records(cluster, 1, "grown")
    for node in (2, 3):
        assert wait_for(lambda node=node: local_records(cluster, node, "grown") == leader, 30), node


def test_a_reassignment_that_cannot_catch_up_is_cancelled_back_to_the_original_replicas(cluster, tmp_path, capsys):
    topic = "cancelled"
    create(admin_of(cluster), NewTopic(topic, 1, replica_assignment=[[1, 2]]))
    assert wait_for(lambda: (m := partition_meta(cluster, topic)) is not None and sorted(m.isrs) == [1, 2], 30)
    before = produce(cluster.broker_bootstrap, topic, [b"b-%04d" % i for i in range(300)], acks="all", partition_=0)
    # Broker 3 is paused: it cannot fetch, so a move onto it stays in progress.
    cluster.procs[3].send_signal(signal.SIGSTOP)
    try:
        f = reassignment_file(tmp_path, topic, [1, 3])
        code, out = kraft(capsys, "reassign-partitions", "--bootstrap-server", cluster.broker_bootstrap,
                          "--reassignment-json-file", f, "--execute")
        assert code == 0, out
        code, out = kraft(capsys, "reassign-partitions", "--bootstrap-server", cluster.broker_bootstrap,
                          "--reassignment-json-file", f, "--verify")
        assert f"Reassignment of partition {topic}-0 is still in progress." in out
        code, out = kraft(capsys, "reassign-partitions", "--bootstrap-server", cluster.broker_bootstrap,
                          "--reassignment-json-file", f, "--execute")
        assert code == 1 and "Use --additional" in out, out  # one move at a time unless asked
        # target first, then the leaving one (brokers' images follow the controller's shortly)
        assert wait_for(lambda: (m := partition_meta(cluster, topic)) is not None and m.replicas == [1, 3, 2], 30)
        middle = produce(cluster.broker_bootstrap, topic, [b"m-%04d" % i for i in range(100)], acks="all",
                         partition_=0)
        code, out = kraft(capsys, "reassign-partitions", "--bootstrap-server", cluster.broker_bootstrap,
                          "--reassignment-json-file", f, "--cancel")
        assert code == 0 and f"Successfully cancelled partition reassignment(s) for: {topic}-0" in out, out
    finally:
        cluster.procs[3].send_signal(signal.SIGCONT)
    assert wait_for(lambda: partition_meta(cluster, topic).replicas == [1, 2], 30)
    code, out = kraft(capsys, "reassign-partitions", "--bootstrap-server", cluster.broker_bootstrap,
                      "--reassignment-json-file", f, "--verify")
    assert "There is no active reassignment of partition cancelled-0, but replica set is [1, 2] rather than [1, 3]" \
        in out, out
    # Broker 3 catches up on the metadata and keeps no log of the partition.
    assert wait_for(lambda: all_see_all(cluster), 60, 0.3)
    assert wait_for(lambda: not glob.glob(os.path.join(cluster.partition_dir(3), f"{topic}-0*")), 30)
    after = produce(cluster.broker_bootstrap, topic, [b"a-%04d" % i for i in range(100)], acks="all", partition_=0)
    acked = [(off, v) for _, off, _, v in before + middle + after]
    for node in (1, 2):
        assert wait_for(lambda node=node: holds_all(cluster, node, topic, acked), 30), node
    assert sorted(partition_meta(cluster, topic).isrs) == [1, 2]


def test_a_replica_removed_while_its_broker_was_down_leaves_its_disk_when_it_returns(cluster, tmp_path, capsys):
    topic = "stray"
    create(admin_of(cluster), NewTopic(topic, 1, replica_assignment=[[1, 2]]))
    assert wait_for(lambda: (m := partition_meta(cluster, topic)) is not None and sorted(m.isrs) == [1, 2], 30)
    acked = [(off, v) for _, off, _, v in produce(cluster.broker_bootstrap, topic,
                                                  [b"s-%04d" % i for i in range(300)], acks="all", partition_=0)]
    assert wait_for(lambda: holds_all(cluster, 2, topic, acked), 30)
    cluster.stop(2)
    try:
        f = reassignment_file(tmp_path, topic, [1, 3])
        code, out = kraft(capsys, "reassign-partitions", "--bootstrap-server", cluster.broker_bootstrap,
                          "--reassignment-json-file", f, "--execute")
        assert code == 0, out
        assert wait_for(lambda: partition_meta(cluster, topic).replicas == [1, 3], 60)
    finally:
        cluster.start(2)
    assert wait_for(lambda: all_see_all(cluster), 60, 0.3)
    here = os.path.join(cluster.partition_dir(2), f"{topic}-0")
    assert wait_for(lambda: not os.path.exists(here), 30), "the removed replica's log is still live"
    # Either it saw the change as a delta (renamed -delete, then removed) or only on its first
    # image (Kafka's -stray, kept for the operator).
    assert wait_for(lambda: not glob.glob(here + ".*-delete"), 30)
    leftovers = glob.glob(here + ".*")
    assert all(p.endswith("-stray") for p in leftovers), leftovers
    assert holds_all(cluster, 3, topic, acked) and holds_all(cluster, 1, topic, acked)


def test_preferred_leader_election_moves_leadership_back_after_a_restart(cluster, capsys):
    topic = "preferred"
    create(admin_of(cluster), NewTopic(topic, 1, replica_assignment=[[1, 2, 3]]))
    assert wait_for(lambda: (m := partition_meta(cluster, topic)) is not None and sorted(m.isrs) == [1, 2, 3], 30)
    acked = produce(cluster.broker_bootstrap, topic, [b"p-%04d" % i for i in range(200)], acks="all", partition_=0)
    cluster.stop(1)  # controlled shutdown: leadership moves to another ISR member
    assert wait_for(lambda: (m := partition_meta(cluster, topic)) is not None and m.leader in (2, 3), 30)
    cluster.start(1)
    assert wait_for(lambda: all_see_all(cluster), 60, 0.3)
    assert wait_for(lambda: sorted(partition_meta(cluster, topic).isrs) == [1, 2, 3], 60), "broker 1 did not rejoin"
    assert partition_meta(cluster, topic).leader in (2, 3)  # auto rebalance is off: nothing moved it yet

    args = ("leader-election", "--bootstrap-server", cluster.broker_bootstrap, "--election-type", "preferred")
    code, out = kraft(capsys, *args, "--topic", topic, "--partition", "0")
    assert code == 0 and f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" in out, out
    assert wait_for(lambda: partition_meta(cluster, topic).leader == 1, 30)
    code, out = kraft(capsys, *args, "--topic", topic, "--partition", "0")
    assert code == 0 and f"Valid replica already elected for partitions {topic}-0" in out, out
    code, out = kraft(capsys, *args, "--topic", "no-such-topic", "--partition", "0")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in out, out

    more = produce(cluster.broker_bootstrap, topic, [b"q-%04d" % i for i in range(200)], acks="all", partition_=0)
    everything = [(off, v) for _, off, _, v in acked + more]
    for node in (1, 2, 3):
        assert wait_for(lambda node=node: holds_all(cluster, node, topic, everything), 30), node


def test_auto_leader_rebalance_moves_leadership_back_by_itself(tmp_path):
    """``auto.leader.rebalance.enable`` (Kafka's default): every
    ``leader.imbalance.check.interval.seconds`` the active controller runs preferred elections
    for brokers over ``leader.imbalance.per.broker.percentage``, with no command."""
    c = LocalCluster(str(tmp_path), 3, combined=True, overrides={
        **OVERRIDES, "auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "1"}).create()
    c.start()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"brokers did not all register; {c.unexpected_exits()}"
        create(admin_of(c), NewTopic("auto", 1, replica_assignment=[[1, 2, 3]]))
        assert wait_for(lambda: (m := partition_meta(c, "auto")) is not None and sorted(m.isrs) == [1, 2, 3], 30)
        acked = produce(c.broker_bootstrap, "auto", [b"r-%04d" % i for i in range(100)], acks="all", partition_=0)
        c.stop(1)
        assert wait_for(lambda: (m := partition_meta(c, "auto")) is not None and m.leader in (2, 3), 30)
        c.start(1)
        assert wait_for(lambda: (m := partition_meta(c, "auto")) is not None and m.leader == 1
                        and sorted(m.isrs) == [1, 2, 3], 90), "leadership did not come back to broker 1"
        everything = [(off, v) for _, off, _, v in acked]
        assert holds_all(c, 1, "auto", everything)
        assert not c.unexpected_exits(), {i: c.log_tail(i) for i in c.unexpected_exits()}
    finally:
        c.close()
