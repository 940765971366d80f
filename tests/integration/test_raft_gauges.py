"""The Raft gauges of a real node's /metrics (epoch, leader, is-leader, high watermark, log
end) are read from the core when the page is rendered, not set on every drain: after writes
and a leader change, every node's page shows the current values, and the controller and
connection gauges chained to the same render hook are still there."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request

import pytest

from kraft.cli.local_cluster import LocalCluster
from kraft.client.quorum import QuorumClient, QuorumWriter
from kraft.records import build_batch

pytestmark = pytest.mark.integration

_SAMPLE = re.compile(r"^(kraft_[a-z_]+)(?:\{[^}]*\})? (\S+)$", re.M)


def scrape(cluster, node_id) -> dict:
    """The node's samples; empty while it does not answer yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_ports[node_id]}/metrics", timeout=5) as r:
            return {k: float(v) for k, v in _SAMPLE.findall(r.read().decode())}
    except OSError:
        return {}


def wait_for(predicate, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def test_raft_gauges_show_the_current_state_when_scraped(tmp_path):
    cluster = LocalCluster(str(tmp_path / "c"), 3, metrics=True).create()  # Kafka's timeouts: steady under load
    cluster.start()
    try:
        def one_leader():
            # every node names the same leader in the same epoch, and only that one leads
            pages = {i: scrape(cluster, i) for i in cluster.ids}
            leaders = [i for i, m in pages.items() if m.get("kraft_is_leader") == 1]
            if len(leaders) != 1:
                return None
            epoch = pages[leaders[0]].get("kraft_current_epoch")
            agree = all(m.get("kraft_current_leader") == leaders[0] and m.get("kraft_current_epoch") == epoch
                        for m in pages.values())
            return (leaders[0], pages) if agree else None

        found = wait_for(one_leader)
        assert found, {i: scrape(cluster, i) for i in cluster.ids}
        leader, pages = found
        epoch = pages[leader]["kraft_current_epoch"]
        assert "kraft_controller_active_controller_count" in pages[leader]  # chained hooks still run

        async def write(n):
            client = QuorumClient([cluster.address(i) for i in cluster.ids])
            try:
                writer = QuorumWriter(client)  # follows the leader if it moved meanwhile
                for _ in range(n):
                    await writer.write(build_batch([b"v" * 64]))
            finally:
                await client.close()
        asyncio.run(write(20))
        end = max(scrape(cluster, i).get("kraft_log_end_offset", -1) for i in cluster.ids)
        assert end >= 20 and wait_for(lambda: all(scrape(cluster, i).get("kraft_high_watermark", -1) >= end - 1
                                                  for i in cluster.ids))

        found = wait_for(one_leader)  # whoever leads now (it may have moved under load)
        assert found
        leader, pages = found
        epoch = pages[leader]["kraft_current_epoch"]
        cluster.stop(leader)
        survivors = [i for i in cluster.ids if i != leader]

        def new_leader():
            pages = {i: scrape(cluster, i) for i in survivors}
            led = [i for i, m in pages.items() if m.get("kraft_is_leader") == 1]
            if len(led) == 1 and all(m.get("kraft_current_leader") == led[0] and m.get("kraft_current_epoch", 0) > epoch
                                     for m in pages.values()):
                return led[0]
            return None
        assert wait_for(new_leader) in survivors
    finally:
        cluster.stop()
