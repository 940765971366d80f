"""Restarts of a whole cluster with a long metadata log, as an operator does them: 3 combined
nodes and a broker-only node, 250 topics of 4 partitions (RF 3) so the metadata log holds
thousands of records, once with the whole log and once with a snapshot plus a log suffix.

Every acknowledged (acks=all) record must come back after a whole-cluster SIGTERM, a
whole-cluster SIGKILL (page cache kept: what was written survives), a single SIGKILL (the
node keeps its replicas on disk and catches up from where it was), and a rolling restart
under load; no partition directory may be renamed ``-stray`` or recreated. The bug this
guards against: a restarted broker acted on the first chunk of the metadata log, took every
partition of a topic not yet replayed for a stray and recreated it empty."""

from __future__ import annotations

import os
import signal

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.log.replicated_log import METADATA_DIR

from .restart_helpers import (QUIET, BackgroundProducer, missing_on_disk, partition_dirs, segment_records,
                              strays)

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

SETTINGS = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "1500",
    "controller.quorum.append.linger.ms": "0",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "5000",
}
WHOLE_LOG = {**SETTINGS, "metadata.log.max.record.bytes.between.snapshots": str(1 << 30)}
# A snapshot every ~64 KB of records, small segments and no retention beyond the snapshot:
# a restart loads the latest snapshot, then the log after it.
SNAPSHOTS = {**SETTINGS, "metadata.log.max.record.bytes.between.snapshots": "65536",
             "metadata.log.segment.bytes": "131072", "metadata.max.retention.bytes": "1"}
FILLER_TOPICS, FILLER_PARTITIONS = 250, 4
TOPIC, PARTITIONS = "keep", 6


