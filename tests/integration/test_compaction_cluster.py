"""Compaction on three real nodes: a cleanup.policy=compact topic with small segments is
compacted by the leader and both followers (each its own replica, as in Kafka); a follower
whose partition directory is wiped fetches the compacted log across its offset gaps and ends
up with the leader's bytes, batch for batch; ``kraft dump-log`` reads the cleaned segments.
(Compressed batches are covered by tests/log/test_cleaner.py: librdkafka does not compress
for a broker without FindCoordinator, issue 33.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from kraft import records
from kraft.cli.local_cluster import LocalCluster, wait_for

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.integration

SETTINGS = {
    "controller.quorum.append.linger.ms": "0",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.dedupe.buffer.size": str(1 << 20),
}
KEYS = 40


def _batches(part_dir: str, below: int) -> list[bytes]:
    """Every batch below offset ``below`` in the replica, in offset order, as bytes."""
    out = []
    for name in sorted(n for n in os.listdir(part_dir) if n.endswith(".log")):
        with open(os.path.join(part_dir, name), "rb") as f:
            data = f.read()
        for batch in records.iter_batches(data):
            if batch.base_offset < below:
                out.append(batch.tobytes())
    return out


def _records(batches) -> list:
    return [(r.offset, r.key, r.value) for b in batches for r in records.RecordBatch(b)]


def _brokers(admin) -> int:
    try:
        return len(admin.list_topics(timeout=5).brokers)
    except ck.KafkaException:  # not serving yet
        return 0


def _latest(rows) -> dict:
    return {k: (o, v) for o, k, v in rows}


def test_a_compacted_partition_replicates_to_a_wiped_follower(tmp_path):
    c = LocalCluster(str(tmp_path), 3, combined=True, overrides=SETTINGS).create()
    c.start()
    try:
        admin = AdminClient({"bootstrap.servers": c.broker_bootstrap})
        assert wait_for(lambda: _brokers(admin) == 3, 90, 0.3), c.unexpected_exits()
        configs = {"cleanup.policy": "compact", "segment.ms": "250", "min.cleanable.dirty.ratio": "0.01",
                   "min.insync.replicas": "2"}
        admin.create_topics([NewTopic("cmp", 1, 3, config=configs)])["cmp"].result(30)
        producer = Producer({"bootstrap.servers": c.broker_bootstrap, "acks": "all", "linger.ms": 5})
        sent = []
        for i in range(4000):
            key, value = f"key-{i % KEYS}".encode(), f"value-{i}-".encode() * 4
            producer.produce("cmp", value, key)
            sent.append((key, value))
            if i % 400 == 399:  # a segment per wave: segment.ms rolls on the next append
                assert producer.flush(60) == 0
                time.sleep(0.3)
        want = {}
        for key, value in sent:
            want[key] = value
        leader = admin.list_topics("cmp", timeout=30).topics["cmp"].partitions[0].leader
        dirs = {i: os.path.join(c.partition_dir(i), "cmp-0") for i in c.ids}

        def compacted(i):
            return len(_records(_batches(dirs[i], 1 << 62))) < 2000
        assert wait_for(lambda: all(compacted(i) for i in c.ids), 60, 0.5), \
            {i: len(_records(_batches(dirs[i], 1 << 62))) for i in c.ids}
        for i in c.ids:  # every replica: each key's latest value, at its original offset
            rows = _records(_batches(dirs[i], 1 << 62))
            assert {k: v for k, (_, v) in _latest(rows).items()} == want
            assert [o for o, _, _ in rows] == sorted(o for o, _, _ in rows)
        # a follower loses its replica: it fetches the compacted log again from offset 0
        follower = next(i for i in c.ids if i != leader)
        c.stop(follower)
        shutil.rmtree(dirs[follower])
        with open(c.config_path(follower), "a") as f:
            f.write("log.cleaner.threads=0\n")  # so what it holds is only what it fetched
        c.start(follower)
        leader_batches = _batches(dirs[leader], 1 << 62)
        end = max(b.base_offset + b.last_offset_delta for b in map(records.RecordBatch, leader_batches))

        def caught_up():
            return os.path.isdir(dirs[follower]) and any(
                records.RecordBatch(b).base_offset + records.RecordBatch(b).last_offset_delta >= end
                for b in _batches(dirs[follower], 1 << 62))
        assert wait_for(caught_up, 60, 0.5), c.log_tail(follower)
        clean_end = min(int(n[:20]) for n in os.listdir(dirs[leader]) if n.endswith(".log") and
                        n == sorted(x for x in os.listdir(dirs[leader]) if x.endswith(".log"))[-1])
        assert _batches(dirs[follower], clean_end) == _batches(dirs[leader], clean_end)
        assert len(_batches(dirs[leader], clean_end)) > 0
        first = sorted(n for n in os.listdir(dirs[leader]) if n.endswith(".log"))[0]
        out = subprocess.run([sys.executable, "-m", "kraft", "dump-log", os.path.join(dirs[leader], first)],
                             capture_output=True, text=True, timeout=60)
        # the cleaned segment keeps its name (the group's first base offset) over offsets that start later
        assert out.returncode == 0 and "isvalid: true" in out.stdout and "isvalid: false" not in out.stdout, \
            out.stdout[:2000] + out.stderr[-2000:]
        assert c.unexpected_exits() == {}
    finally:
        c.stop()
        c.close()
