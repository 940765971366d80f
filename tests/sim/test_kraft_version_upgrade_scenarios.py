"""A static quorum (kraft.version 0) refuses voter changes with Kafka's UNSUPPORTED_VERSION, and
upgrading kraft.version to 1 (Kafka 4.1's UpdateFeatures path) writes a Voters record from the
static set, with the directory ids the voters fetch with, after which voters can be added,
removed and reassigned. Invariants checked after every event."""

from kraft.errors import ErrorCode
from kraft.raft import ReplicaKey
from kraft.testing import SimCluster


def static(seed=1, voters=3, observers=1) -> SimCluster:
    c = SimCluster(seed, voters, observers)
    c.start_all()
    c.wait_for_leader()
    c.commit()
    c.run_for(1_000)
    return c


def key(c, node_id):
    return ReplicaKey(node_id, c.nodes[node_id].directory_id)


def upgrade(c, level=1, validate_only=False):
    leader = c.leader()
    out = leader.core.upgrade_kraft_version(level, validate_only, c.now)
    leader.drain(c.now)
    return out


def test_a_static_quorum_refuses_voter_changes_with_unsupported_version():
    c = static()
    assert c.leader().core.kraft_version == 0
    for kind, k in (("add", key(c, 100)), ("remove", key(c, 3))):
        n = len(c.admin_answers)
        c.admin(kind, k)
        c.run_for(100)
        assert c.admin_answers[n] == (kind, ErrorCode.UNSUPPORTED_VERSION)
    n = len(c.admin_answers)
    c.reassign([1, 2, 100])
    c.run_for(100)
    assert c.admin_answers[n] == ("reassign", ErrorCode.UNSUPPORTED_VERSION)


def test_upgrade_writes_the_static_voters_with_their_directory_ids_then_voters_change():
    c = static(seed=3)
    assert upgrade(c, validate_only=True) == (ErrorCode.NONE, None, None)
    assert c.leader().core.kraft_version == 0  # validation appends nothing
    code, _, offset = upgrade(c)
    assert code == ErrorCode.NONE and offset is not None
    assert c.run_for(5_000, lambda: c.leader().core.high_watermark > offset)
    for n in c.alive_nodes():
        assert n.core.kraft_version == 1
        assert n.core.voters.keys() == [key(c, i) for i in (1, 2, 3)]  # directory ids now known
    assert upgrade(c) == (ErrorCode.NONE, None, None)  # the level in force: a no-op
    assert upgrade(c, level=0)[0] == ErrorCode.INVALID_UPDATE_VERSION  # no downgrade
    assert upgrade(c, level=2)[0] == ErrorCode.INVALID_UPDATE_VERSION
    # Now a dynamic quorum: the observer is added, a static voter removed.
    n = len(c.admin_answers)
    c.admin("add", key(c, 100))
    c.run_for(3_000, lambda: len(c.admin_answers) > n)
    assert c.admin_answers[n] == ("add", ErrorCode.NONE)
    c.commit()
    leader = c.leader()
    victim = next(i for i in (1, 2, 3) if i != leader.id)
    n = len(c.admin_answers)
    c.admin("remove", key(c, victim))
    c.run_for(3_000, lambda: len(c.admin_answers) > n)
    assert c.admin_answers[n] == ("remove", ErrorCode.NONE)
    c.commit()
    assert c.leader().core.voters.ids == {1, 2, 3, 100} - {victim}
    # A restart keeps the log's voters over the static configuration.
    c.crash(victim)
    c.restart(victim)
    c.run_for(2_000)
    assert c.nodes[victim].core.voters.ids == {1, 2, 3, 100} - {victim}
    assert not c.nodes[victim].core.quorum.is_electable()


def test_upgrade_waits_for_every_voters_directory_id():
    c = SimCluster(5, 3, 0)
    c.crash(3)  # never fetches from this leader
    for i in (1, 2):
        c.restart(i)
    c.wait_for_leader()
    c.commit()
    code, message, _ = upgrade(c)
    assert code == ErrorCode.INVALID_UPDATE_VERSION and "[3]" in message
    c.restart(3)
    c.run_for(2_000)
    assert upgrade(c)[0] == ErrorCode.NONE
