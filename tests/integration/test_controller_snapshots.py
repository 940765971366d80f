"""Snapshots of the controller's image on real processes: with a small snapshot threshold the
voters write Kafka snapshot files holding the image (written off the loop thread), the log
below them is deleted, and a controller whose disk was wiped catches up from a snapshot and
ends with the same image as the others (digests from the metrics endpoint)."""

from __future__ import annotations

import asyncio
import os

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.client.controller_client import ControllerClient, SimulatedBroker
from kraft.log.replicated_log import METADATA_DIR
from kraft.log.snapshot import SnapshotFileReader
from kraft.metadata.snapshot_image import load_image
from kraft.types import OffsetAndEpoch

from .test_controller_cluster import SETTINGS, active, agree, eventually, gauges

pytestmark = pytest.mark.integration

SNAPSHOTS = dict(SETTINGS, **{"metadata.log.max.record.bytes.between.snapshots": "8192",
                              "metadata.log.segment.bytes": "16384", "metadata.max.retention.bytes": "1"})


def _snapshots(cluster, node_id) -> list[str]:
    meta_dir = os.path.join(cluster.data_dir(node_id), METADATA_DIR)
    return sorted(f for f in os.listdir(meta_dir) if f.endswith(".checkpoint"))


def _log_start_moved(cluster, node_id) -> bool:
    meta_dir = os.path.join(cluster.data_dir(node_id), METADATA_DIR)
    return not os.path.exists(os.path.join(meta_dir, "00000000000000000000.log"))


def _snapshot_image(cluster, node_id, name):
    offset, epoch = (int(x) for x in name[:-len(".checkpoint")].split("-"))
    with SnapshotFileReader(os.path.join(cluster.data_dir(node_id), METADATA_DIR), OffsetAndEpoch(offset, epoch)) as r:
        return load_image(r.batches()).image


def test_wiped_controller_catches_up_from_an_image_snapshot(tmp_path):
    cluster = LocalCluster(str(tmp_path / "c"), 3, overrides=SNAPSHOTS, metrics=True).create()
    cluster.start()

    async def create(client, prefix, count, start=0):
        for k in range(start, start + count, 10):
            resp = await client.create_topics([(f"{prefix}-{i}", 4, 1) for i in range(k, k + 10)])
            assert [t.error_code for t in resp.topics] == [0] * 10, resp

    async def main():
        client = ControllerClient([cluster.address(i) for i in cluster.ids])
        broker = SimulatedBroker(client, 1, cluster.cluster_id, heartbeat_interval_s=0.5)
        try:
            await broker.register()
            broker.start()
            assert await eventually(lambda: not broker.fenced, 30)
            await create(client, "before", 60)
            leader = await eventually(lambda: active(cluster, cluster.ids))
            victim = next(i for i in cluster.ids if i != leader)
            cluster.stop(victim)
            cluster.wipe(victim)
            await create(client, "while-down", 40)
            # A log start moves past offset 0 only once a node holds two snapshots (Kafka's
            # retention keeps the log from the older one): until the leader's has, a wiped node
            # would catch up from the log, not from a snapshot. Write until it has.
            created = 40
            while not _log_start_moved(cluster, await eventually(lambda: active(cluster, cluster.ids))):
                assert created < 200, "the leader never moved its log start past a snapshot"
                await create(client, "while-down", 10, start=created)
                created += 10
            cluster.start(victim)
            await create(client, "after", 10)
            topics = 60 + created + 10
            g = await eventually(lambda: agree(cluster, cluster.ids, global_topic_count=topics,
                                               global_partition_count=4 * topics), 60)
            assert g, [gauges(cluster, i) for i in cluster.ids]
            return victim
        finally:
            await broker.stop()
            await client.close()

    try:
        victim = asyncio.run(asyncio.wait_for(main(), 180))
        assert cluster.unexpected_exits() == {}
        for i in cluster.ids:
            # A node that is due writes its snapshot off the loop thread: give it the time.
            names = asyncio.run(eventually(lambda i=i: _snapshots(cluster, i), 30))
            assert names, f"node {i} wrote or installed no snapshot"
            image = _snapshot_image(cluster, i, names[-1])
            # The snapshot holds the image as Kafka's records, not an opaque state
            assert image.topics.by_name and all(n.startswith(("before", "while-down", "after"))
                                                for n in image.topics.by_name)
        assert _snapshots(cluster, victim), "the wiped node should have installed a snapshot"
    finally:
        cluster.close()
