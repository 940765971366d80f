"""QuorumState is the only gatekeeper of roles: legal transitions work, illegal ones raise,
durable changes are persisted first and the persisted epoch never goes back."""

import random

import pytest

from kraft.raft import ElectionState, OffsetAndEpoch, PersistElection, RaftConfig
from kraft.raft.quorum_state import IllegalTransitionError, QuorumState
from kraft.raft.voters import ReplicaKey, VoterSet, VoterSetHistory


def quorum(local=1, voters=(1, 2, 3), stored=None, log_epoch=0):
    out = []
    q = QuorumState(ReplicaKey(local), VoterSetHistory(VoterSet(voters)), RaftConfig(), random.Random(0), out.append)
    q.initialize(stored, OffsetAndEpoch(0, log_epoch), 0)
    return q, out


def test_docstring_lists_every_role():
    doc = QuorumState.__module__ and __import__("kraft.raft.quorum_state", fromlist=["x"]).__doc__
    for role in ("Unattached", "Prospective", "Candidate", "Leader", "Follower", "Resigned", "Observers"):
        assert role in doc


def test_full_election_path_persists_each_durable_change_first():
    q, out = quorum()
    q.transition_to_prospective(0)
    assert q.epoch == 0
    q.state.tally.record(2, True)
    q.transition_to_candidate(0)
    assert out[-1] == PersistElection(ElectionState(1, -1, ReplicaKey(1)))
    q.state.tally.record(3, True)
    q.transition_to_leader(0, 0)
    assert out[-1] == PersistElection(ElectionState(1, 1, ReplicaKey(1)))
    q.transition_to_resigned((2, 3), 0)
    q.transition_to_follower(2, 2, 0)
    assert out[-1].state == ElectionState(2, 2, None)


@pytest.mark.parametrize("bad", [
    lambda q: q.transition_to_candidate(0),  # needs a won pre-election
    lambda q: q.transition_to_leader(0, 0),  # needs a won election
    lambda q: q.transition_to_resigned((), 0),  # only a leader resigns
    lambda q: q.transition_to_unattached(0, 0),  # same epoch from unattached
    lambda q: q.transition_to_follower(0, 1, 0),  # cannot follow itself
])
def test_illegal_transitions_raise(bad):
    q, _ = quorum()
    with pytest.raises(IllegalTransitionError):
        bad(q)


def test_leader_cannot_learn_another_leader_in_its_epoch():
    q, _ = quorum(voters=(1,))
    q.transition_to_prospective(0)
    q.transition_to_candidate(0)
    q.transition_to_leader(0, 0)
    with pytest.raises(IllegalTransitionError):
        q.transition_to_follower(1, 2, 0)


def test_observer_cannot_vote_or_campaign():
    q, _ = quorum(local=9)
    with pytest.raises(IllegalTransitionError):
        q.transition_to_prospective(0)
    with pytest.raises(IllegalTransitionError):
        q.transition_to_unattached_voted(0, ReplicaKey(1), 0)


def test_restart_states():
    assert quorum(stored=ElectionState(3, 1, ReplicaKey(1)))[0].state.name == "resigned"
    assert quorum(stored=ElectionState(3, 2))[0].state.name == "follower"
    q, _ = quorum(stored=ElectionState(3, -1, ReplicaKey(2)))
    assert q.state.name == "unattached" and q.state.voted_key == ReplicaKey(2)
    q, out = quorum(stored=ElectionState(3), log_epoch=5)  # log newer than quorum-state
    assert q.epoch == 5 and out[-1].state.epoch == 5
