"""JBOD on real ``kraft server start`` processes: 3 combined nodes, two ``log.dirs`` each, a
topic of RF 3 whose partitions land in both directories of every broker, confluent-kafka
producing with acks=all. One directory of one broker (not the active controller) fails under
load (KIP-858): it is replaced by a file, so the broker's next write there fails (the offset
checkpoint, every 300 ms here) even when the test runs as root (``chmod 000`` would not stop
root). Then its partitions' leadership and ISR membership move to the other brokers, while the
broker keeps leading and replicating the partitions of its healthy directory; ``kraft log-dirs``
shows the failed directory with KafkaStorageException; every acknowledged record is read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.metadata.records import PartitionChangeRecord

from .quorum_helpers import describe, run
from .test_broker_cluster import QUIET, SETTINGS, all_see_all, create
from .test_leader_failover import metadata_records

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

TOPIC = "jbod"
PARTITIONS = 8


def _view(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    try:
        t = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
    except (ck.KafkaException, KeyError):
        return {}
    return {p: (m.leader, sorted(m.isrs)) for p, m in t.partitions.items()}


def _assigned(cluster, node: int) -> int:
    """How many (partition, broker) replicas the metadata log shows assigned to a directory."""
    seen = set()
    for r in metadata_records(cluster, node):
        if isinstance(r, PartitionChangeRecord) and r.directories:
            seen.update((r.partition_id, i) for i, d in enumerate(r.directories) if d.int > 100)
    return len(seen)


def test_a_failed_log_directory_moves_only_its_partitions_and_loses_no_acked_record(tmp_path):
    c = LocalCluster(str(tmp_path), 3, combined=True, log_dirs=2,
                     overrides={**SETTINGS, "auto.leader.rebalance.enable": "false",
                                "log.flush.offset.checkpoint.interval.ms": "300"}).create()
    c.start()
    acked, errors, stop = [], [], threading.Event()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"brokers did not register; {c.unexpected_exits()}"
        active = run(describe(c)).leader_id
        victim = next(i for i in c.ids if i != active)
        admin = AdminClient({"bootstrap.servers": c.broker_bootstrap, **QUIET})
        # The victim first in every replica list: it leads every partition, so moves are visible.
        others = [i for i in c.ids if i != victim]
        create(admin, NewTopic(TOPIC, num_partitions=PARTITIONS,
                               replica_assignment=[[victim, *others] if p % 2 else [victim, *others[::-1]]
                                                   for p in range(PARTITIONS)]))
        assert wait_for(lambda: (lambda v: len(v) == PARTITIONS and all(len(i) == 3 for _, i in v.values()))(
            _view(c)), 30, 0.2), "the topic's ISRs did not fill"
        # Every replica's log is made and its directory known to the controller (a new topic's
        # ISR is full from the start, before any log exists).
        assert wait_for(lambda: _assigned(c, active) >= PARTITIONS * 3, 20, 0.2), "directories were not assigned"
        failing = c.partition_dirs(victim)[1]
        in_failing = {int(n.rsplit("-", 1)[1]) for n in os.listdir(failing) if n.startswith(TOPIC + "-")}
        in_healthy = set(range(PARTITIONS)) - in_failing
        assert in_failing and in_healthy, "placement did not use both directories"


        def produce():
            p = Producer({"bootstrap.servers": c.broker_bootstrap, "acks": "all", "linger.ms": 2,
                          "enable.idempotence": True, **QUIET})
            n = 0

            def done(err, msg):
                if err is None:
                    acked.append((msg.partition(), msg.offset(), msg.value()))
                else:
                    errors.append(err)
            while not stop.is_set():
                for part in range(PARTITIONS):
                    try:
                        p.produce(TOPIC, value=b"v%d" % n, partition=part, on_delivery=done)
                    except BufferError:  # the local queue is full: let deliveries drain
                        p.poll(0.1)
                        continue
                    n += 1
                p.poll(0.005)
            p.flush(20)
        t = threading.Thread(target=produce)
        t.start()
        time.sleep(1.0)
        before = len(acked)
        os.rename(failing, failing + ".failed")  # the disk "goes away"; a file takes its name
        with open(failing, "w") as f:
            f.write("not a directory\n")

        seen = []

        def moved():
            v = _view(c)
            seen.append((time.monotonic(), v))
            return len(v) == PARTITIONS and all(v[p][0] != victim and victim not in v[p][1] for p in in_failing) \
                and all(v[p] == (victim, [1, 2, 3]) for p in in_healthy)
        assert wait_for(moved, 20, 0.2), f"leadership did not move off the failed directory: {seen[-3:]} {in_failing}"
        # The victim keeps serving its healthy directory's partitions under load.
        time.sleep(1.0)
        stop.set()
        t.join(30)
        assert c.unexpected_exits() == {}, "a node stopped"
        after = {p for p, _, _ in acked[before:]}
        assert after == set(range(PARTITIONS)), f"partitions without acked writes after the failure: {after}"

        out = subprocess.run([sys.executable, "-m", "kraft", "log-dirs", "--bootstrap-server", c.broker_bootstrap,
                              "--describe", "--broker-list", str(victim), "--topic-list", TOPIC],
                             capture_output=True, text=True, timeout=30, env=c.environment())
        doc = json.loads(out.stdout.strip().splitlines()[-1])
        dirs = {d["logDir"]: d for d in doc["brokers"][0]["logDirs"]}
        assert dirs[failing]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
        healthy = dirs[c.partition_dirs(victim)[0]]
        assert healthy["error"] is None
        assert {int(p["partition"].rsplit("-", 1)[1]) for p in healthy["partitions"]} == in_healthy

        # Every acknowledged record is there, at its offset.
        cons = Consumer({"bootstrap.servers": c.broker_bootstrap, "group.id": "jbod-check",
                         "enable.auto.commit": False, **QUIET})
        cons.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        want = {(p, o): v for p, o, v in acked}
        got = {}
        deadline = time.monotonic() + 30
        while len(got) < len(want) and time.monotonic() < deadline:
            for m in cons.consume(1000, 1.0):
                if m.error() is None:
                    got[(m.partition(), m.offset())] = m.value()
        cons.close()
        missing = [k for k, v in want.items() if got.get(k) != v]
        assert not missing, f"{len(missing)} of {len(want)} acknowledged records lost or changed: {missing[:5]}"
    finally:
        stop.set()
        c.close()


def _disk_bytes(directory: str) -> bytes:
    return b"".join(open(os.path.join(directory, n), "rb").read() for n in sorted(os.listdir(directory))
                    if n.endswith(".log"))


def test_reassign_partitions_log_dirs_moves_a_replica_online_with_equal_bytes(tmp_path):
    c = LocalCluster(str(tmp_path), 3, combined=True, log_dirs=2,
                     overrides={**SETTINGS, "log.segment.bytes": "65536"}).create()
    c.start()
    stop = threading.Event()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"brokers did not register; {c.unexpected_exits()}"
        admin = AdminClient({"bootstrap.servers": c.broker_bootstrap, **QUIET})
        create(admin, NewTopic("moving", num_partitions=1, replica_assignment=[[1, 2, 3]]))
        mover = 2  # a follower: its copy must also keep fetching from the leader while it moves
        src = next(d for d in c.partition_dirs(mover) if os.path.isdir(os.path.join(d, "moving-0"))) \
            if wait_for(lambda: any(os.path.isdir(os.path.join(d, "moving-0")) for d in c.partition_dirs(mover)),
                        20, 0.1) else None
        assert src is not None, "the replica was not created"
        dst = next(d for d in c.partition_dirs(mover) if d != src)
        acked = []

        def produce():
            p = Producer({"bootstrap.servers": c.broker_bootstrap, "acks": "all", "linger.ms": 5, **QUIET})
            n = 0
            while not stop.is_set():
                try:
                    p.produce("moving", value=b"m%06d" % n + b"x" * 200,
                              on_delivery=lambda e, m: e is None and acked.append(m.offset()))
                    n += 1
                except BufferError:
                    p.poll(0.05)
                if n % 200 == 0:
                    p.poll(0.01)
            p.flush(20)
        t = threading.Thread(target=produce)
        t.start()
        assert wait_for(lambda: len(acked) > 3000, 30, 0.1), "the producer did not get going"
        plan = tmp_path / "move.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "moving", "partition": 0, "replicas": [1, 2, 3], "log_dirs": ["any", dst, "any"]}]}))

        def tool(action):
            return subprocess.run([sys.executable, "-m", "kraft", "reassign-partitions", "--bootstrap-server",
                                   c.broker_bootstrap, "--reassignment-json-file", str(plan), action],
                                  capture_output=True, text=True, timeout=60, env=c.environment())
        out = tool("--execute")
        assert out.returncode == 0, out.stderr
        assert "Successfully started log directory move for: moving-0-2" in out.stdout
        assert wait_for(lambda: "Reassignment of replica moving-0-2 completed successfully." in tool("--verify").stdout,
                        30, 0.3), tool("--verify").stdout
        time.sleep(0.5)  # the moved replica keeps following under load
        stop.set()
        t.join(30)
        assert not os.path.exists(os.path.join(src, "moving-0"))
        moved = os.path.join(dst, "moving-0")
        leader = next(os.path.join(d, "moving-0") for d in c.partition_dirs(1)
                      if os.path.isdir(os.path.join(d, "moving-0")))
        # Once the follower has caught up, its bytes are the leader's, batch for batch.
        assert wait_for(lambda: _disk_bytes(moved) == _disk_bytes(leader), 20, 0.2), "the moved replica differs"
        assert len(_disk_bytes(moved)) > 500_000 and len(os.listdir(moved)) > 6  # several segments moved
        assert c.unexpected_exits() == {}
    finally:
        stop.set()
        c.close()
