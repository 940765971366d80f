"""Scenario tests for the situations discussed with KIP-595 (seeds 000-002): leader failure,
partitioned leader, back-to-back failures, all nodes killed and a majority restarted, a
zombie leader that cannot commit; plus graceful resignation, snapshot catch-up and a disk
wipe. Each runs the simulator with invariants checked after every event."""

import pytest

from kraft.testing import NetworkFaults, SimCluster


def cluster(seed=1, voters=3, **kw) -> SimCluster:
    c = SimCluster(seed, voters, **kw)
    c.start_all()
    c.wait_for_leader()
    return c


def values(c: SimCluster):
    return {n.id: n.state_machine.next_offset for n in c.alive_nodes()}


def test_first_election_and_commit():
    c = cluster()
    off = c.commit()
    c.run_for(2_000)
    assert all(v > off for v in values(c).values())


def test_leader_failure_elects_a_new_leader_that_keeps_committed_data():
    c = cluster(seed=2)
    committed = [c.commit() for _ in range(5)]
    old = c.leader()
    old_epoch = old.core.epoch
    c.crash(old.id)
    new = c.wait_for_leader(timeout_ms=20_000)
    assert new.id != old.id and new.core.epoch > old_epoch
    assert c.commit() > committed[-1]


def test_partitioned_leader_steps_down_and_majority_moves_on():
    """KIP-595 'partitioned leader': the majority elects a new leader in a higher epoch; the
    old leader cannot commit and resigns by check-quorum; after healing it follows."""
    c = cluster(seed=3)
    c.commit()
    old = c.leader()
    old_epoch = old.core.epoch
    c.isolate(old.id)
    c.run_for(4_000)
    assert old.core.role in ("resigned", "prospective", "unattached")  # check-quorum fired
    new = c.leader()
    assert new is not None and new.id != old.id and new.core.epoch > old_epoch
    c.heal()
    c.commit()
    c.run_for(3_000)
    assert old.core.role == "follower" and old.core.leader_id == new.id


def test_zombie_leader_cannot_commit():
    """Seed 002 'zombie leader': a leader cut off from the majority keeps accepting
    proposals but never commits them; they are truncated when it rejoins."""
    c = cluster(seed=4, voters=5)
    c.commit()
    zombie = c.leader()
    others = [i for i in c.voter_ids if i != zombie.id]
    c.network.split([zombie.id], others)
    hw = zombie.core.high_watermark
    lost = zombie.propose([b"zombie-write"], c.now)
    c.run_for(2_000)
    assert zombie.core.high_watermark == hw and lost is not None
    c.run_for(3_000)
    c.heal()
    c.commit()
    c.run_for(3_000)
    for n in c.alive_nodes():
        logged = [v for b in n.log.batches() if not b.is_control for v in b.values()]
        assert b"zombie-write" not in logged
    assert zombie.core.role == "follower"


def test_back_to_back_leader_failures():
    c = cluster(seed=5, voters=5)
    for _ in range(2):
        c.commit()
        c.crash(c.leader().id)
        c.wait_for_leader(timeout_ms=20_000)
    c.commit()


def test_all_nodes_killed_then_a_majority_restarted():
    """Seed 000: every node dies; a majority comes back and elects a leader from the
    persisted quorum-state and flushed logs, with committed data intact."""
    c = cluster(seed=6)
    last = c.commit()
    for nid in c.voter_ids:
        c.crash(nid)
    c.run_for(1_000)
    for nid in c.voter_ids[:2]:
        c.restart(nid)
    c.wait_for_leader(timeout_ms=20_000)
    assert c.commit() > last
    c.run_for(2_000)
    assert all(n.state_machine.next_offset > last for n in c.alive_nodes())


def test_restart_never_lets_a_leader_lead_its_old_epoch_again():
    c = cluster(seed=7)
    leader = c.leader()
    epoch = leader.core.epoch
    c.crash(leader.id)
    c.restart(leader.id)
    assert leader.core.role == "resigned" and leader.core.epoch == epoch
    c.wait_for_leader()
    assert c.leader().core.epoch > epoch


def test_graceful_resignation_hands_over_quickly():
    c = cluster(seed=8)
    c.commit()
    old = c.leader()
    old.core.resign(c.now)
    old.drain(c.now)
    start = c.now
    new = c.wait_for_leader(timeout_ms=5_000)
    assert new.id != old.id and c.now - start < 3_000


def test_lagging_follower_catches_up_through_a_snapshot():
    c = cluster(seed=9, snapshot_interval=10, config=None)
    lagging = c.voter_ids[-1] if c.leader().id != c.voter_ids[-1] else c.voter_ids[0]
    c.crash(lagging)
    for _ in range(40):
        c.commit()
    leader = c.leader()
    assert leader.log.start_offset() > 0  # the leader deleted its log prefix
    c.restart(lagging)
    c.run_for(5_000)
    node = c.nodes[lagging]
    assert node.state_machine.snapshots_loaded >= 1
    assert node.state_machine.next_offset == leader.state_machine.next_offset


def test_wiped_voter_returns_as_observer_and_cannot_vote_again():
    c = cluster(seed=10)
    c.commit()
    victim = next(i for i in c.voter_ids if i != c.leader().id)
    c.wipe(victim)
    c.restart(victim)
    c.run_for(3_000)
    node = c.nodes[victim]
    assert not node.core.quorum.is_voter()
    assert node.state_machine.next_offset == c.leader().state_machine.next_offset  # still replicates


def test_observers_follow_and_are_never_counted():
    c = cluster(seed=11, voters=3, observers=2)
    last = c.commit()
    c.run_for(2_000)
    for oid in c.observer_ids:
        assert c.nodes[oid].core.role == "follower"
        assert c.nodes[oid].state_machine.next_offset > last


@pytest.mark.parametrize("seed", range(5))
def test_lossy_duplicating_reordering_network_still_commits(seed):
    c = cluster(seed=100 + seed, voters=3,
                faults=NetworkFaults(drop_rate=0.1, duplicate_rate=0.1, max_delay_ms=40, reorder=True))
    for _ in range(10):
        c.commit()
