"""``kraft pipeline audit`` (the command, in its own process) over a real 3-node quorum's
directories: metadata records committed through Raft, a leader killed halfway, every node
caught up and stopped, then read back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from kraft import records
from kraft.cli.local_cluster import LocalCluster
from kraft.client.quorum import QuorumClient, QuorumWriter
from kraft.errors import KraftError
from kraft.spark.log_tail import LogTail
from kraft.testing.metadata_history import cluster_history

# Over 60 s (a quorum, a kill, a catch-up, then the command with its own JVM): slow.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "1500",
    "controller.quorum.append.linger.ms": "2",
}


async def _client_call(cluster, fn):
    client = QuorumClient([cluster.address(i) for i in cluster.ids])
    try:
        return await fn(client)
    finally:
        await client.close()


def write(cluster, batches):
    async def go(client):
        writer = QuorumWriter(client)
        return [await writer.write_through_failures(bytearray(b), deadline_s=30) for b in batches]

    return asyncio.run(_client_call(cluster, go))


def leader(cluster):
    return asyncio.run(_client_call(cluster, lambda c: c.describe(30))).leader_id


def wait_same_end(cluster, timeout=30.0):
    tail, dirs = LogTail(), [os.path.join(cluster.data_dir(i), "__cluster_metadata-0") for i in cluster.ids]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ends = {tail.end_offset(d) for d in dirs}
        if len(ends) == 1 and None not in ends:
            return ends.pop()
        time.sleep(0.2)
    raise AssertionError(f"nodes did not converge: {[tail.end_offset(d) for d in dirs]}")


def test_audit_of_a_real_three_node_quorum(spark, tmp_path):
    history = cluster_history(brokers=3, topics=4, partitions=3)
    data = [b for _, b in history.batches if not records.RecordBatch(b, 0).is_control]
    cluster = LocalCluster(str(tmp_path / "cluster"), 3, overrides=FAST).create()
    cluster.start()
    try:
        write(cluster, data[: len(data) // 2])
        killed = leader(cluster)
        cluster.kill(killed)  # a new epoch, a new leader
        write(cluster, data[len(data) // 2:])
        cluster.start(killed)
        for _ in range(50):  # the restarted node must see the new leader's records
            try:
                leader(cluster)
                break
            except KraftError:
                time.sleep(0.1)
        wait_same_end(cluster)
        assert not cluster.unexpected_exits()
    finally:
        cluster.close()

    out = tmp_path / "audit"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "kraft", "pipeline", "audit", "--master", "local[2]",
                           str(tmp_path / "cluster" / "node-*"), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[9/9] consistency_divergent: 0 rows" in done.stdout
    assert "0 divergent offset(s), 0 at or below the high watermark" in done.stdout
    assert (out / "report.html").exists()

    rows = spark.read.format("kraft-metadata").option("history", "true").load(str(tmp_path / "cluster" / "node-*"))
    counts = {}
    for r in rows.where("error IS NULL").groupBy("node", "record_type").count().collect():
        counts.setdefault(r["node"], {})[r["record_type"]] = r["count"]
    assert set(counts) == {"node-1", "node-2", "node-3"}
    for node, per_type in counts.items():
        written = {k: per_type.get(k, 0) for k in history.counts if k != "LeaderChange"}
        assert written == {k: v for k, v in history.counts.items() if k != "LeaderChange"}, node
        assert per_type.get("LeaderChange", 0) >= 2, node  # the first election and the one after the kill
    epochs = pq.read_table(str(out / "quorum_history")).to_pylist()
    led = [e for e in epochs if e["leader"] is not None]
    assert len(led) >= 2 and led[-1]["leader"] != killed or len({e["leader"] for e in led}) >= 2
