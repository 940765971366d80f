"""Replica placement: rack-aware, balanced, and refusing what cannot be placed."""

import collections

import pytest

from kraft.controller.placement import PlacementError, place, striped_order
from kraft.errors import ErrorCode


def test_replicas_of_a_partition_span_distinct_racks_when_there_are_enough_racks():
    brokers = [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]
    racks = dict(brokers)
    for replicas in place(brokers, 60, 3, start=7):
        assert len(set(replicas)) == 3
        assert len({racks[r] for r in replicas}) == 3, replicas


def test_leaders_and_replicas_are_balanced_over_brokers():
    brokers = [(b, None) for b in range(1, 6)]
    out = place(brokers, 100, 3)
    leaders = collections.Counter(r[0] for r in out)
    replicas = collections.Counter(b for r in out for b in r)
    assert set(leaders.values()) == {20}
    assert set(replicas.values()) == {60}
    # followers rotate: a leader does not always have the same followers
    assert len({tuple(r) for r in out if r[0] == 1}) > 1


def test_striped_order_alternates_racks():
    order = striped_order([(1, "a"), (2, "a"), (3, "b"), (4, None)])
    assert [b for b, _ in order[:3]] == [1, 3, 4]


@pytest.mark.parametrize("rf,n", [(4, 3), (1, 0), (0, 3)])
def test_unplaceable_replication_factor_is_invalid_replication_factor(rf, n):
    with pytest.raises(PlacementError) as e:
        place([(b, None) for b in range(n)], 1, rf)
    assert e.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
