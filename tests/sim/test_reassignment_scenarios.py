"""Seed 002's target-voters reassignment in the simulator, invariants checked after every
event: a whole quorum replaced one voter at a time, the order of the steps, the leader
stepping down when it is the last to remove, resumption after a leader crash, cancel, and the
target surviving a snapshot and a restart."""

from kraft.errors import ErrorCode
from kraft.raft import ReplicaKey
from kraft.raft.reassignment import remaining_changes
from kraft.raft.voters import VoterSet
from kraft.testing import SimCluster


def dynamic(seed=1, voters=3, observers=3, **kw) -> SimCluster:
    c = SimCluster(seed, voters, observers, dynamic=True, **kw)
    c.start_all()
    c.wait_for_leader()
    c.commit()
    c.run_for(500)  # observers caught up
    return c


def reassign(c, target, cancel=False, timeout_ms=10_000):
    deadline = c.now + timeout_ms
    while c.now < deadline:
        n = len(c.admin_answers)
        if c.reassign(target, cancel=cancel):
            c.run_for(timeout_ms // 10, lambda: len(c.admin_answers) > n)
            if c.admin_answers[n:] and c.admin_answers[n][1] == ErrorCode.NONE:
                return
        c.run_for(100)
    raise AssertionError(f"reassign {target} not accepted: {c.admin_answers}\n{c.describe()}")


def voter_history(c, node_id):
    """Every voter set node ``node_id``'s log went through, in order (from its control state)."""
    h = c.nodes[node_id].core.voter_history
    return [h._sets[i] for i in range(len(h))]


def done(c):
    leader = c.leader()
    return leader is not None and leader.core.target_voters is None and \
        leader.core.high_watermark > leader.core.voter_history.last_offset()


def test_replaces_a_whole_quorum_one_voter_at_a_time():
    c = dynamic()
    old_leader = c.leader().id
    reassign(c, [100, 101, 102])
    assert c.leader().core.target_voters.ids == {100, 101, 102}  # recorded before any step
    assert c.run_for(60_000, lambda: done(c) and c.leader().core.voters.ids == {100, 101, 102}), c.describe()
    values = [c.commit() for _ in range(3)]
    assert values
    leader = c.leader()
    sets = [s.ids for s in voter_history(c, leader.id) if len(s)]  # after the empty pre-bootstrap set
    # One voter at a time: consecutive sets differ by exactly one id.
    changes = [a ^ b for a, b in zip(sets, sets[1:]) if a != b]
    assert changes and all(len(d) == 1 for d in changes), sets
    # Adding first while there are as many to add as to remove: the first change is an add.
    first = next(i for i in range(1, len(sets)) if sets[i] != sets[i - 1])
    assert len(sets[first]) == len(sets[first - 1]) + 1, sets
    # The sets never shrink below the size of the smaller of the two quorums.
    assert min(len(s) for s in sets[first - 1:]) >= 3, sets
    # The first leader was the last of the old voters to go (non-leaders first).
    removed = [next(iter(a - b)) for a, b in zip(sets, sets[1:]) if a - b]
    assert removed[-1] == old_leader, (removed, old_leader)
    assert not c.nodes[old_leader].core.quorum.is_electable()


def test_the_reassignment_resumes_after_the_leader_crashes():
    c = dynamic(seed=5)
    reassign(c, [100, 101, 102])
    # Crash the leader after the first step committed.
    assert c.run_for(20_000, lambda: c.leader() is not None and len(c.leader().core.voters) == 4)
    first = c.leader().id
    c.crash(first)
    c.run_for(3_000)
    c.restart(first)
    assert c.run_for(90_000, lambda: done(c) and c.leader().core.voters.ids == {100, 101, 102}), c.describe()
    c.commit()


def test_cancel_stops_after_the_step_under_way():
    c = dynamic(seed=7)
    reassign(c, [100, 101, 102])
    assert c.run_for(20_000, lambda: c.leader() is not None and len(c.leader().core.voters) == 4)
    reassign(c, [], cancel=True)
    c.run_for(10_000)
    leader = c.leader()
    assert leader.core.target_voters is None
    ids = leader.core.voters.ids
    c.run_for(10_000)
    assert c.leader().core.voters.ids == ids and len(ids) in (3, 4)  # nothing more happened


def test_waits_for_a_new_voter_to_catch_up_before_removing_anyone():
    c = dynamic(seed=9, observers=1)
    c.crash(100)
    c.run_for(c.config.fetch_timeout_ms + 1_000)  # no longer counted as caught up
    reassign(c, [1, 2, 100])  # add 100, remove 3: add first, and 100 is down
    c.run_for(10_000)
    assert c.leader().core.voters.ids == {1, 2, 3} and c.leader().core.target_voters is not None
    c.restart(100)
    assert c.run_for(30_000, lambda: done(c) and c.leader().core.voters.ids == {1, 2, 100}), c.describe()


def test_the_target_survives_snapshots_and_restarts():
    c = dynamic(seed=11, snapshot_interval=10)
    for o in (100, 101, 102):
        c.crash(o)
    c.run_for(c.config.fetch_timeout_ms + 1_000)
    reassign(c, [1, 2, 100])
    for _ in range(40):
        c.commit()
    c.run_for(2_000)
    for nid in (1, 2, 3):
        c.crash(nid)
    for nid in (1, 2, 3):
        c.restart(nid)
    c.wait_for_leader()
    assert c.leader().core.target_voters is not None
    assert c.leader().core.target_voters.ids == {1, 2, 100}
    # The leader read the target from its snapshot (the record itself is below the log start).
    leader = c.leader()
    assert leader.log.start_offset() > 0
    assert leader.core.voter_history.last_offset() == leader.log.start_offset() - 1
    c.restart(100)
    assert c.run_for(30_000, lambda: done(c) and c.leader().core.voters.ids == {1, 2, 100}), c.describe()


def test_remaining_changes_match_directory_ids_only_when_given():
    a, b = ReplicaKey(1, b"a" * 16), ReplicaKey(2, b"b" * 16)
    current = VoterSet([a, b])
    assert remaining_changes(current, VoterSet([ReplicaKey(1), ReplicaKey(2)])) == ([], [])
    wiped = ReplicaKey(2, b"c" * 16)
    assert remaining_changes(current, VoterSet([a, wiped])) == ([b], [wiped])
