"""A request a broker forwards to the active controller is answered by the next controller when
the active one is paused (SIGSTOP: its connections stay open and silent, unlike a killed node's).
The broker follows its Raft's view of the leader: a forwarded request waiting on the old one is
sent again to the new one rather than held for its whole timeout (a CI run of the reassignment
tests waited 3 × 35 s with the active controller paused). 3 combined nodes."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.client.partition_admin import PartitionAdmin
from kraft.protocol import CreateTopicsRequest

from .quorum_helpers import describe, run
from .test_dead_broker_fencing import SETTINGS, listed

pytestmark = pytest.mark.integration

#: election timeout 300 ms: a new leader within ~1 s of the pause; the requests' own timeout is 30 s
ANSWER_BOUND_S = 10.0


async def _list_and_create(bootstrap: str):
    admin = PartitionAdmin(bootstrap, timeout_s=30.0)
    try:
        began = time.monotonic()
        listing = await admin.ongoing()
        listed_after = time.monotonic() - began
        T = CreateTopicsRequest.Topic
        began = time.monotonic()
        created = await admin._call(CreateTopicsRequest(topics=[T(name="after-pause", num_partitions=3,
                                                                  replication_factor=2)], timeout_ms=30_000), 7)
        return listing, listed_after, created, time.monotonic() - began
    finally:
        await admin.close()


def test_forwarded_requests_reach_the_new_controller_when_the_active_one_is_paused(tmp_path):
    cluster = LocalCluster(str(tmp_path / "c"), 3, combined=True, overrides=SETTINGS).create()
    cluster.start()
    paused = None
    try:
        assert wait_for(lambda: listed(cluster, 1) == set(cluster.ids), 60, 0.2)
        paused = run(describe(cluster)).leader_id
        asked = next(i for i in cluster.ids if i != paused)
        cluster.procs[paused].send_signal(signal.SIGSTOP)
        host, port = cluster.broker_address(asked)
        listing, list_s, created, create_s = asyncio.run(_list_and_create(f"{host}:{port}"))
        assert listing.error_code == 0, listing
        assert list_s < ANSWER_BOUND_S, list_s
        assert [t.error_code for t in created.topics] == [0], created
        assert create_s < ANSWER_BOUND_S, create_s
        leader = run(describe(cluster)).leader_id
        assert leader not in (-1, paused), leader
    finally:
        if paused is not None:
            cluster.procs[paused].send_signal(signal.SIGCONT)
        cluster.close()
    assert not cluster.unexpected_exits()
