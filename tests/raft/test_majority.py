"""Quorum arithmetic (etcd quorum/majority.go; REFERENCE.md section 5)."""

import pytest

from kraft.raft.majority import VoteResult, VoteTally, majority_offset, majority_size


@pytest.mark.parametrize("n,expected", [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)])
def test_majority_size(n, expected):
    assert majority_size(n) == expected


@pytest.mark.parametrize("offsets,expected", [
    ([10], 10),
    ([10, 5], 5),  # two voters need both
    ([10, 5, 7], 7),
    ([10, -1, -1], -1),  # unknown followers hold nothing yet
    ([10, 9, 3, 3], 3),  # four voters need three
    ([1, 2, 3, 4, 5], 3),
    ([], -1),
])
def test_majority_offset_is_the_offset_a_majority_reaches(offsets, expected):
    assert majority_offset(offsets) == expected


def test_majority_offset_does_not_depend_on_order():
    assert majority_offset([3, 9, 5]) == majority_offset([9, 5, 3]) == 5


def test_vote_tally_wins_with_a_majority_and_loses_when_a_majority_is_impossible():
    t = VoteTally([1, 2, 3])
    assert t.result() is VoteResult.PENDING
    t.record(1, True)
    assert t.result() is VoteResult.PENDING
    t.record(2, True)
    assert t.result() is VoteResult.WON
    t = VoteTally([1, 2, 3])
    t.record(1, True)
    t.record(2, False)
    assert t.result() is VoteResult.PENDING
    t.record(3, False)
    assert t.result() is VoteResult.LOST


def test_vote_tally_ignores_duplicates_and_non_voters():
    t = VoteTally([1, 2, 3])
    assert t.record(2, False)
    assert not t.record(2, True)  # a duplicated answer cannot flip a vote
    assert not t.record(9, True)
    assert t.granted == set() and t.rejected == {2}
    assert t.unrecorded() == [1, 3]
