"""A dynamic quorum (KIP-853) of real `kraft server start` processes on loopback: a node
formatted ``--standalone`` leads alone; nodes formatted ``--no-initial-controllers`` know only
``controller.quorum.bootstrap.servers``, start as observers, find the leader through a
bootstrap server and fetch the log."""

from __future__ import annotations

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for

from .quorum_helpers import describe, node_values, node_batches, run, write_batches

pytestmark = pytest.mark.integration

FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "1500",
    "controller.quorum.append.linger.ms": "2",
}


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(str(tmp_path / "dq"), 3, overrides=FAST, dynamic=True).create()
    try:
        yield c
    finally:
        c.close()
        assert not c.unexpected_exits(), {i: c.log_tail(i) for i in c.unexpected_exits()}


def caught_up_observer(cluster, node_id):
    def check():
        d = run(describe(cluster, 5))
        return d if any(o.replica_id == node_id and o.log_end_offset >= d.high_watermark
                        for o in d.observers) else None
    return check


def test_observers_find_the_standalone_leader_through_bootstrap_servers(cluster):
    cluster.start(1)
    d = run(describe(cluster, 20))
    assert d.leader_id == 1 and [v.replica_id for v in d.voters] == [1]
    acked = run(write_batches(cluster, 5, tag="before"))
    cluster.start(2)
    cluster.start(3)
    d = wait_for(caught_up_observer(cluster, 2), 30)
    wait_for(caught_up_observer(cluster, 3), 30)
    assert [v.replica_id for v in d.voters] == [1]  # observers are not voters
    cluster.stop()
    for node in (2, 3):
        values = node_values(node_batches(cluster, node))
        for base, vals in acked:
            assert [values.get(base + i) for i in range(len(vals))] == vals
