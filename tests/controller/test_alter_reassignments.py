"""AlterPartitionReassignments (45): seed 003's reassignment through records — start (adding and
removing replicas), completion once the new replicas are in the ISR (through AlterPartition),
cancellation, and Kafka's errors."""

import pytest

from partition_fixtures import EPOCH, TID, image_with, part, run
from kraft.errors import ErrorCode as E
from kraft.protocol.messages.alter_partition import AlterPartitionRequest
from kraft.protocol.messages.partition_reassignments import (AlterPartitionReassignmentsRequest,
                                                             ListPartitionReassignmentsRequest)

T = AlterPartitionReassignmentsRequest.Topic


def reassign(replicas, partition=0, topic="t", allow_rf_change=True):
    return AlterPartitionReassignmentsRequest(timeout_ms=1000, allow_replication_factor_change=allow_rf_change,
                                              topics=[T(name=topic, partitions=[T.Partition(
                                                  partition_index=partition, replicas=replicas)])])


def code(resp):
    [t] = resp.responses
    [p] = t.partitions
    return p.error_code


def alter_isr(img, isr, broker=None):
    p = part(img)
    AP = AlterPartitionRequest
    return run(56, img, AP(broker_id=p.leader if broker is None else broker, broker_epoch=EPOCH, topics=[AP.Topic(
        topic_id=TID, partitions=[AP.Topic.Partition(partition_index=0, leader_epoch=p.leader_epoch,
                                                     partition_epoch=p.partition_epoch, new_isr=list(isr))])]), 2)


def test_a_move_adds_then_waits_for_the_isr_then_drops_the_old_replica_and_moves_leadership():
    img = image_with(replicas=(1, 2, 3), leader=1)
    result, started = run(45, img, reassign([4, 2, 3]), 0)
    assert code(result.response) == 0 and result.atomic
    p = part(started)
    assert p.replicas == (4, 2, 3, 1) and p.adding_replicas == (4,) and p.removing_replicas == (1,)
    assert p.leader == 1 and p.isr == (1, 2, 3)  # nothing moves before broker 4 caught up
    listed, _ = run(46, started, ListPartitionReassignmentsRequest(topics=None), 0)
    [lt] = listed.response.topics
    assert lt.partitions[0].adding_replicas == [4] and lt.partitions[0].removing_replicas == [1]
    # the leader reports broker 4 in sync: the reassignment completes in that same record
    result, done = alter_isr(started, [1, 2, 3, 4])
    p = part(done)
    assert p.replicas == (4, 2, 3) and p.isr == (2, 3, 4) and p.leader == 4
    assert p.adding_replicas == () and p.removing_replicas == ()
    listed, _ = run(46, done, ListPartitionReassignmentsRequest(topics=None), 0)
    assert listed.response.topics == []


def test_a_reorder_or_a_removal_the_isr_already_satisfies_completes_at_once():
    img = image_with(replicas=(1, 2, 3), leader=1)
    result, after = run(45, img, reassign([3, 2, 1]), 0)
    p = part(after)
    assert code(result.response) == 0 and p.replicas == (3, 2, 1) and p.adding_replicas == () and p.leader == 1
    result, after = run(45, img, reassign([2, 3]), 0)
    p = part(after)
    assert p.replicas == (2, 3) and p.isr == (2, 3) and p.leader == 2 and p.removing_replicas == ()


def test_cancelling_restores_the_original_replicas_and_drops_the_adding_ones_from_the_isr():
    img = image_with(replicas=(4, 5, 1, 2), isr=(1, 2, 4), leader=1, adding_replicas=[4, 5], removing_replicas=[1, 2])
    result, after = run(45, img, reassign(None), 0)
    p = part(after)
    assert code(result.response) == 0
    assert p.replicas == (1, 2) and p.isr == (1, 2) and p.adding_replicas == () and p.removing_replicas == ()
    assert p.leader == 1


def test_cancelling_without_a_reassignment_and_reverting_into_an_unclean_election():
    result, _ = run(45, image_with(), reassign(None), 0)
    assert code(result.response) == E.NO_REASSIGNMENT_IN_PROGRESS and not result.records
    # only the adding replica is in sync: reverting needs an unclean election
    img = image_with(replicas=(4, 1), isr=(4,), leader=4, adding_replicas=[4], removing_replicas=[1])
    result, _ = run(45, img, reassign(None), 0)
    assert code(result.response) == E.INVALID_REPLICA_ASSIGNMENT and not result.records
    result, after = run(45, img, reassign(None), 0, settings={"unclean.leader.election.enable": "true"})
    p = part(after)
    assert code(result.response) == 0 and p.replicas == (1,) and p.isr == (1,) and p.leader == 1


@pytest.mark.parametrize("replicas,err", [([], E.INVALID_REPLICA_ASSIGNMENT), ([1, 1, 2], E.INVALID_REPLICA_ASSIGNMENT),
                                          ([1, 2, 9], E.INVALID_REPLICA_ASSIGNMENT)])
def test_invalid_targets_are_refused(replicas, err):
    result, _ = run(45, image_with(), reassign(replicas), 0)
    assert code(result.response) == err and not result.records


def test_unknown_topic_or_partition_and_replication_factor_changes_at_v1():
    result, _ = run(45, image_with(), reassign([1, 2], topic="nope"), 0)
    assert code(result.response) == E.UNKNOWN_TOPIC_OR_PARTITION
    result, _ = run(45, image_with(), reassign([1, 2], partition=3), 0)
    assert code(result.response) == E.UNKNOWN_TOPIC_OR_PARTITION
    result, _ = run(45, image_with(), reassign([1, 2], allow_rf_change=False), 1)
    assert code(result.response) == E.INVALID_REPLICATION_FACTOR and not result.records
    result, _ = run(45, image_with(), reassign([1, 2], allow_rf_change=False), 0)  # v0 has no such flag
    assert code(result.response) == 0


def test_one_request_is_one_atomic_unit_of_all_its_accepted_partitions():
    img = image_with(partitions=2)
    req = AlterPartitionReassignmentsRequest(timeout_ms=1000, topics=[T(name="t", partitions=[
        T.Partition(partition_index=0, replicas=[4, 5, 1]), T.Partition(partition_index=1, replicas=[9])])])
    result, after = run(45, img, req, 0)
    assert [p.error_code for p in result.response.responses[0].partitions] == [0, E.INVALID_REPLICA_ASSIGNMENT]
    assert len(result.records) == 1 and result.atomic
    assert part(after, 0).adding_replicas == (4, 5) and part(after, 1).adding_replicas == ()
