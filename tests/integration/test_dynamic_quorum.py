"""A dynamic quorum (KIP-853) of real `kraft server start` processes on loopback: a node
formatted ``--standalone`` leads alone; nodes formatted ``--no-initial-controllers`` know only
``controller.quorum.bootstrap.servers``, start as observers, find the leader through a
bootstrap server and fetch the log."""

from __future__ import annotations

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.errors import KraftError

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


def describe_or_none(cluster, timeout: float = 5):
    """DescribeQuorum, or None while no leader answers (a two-voter quorum has none while one
    voter restarts): a condition polled by ``wait_for`` is retried, not failed, meanwhile."""
    try:
        return run(describe(cluster, timeout))
    except (KraftError, OSError):
        return None


def caught_up_observer(cluster, node_id):
    def check():
        d = describe_or_none(cluster)
        if d is None:
            return None
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


def _describe_voters(cluster):
    d = run(describe(cluster, 10))
    return d, {v.replica_id: v for v in d.voters}


def test_grow_from_one_to_three_then_remove_the_original_keeps_every_acknowledged_write(cluster, capsys):
    """The issue's walk: 1 standalone controller, two observers added one at a time with
    ``add-controller``, then the original removed with ``remove-controller``; writes acknowledged
    at every step are on every remaining voter, and the quorum keeps one leader per epoch."""
    from kraft.cli import main
    from kraft.protocol.primitives import uuid_to_base64

    boot = f"127.0.0.1:{cluster.ports[1]}"
    cluster.start(1)
    acked = run(write_batches(cluster, 5, tag="one"))
    cluster.start(2)
    cluster.start(3)
    wait_for(caught_up_observer(cluster, 2), 30)
    for node in (2, 3):
        assert main(["metadata-quorum", "--bootstrap-controller", boot, "--timeout", "30", "add-controller",
                     "--command-config", cluster.config_path(node)]) == 0
        out = capsys.readouterr().out
        assert f"Added controller {node} with directory id {cluster.directory_id(node)}" in out
        acked += run(write_batches(cluster, 5, tag=f"after-add-{node}"))
    d, voters = _describe_voters(cluster)
    assert sorted(voters) == [1, 2, 3]
    assert uuid_to_base64(voters[2].replica_directory_id) == cluster.directory_id(2)
    # describe --status prints the voters with their directory ids and endpoints.
    assert main(["metadata-quorum", "--bootstrap-controller", boot, "describe", "--status"]) == 0
    status = capsys.readouterr().out
    assert f'"directoryId": "{cluster.directory_id(3)}"' in status
    assert f"CONTROLLER://127.0.0.1:{cluster.ports[3]}" in status
    # Remove the original (the leader): it answers once committed, then steps down.
    boot_all = ",".join(f"127.0.0.1:{cluster.ports[i]}" for i in (1, 2, 3))
    assert main(["metadata-quorum", "--bootstrap-controller", boot_all, "--timeout", "30", "remove-controller",
                 "--controller-id", "1", "--controller-directory-id", cluster.directory_id(1)]) == 0
    assert "Removed KRaft controller 1" in capsys.readouterr().out

    def new_leader():
        d, voters = _describe_voters(cluster)
        return d if sorted(voters) == [2, 3] and d.leader_id in (2, 3) else None
    d = wait_for(new_leader, 30)
    acked += run(write_batches(cluster, 5, tag="after-remove"))
    cluster.stop()
    for node in (2, 3):
        values = node_values(node_batches(cluster, node))
        for base, vals in acked:
            assert [values.get(base + i) for i in range(len(vals))] == vals, (node, base)
    assert_one_leader_per_epoch(cluster, (1, 2, 3))


def assert_one_leader_per_epoch(cluster, nodes):
    """Every LeaderChange record in any node's log names one leader per epoch."""
    from kraft.records import LeaderChangeMessage, decode_control_record, iter_batches

    leaders = {}
    for node in nodes:
        for raw in node_batches(cluster, node).values():
            for b in iter_batches(raw):
                if b.is_control:
                    for r in b:
                        m = decode_control_record(r.key, r.value)
                        if isinstance(m, LeaderChangeMessage):
                            assert leaders.setdefault(b.partition_leader_epoch, m.leader_id) == m.leader_id
    assert leaders


def test_a_voter_restarted_on_another_port_updates_its_endpoint(cluster):
    """UpdateRaftVoter: the Voters record follows the voter's new listener, so the quorum's
    answers (DescribeQuorum nodes) and the leader's connections use the new address."""
    from kraft.cli.local_cluster import free_ports
    from kraft.client.quorum import QuorumClient
    from kraft.client.voter_changes import add_voter
    from kraft.log.state_files import uuid_text_to_bytes

    cluster.start(1)
    cluster.start(2)
    wait_for(caught_up_observer(cluster, 2), 30)

    async def add():
        client = QuorumClient([cluster.address(1)])
        try:
            await add_voter(client, 2, uuid_text_to_bytes(cluster.directory_id(2)),
                            [("CONTROLLER", "127.0.0.1", cluster.ports[2])], deadline_s=30)
        finally:
            await client.close()
    run(add())
    cluster.stop(2)
    cluster.ports[2] = free_ports(1)[0]
    cluster.write_configs()
    cluster.start(2)

    def moved():
        d = describe_or_none(cluster)
        return d if d is not None and d.nodes.get(2) == ("127.0.0.1", cluster.ports[2]) else None
    wait_for(moved, 30)
    acked = run(write_batches(cluster, 3, tag="moved"))  # two voters: node 2 must take part
    assert acked
