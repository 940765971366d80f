"""ElectLeaders (43) as Kafka's ReplicationControlManager.electLeaders answers it, and the
automatic preferred-leader rebalance decision."""

import pytest

from admin_fixtures import apply
from partition_fixtures import TID, image_with, part, run
from kraft.controller.elect_leaders import imbalanced_brokers, rebalance_records
from kraft.errors import ErrorCode as E
from kraft.metadata.partition import RECOVERING
from kraft.metadata.records import PartitionChangeRecord
from kraft.protocol.messages.elect_leaders import ElectLeadersRequest

TP = ElectLeadersRequest.TopicPartitions


def request(kind, partitions=(0,), topic="t"):
    return ElectLeadersRequest(election_type=kind, timeout_ms=1000,
                               topic_partitions=None if partitions is None else [TP(topic=topic, partitions=list(partitions))])


def codes(resp):
    return {(r.topic, p.partition_id): p.error_code for r in resp.replica_election_results for p in r.partition_result}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_preferred_election_moves_leadership_back_to_the_first_replica(version):
    img = image_with(replicas=(1, 2, 3), isr=(1, 2, 3), leader=2)
    result, after = run(43, img, request(0), version)
    assert codes(result.response) == {("t", 0): 0}
    new = part(after)
    assert new.leader == 1 and new.leader_epoch == 6 and new.isr == (1, 2, 3)


def test_preferred_election_is_not_needed_when_the_first_replica_leads_and_not_available_when_it_cannot():
    result, _ = run(43, image_with(leader=1), request(0), 1)
    assert codes(result.response) == {("t", 0): E.ELECTION_NOT_NEEDED} and not result.records
    # replica 1 is out of the ISR, or fenced: leadership stays with 2
    for img in (image_with(isr=(2, 3), leader=2), image_with(isr=(1, 2, 3), leader=2, fenced=(1,))):
        result, _ = run(43, img, request(0), 1)
        assert codes(result.response) == {("t", 0): E.PREFERRED_LEADER_NOT_AVAILABLE} and not result.records


def test_unclean_election_picks_a_live_replica_outside_the_isr_only_for_leaderless_partitions():
    img = image_with(replicas=(1, 2, 3), isr=(1,), leader=-1, fenced=(1,))
    result, after = run(43, img, request(1), 1)
    assert codes(result.response) == {("t", 0): 0}
    new = part(after)
    assert new.leader == 2 and new.isr == (2,) and new.leader_recovery_state == RECOVERING
    result, _ = run(43, image_with(leader=1), request(1), 1)
    assert codes(result.response) == {("t", 0): E.ELECTION_NOT_NEEDED}
    all_fenced = image_with(replicas=(1, 2), isr=(1,), leader=-1, fenced=(1, 2))
    result, _ = run(43, all_fenced, request(1), 1)
    assert codes(result.response) == {("t", 0): E.ELIGIBLE_LEADERS_NOT_AVAILABLE}


def test_unknown_topics_and_partitions_and_a_bad_election_type():
    result, _ = run(43, image_with(), request(0, topic="nope"), 1)
    assert codes(result.response) == {("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    result, _ = run(43, image_with(), request(0, partitions=(9,)), 1)
    assert codes(result.response) == {("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION}
    result, _ = run(43, image_with(), request(7), 1)
    assert result.response.error_code == E.INVALID_REQUEST
    assert codes(result.response) == {("t", 0): E.INVALID_REQUEST}


def test_a_null_topic_list_elects_everywhere_and_leaves_out_partitions_that_need_nothing():
    img = image_with(partitions=3, leader=2)
    # partition 1 is already led by its first replica
    img = apply(img, [PartitionChangeRecord(partition_id=1, topic_id=TID, leader=1)])
    result, after = run(43, img, request(0, partitions=None), 2)
    assert codes(result.response) == {("t", 0): 0, ("t", 2): 0}
    assert all(p.leader == 1 for p in after.topics.by_id[TID].partitions.values())


def test_rebalance_elects_preferred_leaders_only_beyond_the_imbalance_percentage():
    # 10 partitions prefer broker 1; 2 of them are led by broker 2: 20% imbalance.
    img = image_with(partitions=10, leader=1)
    img = apply(img, [PartitionChangeRecord(partition_id=p, topic_id=TID, leader=2) for p in (3, 7)])
    assert set(imbalanced_brokers(img, 10)) == {1}
    assert imbalanced_brokers(img, 25) == {}
    assert rebalance_records(img, {"leader.imbalance.per.broker.percentage": "25"}) == []
    records = rebalance_records(img, {"leader.imbalance.per.broker.percentage": "10"})
    after = apply(img, records)
    assert sorted(r.partition_id for r in records) == [3, 7]
    assert all(p.leader == 1 for p in after.topics.by_id[TID].partitions.values())
    assert len(rebalance_records(img, {}, max_elections=1)) == 1


def test_rebalance_leaves_partitions_whose_preferred_broker_cannot_lead():
    img = image_with(partitions=2, leader=2, fenced=(1,), isr=(2, 3))
    assert rebalance_records(img, {"leader.imbalance.per.broker.percentage": "0"}) == []
    img = image_with(partitions=2, leader=2, isr=(2, 3))
    assert rebalance_records(img, {"leader.imbalance.per.broker.percentage": "0"}) == []  # 1 not in the ISR