class Restarts:
    def __init__(self, cluster: LocalCluster, snapshots: bool):
        self.cluster, self.snapshots = cluster, snapshots
        self.acked: list = []  # (partition, offset, value) of every acknowledged write
        self.dirs_before: dict = {}
        self.topics = 0  # how many topics the cluster must show

    @property
    def bootstrap(self) -> str:
        return self.cluster.broker_bootstrap

    def admin(self):
        return AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})

    def produce(self, count: int, tag: str) -> None:
        out, errors = [], []
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5, **QUIET})

        def done(err, msg):
            (errors.append(err) if err is not None else out.append((msg.partition(), msg.offset(), msg.value())))
        for i in range(count):
            producer.produce(TOPIC, value=f"{tag}-{i}".encode(), on_delivery=done)
            producer.poll(0)
        assert producer.flush(60) == 0 and not errors, errors[:3]
        self.acked += out

    def metadata(self):
        try:
            return self.admin().list_topics(timeout=5)
        except ck.KafkaException:
            return None

    def healthy(self) -> bool:
        """Every broker registered, every partition led with a full ISR."""
        md = self.metadata()
        if md is None or sorted(md.brokers) != sorted(self.cluster.broker_ids):
            return False
        topics = [t for t in md.topics.values() if not t.topic.startswith("__")]
        if len(topics) < self.topics:
            return False
        return all(p.leader >= 0 and len(p.isrs) == 3 for t in topics for p in t.partitions.values())

    def wait_healthy(self, timeout: float = 120) -> None:
        assert wait_for(self.healthy, timeout, 0.5), (f"not healthy {timeout} s after the restart; "
                                                      f"exits {self.cluster.unexpected_exits()}")

    def in_sync(self) -> dict:
        """partition -> its ISR, once every replica of every partition is in it again (a
        follower may lag for a while after a burst of writes: it need not hold them yet)."""
        self.wait_healthy()
        md = self.metadata()
        return {p: list(m.isrs) for p, m in md.topics[TOPIC].partitions.items()}

    def layout(self) -> dict:
        """(node, topic, partition) -> inode of its directory: a recreated log gets a new one."""
        return {(i, *tp): os.stat(path).st_ino for i in self.cluster.broker_ids
                for tp, path in partition_dirs(self.cluster, i).items()}

    def read_back(self) -> dict:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "restart-check",
                             "enable.auto.commit": False, **QUIET})
        try:
            consumer.assign([TopicPartition(TOPIC, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
            want = {(p, o) for p, o, _ in self.acked}
            got = {}
            wait_for(lambda: _drain(consumer, got) >= want, 60, 0)
            return got
        finally:
            consumer.close()

    def check_everything_is_back(self) -> None:
        """After a restart: read back through the brokers, nothing renamed, nothing recreated."""
        got = self.read_back()
        lost = [(p, o) for p, o, v in self.acked if got.get((p, o)) != v]
        assert not lost, f"{len(lost)} of {len(self.acked)} acknowledged records lost, e.g. {lost[:5]}"
        assert strays(self.cluster) == []
        after = self.layout()
        recreated = [k for k, ino in self.dirs_before.items() if after.get(k) != ino]
        assert not recreated, f"{len(recreated)} partition logs deleted or recreated, e.g. {recreated[:5]}"

    def check_disks(self, replicas: dict) -> None:
        """With the cluster down: every replica's segment files hold every acknowledged record."""
        missing = missing_on_disk(self.cluster, TOPIC, self.acked, replicas)
        assert not missing, f"{len(missing)} acknowledged records missing on disk, e.g. {missing[:5]}"

    def snapshots_on_every_controller(self) -> bool:
        return all(any(f.endswith(".checkpoint") for f in os.listdir(
            os.path.join(self.cluster.data_dir(i), METADATA_DIR))) for i in self.cluster.controller_ids)

    def create_topics(self, names: list) -> None:
        admin = self.admin()
        futures = admin.create_topics([NewTopic(n, FILLER_PARTITIONS, 3) for n in names], operation_timeout=60)
        for fut in futures.values():
            fut.result(90)
        self.topics += len(names)


def _drain(consumer, got: dict) -> set:
    for m in consumer.consume(5000, 0.5):
        if m.error() is None:
            got[(m.partition(), m.offset())] = m.value()
    return set(got)


@pytest.fixture(scope="module", params=["whole-log", "snapshot+suffix"])
def restarts(request, tmp_path_factory):
    snapshots = request.param == "snapshot+suffix"
    cluster = LocalCluster(str(tmp_path_factory.mktemp(request.param)), 3, combined=True, brokers=1,
                           overrides=SNAPSHOTS if snapshots else WHOLE_LOG).create()
    cluster.start()
    r = Restarts(cluster, snapshots)
    try:
        assert wait_for(lambda: (md := r.metadata()) is not None and len(md.brokers) == 4, 90, 0.5), \
            f"brokers did not register; exits {cluster.unexpected_exits()}"
        admin = r.admin()  # kept alive until its futures are done
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
        r.topics = 1
        r.create_topics([f"f{i:03d}" for i in range(FILLER_TOPICS)])
        if snapshots:
            # Voters take turns of 10 s to snapshot (snapshot_schedule): up to three turns. The
            # topics created after it are the log suffix a restart replays on top of it.
            assert wait_for(r.snapshots_on_every_controller, 60, 0.5), "no metadata snapshot on some controller"
            r.create_topics([f"g{i:03d}" for i in range(25)])
        r.wait_healthy()
        assert r.snapshots_on_every_controller() == snapshots
        r.produce(2000, "first")
        r.dirs_before = r.layout()
        yield r
        assert cluster.unexpected_exits() == {}
    finally:
        cluster.close()


def test_whole_cluster_sigterm_restart_keeps_every_acknowledged_record(restarts):
    r = restarts
    replicas = r.in_sync()
    codes = r.cluster.stop()
    assert set(codes.values()) == {0}, codes
    r.check_disks(replicas)
    r.cluster.start()
    r.wait_healthy()
    r.check_everything_is_back()
    r.produce(500, "after-term")


def test_whole_cluster_sigkill_at_once_keeps_every_acknowledged_record(restarts):
    r = restarts
    r.produce(1000, "before-kill")
    replicas = r.in_sync()
    r.cluster.signal_all(signal.SIGKILL)
    r.check_disks(replicas)
    r.cluster.start()
    r.wait_healthy()
    r.check_everything_is_back()


@pytest.mark.parametrize("restarts", ["snapshot+suffix"], indirect=True)
def test_a_killed_node_keeps_its_replicas_and_catches_up_from_where_it_was(restarts):
    r = restarts
    victim = 2
    before = {tp: segment_records(path) for tp, path in partition_dirs(r.cluster, victim).items() if tp[0] == TOPIC}
    r.cluster.kill(victim)
    r.produce(1000, "while-down")  # min.insync.replicas=2: the other two acknowledge
    r.cluster.start(victim)
    r.wait_healthy()
    r.check_everything_is_back()  # its directories are the same ones (same inodes)
    r.cluster.stop(victim)
    after = {tp: segment_records(path) for tp, path in partition_dirs(r.cluster, victim).items() if tp[0] == TOPIC}
    for tp, records in before.items():
        assert all(after[tp].get(o) == v for o, v in records.items()), f"{tp}: records it had were lost"
    mine = [(p, o, v) for p, o, v in r.acked if (TOPIC, p) in after]
    assert all(after[(TOPIC, p)].get(o) == v for p, o, v in mine), "it did not catch up"
    r.cluster.start(victim)
    r.wait_healthy()


@pytest.mark.parametrize("restarts", ["snapshot+suffix"], indirect=True)
def test_rolling_restart_under_load_loses_nothing(restarts):
    r = restarts
    load = BackgroundProducer(r.bootstrap, TOPIC, rate=150).start()
    try:
        for node in r.cluster.ids:
            codes = r.cluster.stop(node, timeout=30)
            assert codes == {node: 0}, codes
            r.cluster.start(node)
            r.wait_healthy()
    finally:
        acked = load.stop()
    assert len(acked) > 500, f"only {len(acked)} writes acknowledged during the rolling restart"
    r.acked += acked
    r.check_everything_is_back()
