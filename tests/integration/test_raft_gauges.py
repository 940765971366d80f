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

from kraft.cli.local_cluster import LOW_LATENCY, LocalCluster
from kraft.client.quorum import QuorumClient
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
    cluster = LocalCluster(str(tmp_path / "c"), 3, overrides=LOW_LATENCY, metrics=True).create()
    cluster.start()
    try:
        def one_leader():
            pages = {i: scrape(cluster, i) for i in cluster.ids}
            leaders = [i for i, m in pages.items() if m.get("kraft_is_leader") == 1]
            return (leaders[0], pages) if len(leaders) == 1 else None

        leader, pages = wait_for(one_leader)
        epoch = pages[leader]["kraft_current_epoch"]
        assert all(m["kraft_current_leader"] == leader and m["kraft_current_epoch"] == epoch for m in pages.values())
        assert "kraft_controller_active_controller_count" in pages[leader]  # chained hooks still run

        async def write(n):
            client = QuorumClient([cluster.address(i) for i in cluster.ids])
            try:
                for _ in range(n):
                    await client.produce(cluster.address(leader), build_batch([b"v" * 64]))
            finally:
                await client.close()
        asyncio.run(write(20))
        end = scrape(cluster, leader)["kraft_log_end_offset"]
        assert end >= 20 and wait_for(lambda: all(scrape(cluster, i).get("kraft_high_watermark", -1) >= end - 1
                                                  for i in cluster.ids))

        cluster.stop(leader)
        survivors = [i for i in cluster.ids if i != leader]

        def new_leader():
            pages = {i: scrape(cluster, i) for i in survivors}
            led = [i for i, m in pages.items() if m.get("kraft_is_leader") == 1]
            if len(led) == 1 and all(m["kraft_current_leader"] == led[0] and m["kraft_current_epoch"] > epoch
                                     for m in pages.values()):
                return led[0]
            return None
        assert wait_for(new_leader) in survivors
    finally:
        cluster.stop()
