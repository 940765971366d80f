"""The simulator must be able to fail: break a Raft rule on purpose and check that the
invariants catch it within a few seeds (mutation testing of the checker)."""

import pytest

from kraft.raft import leader as leader_module
from kraft.raft import roles
from kraft.raft.majority import majority_offset
from kraft.testing.chaos import ChaosFailure, run_chaos


def fails_somewhere(seeds) -> bool:
    for seed in seeds:
        try:
            run_chaos(seed, "quick")
        except ChaosFailure:
            return True
    return False


def test_committing_without_a_majority_is_caught(monkeypatch):
    def leader_alone(self):
        hw = max(self.progress.voter_end_offsets())  # "commit when I have it"
        if hw > self.epoch_start_offset and hw > self.high_watermark:
            self.high_watermark = hw
            return True
        return False

    monkeypatch.setattr(leader_module.LeaderState, "_maybe_advance_high_watermark", leader_alone)
    assert fails_somewhere(range(30))


def test_ignoring_the_epoch_start_rule_is_caught_or_harmless(monkeypatch):
    def no_epoch_rule(self):
        hw = majority_offset(self.progress.voter_end_offsets())
        if hw > self.high_watermark:
            self.high_watermark = hw
            return True
        return False

    monkeypatch.setattr(leader_module.LeaderState, "_maybe_advance_high_watermark", no_epoch_rule)
    fails_somewhere(range(10))  # runs clean or fails; must not hang or crash the harness


def test_voting_twice_in_an_epoch_is_caught(monkeypatch):
    monkeypatch.setattr(roles.UnattachedState, "can_grant_vote",
                        lambda self, candidate, up_to_date, pre_vote, now: True)
    monkeypatch.setattr(roles.FollowerState, "can_grant_vote",
                        lambda self, candidate, up_to_date, pre_vote, now: True)
    monkeypatch.setattr(roles.CandidateState, "can_grant_vote",
                        lambda self, candidate, up_to_date, pre_vote, now: True)
    assert fails_somewhere(range(60))


# The pre-vote tie-break (election_rpcs.py) removes most split votes, and with them many of
# the elections in which this mutant shows; it still fails within the first ~50 seeds.
@pytest.mark.parametrize("seeds", [range(200)])
def test_granting_votes_to_stale_logs_is_caught(monkeypatch, seeds):
    original = roles.UnattachedState.can_grant_vote
    monkeypatch.setattr(roles.UnattachedState, "can_grant_vote",
                        lambda self, candidate, up_to_date, pre_vote, now: original(self, candidate, True, pre_vote, now))
    monkeypatch.setattr(roles.ProspectiveState, "can_grant_vote",
                        lambda self, candidate, up_to_date, pre_vote, now: pre_vote or self.voted_key is None)
    assert fails_somewhere(seeds)


def fails_somewhere_with_membership(seeds) -> bool:
    for seed in seeds:
        try:
            run_chaos(seed, "ci-membership")
        except ChaosFailure:
            return True
    return False


def test_counting_majorities_in_a_stale_voter_set_is_caught(monkeypatch):
    """A leader that keeps counting in the voter set it was elected with, ignoring the Voters
    records it appends (the majority must be taken in the set in effect at each offset)."""
    monkeypatch.setattr(leader_module.LeaderState, "update_voters", lambda self, voters, flushed, now: False)
    assert fails_somewhere_with_membership(range(40))


def test_a_wiped_voter_voting_as_its_old_incarnation_is_caught(monkeypatch):
    """Directory ids ignored: a node that lost its disk votes (and counts) as the replica it was."""
    from kraft.raft import elections, voters
    from kraft.types import ReplicaKey

    monkeypatch.setattr(ReplicaKey, "matches", lambda self, other: self.id == other.id)
    monkeypatch.setattr(elections, "voter_key_ok", lambda local, voter_id, directory_id: True)
    monkeypatch.setattr(voters.VoterSet, "is_voter", lambda self, key: key.id in self._voters)
    assert fails_somewhere(range(300)) or fails_somewhere_with_membership(range(300))
