"""Dynamic quorum (KIP-853) scenarios in the simulator, invariants checked after every event:
grow from one voter, shrink back, a leader removing itself, and a voter whose disk is lost
rejoining as an observer and being re-added as the new replica it now is."""

from kraft.errors import ErrorCode
from kraft.raft import ReplicaKey
from kraft.testing import SimCluster


def dynamic(seed=1, voters=1, observers=2) -> SimCluster:
    c = SimCluster(seed, voters, observers, dynamic=True)
    c.start_all()
    c.wait_for_leader()
    c.commit()
    return c


def key(c, node_id):
    return ReplicaKey(node_id, c.nodes[node_id].directory_id)


def change(c, kind, k, timeout_ms=10_000):
    """Send a voter change to the leader until it is answered NONE."""
    deadline = c.now + timeout_ms
    while c.now < deadline:
        n = len(c.admin_answers)
        if c.admin(kind, k):
            c.run_for(timeout_ms // 10, lambda: len(c.admin_answers) > n)
            if c.admin_answers[n:] and c.admin_answers[n][1] == ErrorCode.NONE:
                return
        c.run_for(100)
    raise AssertionError(f"{kind} {k} not done: {c.admin_answers}\n{c.describe()}")


def voters_of(c):
    return {k.id for k in c.leader().core.voters.keys()}


def test_grow_from_one_voter_to_three_and_back():
    c = dynamic()
    for o in (100, 101):
        c.run_for(500)  # caught up
        change(c, "add", key(c, o))
        c.commit()
    assert voters_of(c) == {1, 100, 101}
    # Every node learned the voter set from the log, including the first one's bootstrap.
    assert all(n.core.voters.ids == {1, 100, 101} for n in c.alive_nodes())
    change(c, "remove", key(c, 1))  # the leader removes itself, then steps down
    leader = c.wait_for_leader()
    assert leader.id in (100, 101) and voters_of(c) == {100, 101}
    c.commit()
    c.run_for(5_000)
    assert not c.nodes[1].core.quorum.is_electable()  # a removed voter neither campaigns nor votes
    assert c.nodes[1].core.role in ("follower", "unattached")


def test_a_wiped_voter_rejoins_as_an_observer_and_is_re_added():
    c = dynamic(seed=3, voters=1, observers=2)
    for o in (100, 101):
        c.run_for(500)
        change(c, "add", key(c, o))
    old = key(c, 101)
    c.crash(101)
    c.wipe(101)
    c.restart(101)
    c.run_for(2_000)
    new = key(c, 101)
    assert new != old and not c.nodes[101].core.quorum.is_electable()  # not the old voter
    c.commit()  # 1 and 100 are a majority of {1, 100, 101-old}
    change(c, "remove", old)
    c.run_for(500)
    change(c, "add", new)
    c.commit()
    assert key(c, 101) in c.leader().core.voters.keys() and old not in c.leader().core.voters.keys()
