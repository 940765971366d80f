"""AlterPartition (56) as Kafka's ReplicationControlManager.alterPartition answers it: epochs,
leadership, ISR validity and eligibility checks, topic ids from v2, reassignment completion."""

import pytest

from partition_fixtures import EPOCH, TID, image_with, part, run
from kraft.errors import ErrorCode as E
from kraft.metadata.partition import RECOVERING
from kraft.protocol.messages.alter_partition import AlterPartitionRequest

T = AlterPartitionRequest.Topic
P = T.Partition


def request(version, isr, *, broker=1, broker_epoch=EPOCH, leader_epoch=5, partition_epoch=9, topic="t",
            topic_id=TID, partition=0, recovery=0, member_epochs=None):
    p = P(partition_index=partition, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
          leader_recovery_state=recovery)
    if version >= 3:
        epochs = member_epochs or {}
        p.new_isr_with_epochs = [P.BrokerState(broker_id=b, broker_epoch=epochs.get(b, EPOCH)) for b in isr]
    else:
        p.new_isr = list(isr)
    t = T(partitions=[p])
    if version >= 2:
        t.topic_id = topic_id
    else:
        t.topic_name = topic
    return AlterPartitionRequest(broker_id=broker, broker_epoch=broker_epoch, topics=[t])


def only(resp):
    [t] = resp.topics
    [p] = t.partitions
    return p


@pytest.mark.parametrize("version", range(4))
def test_a_shrink_from_the_leader_commits_and_answers_the_new_state(version):
    img = image_with(isr=(1, 2, 3))
    result, after = run(56, img, request(version, [1, 2]), version)
    p = only(result.response)
    assert p.error_code == 0 and p.isr == [1, 2] and p.leader_id == 1
    new = part(after)
    assert new.isr == (1, 2) and new.leader == 1
    # the answer carries the epochs the replayed image has: the leader's next request uses them
    assert (p.leader_epoch, p.partition_epoch) == (new.leader_epoch, new.partition_epoch) == (5, 10)


def test_an_expansion_adds_a_caught_up_follower():
    img = image_with(isr=(1, 2))
    result, after = run(56, img, request(2, [1, 2, 3]), 2)
    assert only(result.response).error_code == 0 and part(after).isr == (1, 2, 3)


@pytest.mark.parametrize("fields,code", [
    (dict(leader_epoch=4), E.FENCED_LEADER_EPOCH),
    (dict(leader_epoch=6), E.NOT_CONTROLLER),
    (dict(partition_epoch=8), E.INVALID_UPDATE_VERSION),
    (dict(partition_epoch=10), E.NOT_CONTROLLER),
    (dict(broker=2), E.INVALID_REQUEST),  # not the leader
])
def test_stale_or_foreign_proposals_are_refused_without_records(fields, code):
    img = image_with()
    broker = fields.pop("broker", 1)
    result, _ = run(56, img, request(2, [1, 2], broker=broker, **fields), 2)
    assert only(result.response).error_code == code and result.records == []


@pytest.mark.parametrize("isr", [[2, 3], [1, 1, 2], [1, 4]])
def test_an_isr_without_the_leader_with_duplicates_or_strangers_is_invalid(isr):
    result, _ = run(56, image_with(), request(2, isr), 2)
    assert only(result.response).error_code == E.INVALID_REQUEST and not result.records


@pytest.mark.parametrize("version,code", [(0, E.OPERATION_NOT_ATTEMPTED), (1, E.OPERATION_NOT_ATTEMPTED),
                                          (2, E.INELIGIBLE_REPLICA), (3, E.INELIGIBLE_REPLICA)])
def test_fenced_or_shutting_down_replicas_are_ineligible_for_the_isr(version, code):
    img = image_with(isr=(1,), fenced=(2,), shutting_down=(3,))
    for isr in ([1, 2], [1, 3]):
        result, _ = run(56, img, request(version, isr), version)
        assert only(result.response).error_code == code and not result.records


def test_v3_checks_each_member_broker_epoch():
    img = image_with(isr=(1,))
    result, _ = run(56, img, request(3, [1, 2], member_epochs={2: EPOCH - 1}), 3)
    assert only(result.response).error_code == E.INELIGIBLE_REPLICA
    result, after = run(56, img, request(3, [1, 2], member_epochs={2: -1}), 3)  # -1: no check
    assert only(result.response).error_code == 0 and part(after).isr == (1, 2)


def test_a_stale_requester_epoch_fails_the_whole_request():
    result, _ = run(56, image_with(), request(2, [1, 2], broker_epoch=EPOCH + 1), 2)
    assert result.response.error_code == E.STALE_BROKER_EPOCH and result.records == []


@pytest.mark.parametrize("version,code", [(1, E.UNKNOWN_TOPIC_OR_PARTITION), (2, E.UNKNOWN_TOPIC_ID)])
def test_unknown_topics_answer_by_name_before_v2_and_by_id_from_v2(version, code):
    import uuid
    req = request(version, [1, 2], topic="nope", topic_id=uuid.UUID(int=(1 << 64) + 1))
    result, _ = run(56, image_with(), req, version)
    assert only(result.response).error_code == code
    result, _ = run(56, image_with(), request(version, [1, 2], partition=7), version)
    assert only(result.response).error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_recovery_state_may_go_from_recovering_to_recovered_but_never_back():
    img = image_with(isr=(1,), leader_recovery_state=RECOVERING)
    result, after = run(56, img, request(1, [1], recovery=0), 1)
    assert only(result.response).error_code == 0 and part(after).leader_recovery_state == 0
    result, _ = run(56, after, request(1, [1], partition_epoch=10, recovery=1), 1)
    assert only(result.response).error_code == E.INVALID_REQUEST
    result, _ = run(56, img, request(1, [1, 2], recovery=1), 1)  # still recovering: the ISR is the leader alone
    assert only(result.response).error_code == E.INVALID_REQUEST


def test_an_expansion_that_completes_a_reassignment_drops_the_old_replicas_and_moves_leadership():
    # Moving 1,2,3 -> 4,2,3 while 1 leads: replicas 4,2,3,1, adding 4, removing 1.
    img = image_with(replicas=(4, 2, 3, 1), isr=(1, 2, 3), leader=1, adding_replicas=[4], removing_replicas=[1])
    result, after = run(56, img, request(2, [1, 2, 3, 4]), 2)
    assert only(result.response).error_code == E.NEW_LEADER_ELECTED
    new = part(after)
    assert new.replicas == (4, 2, 3) and new.isr == (2, 3, 4)
    assert new.leader == 4 and new.adding_replicas == () and new.removing_replicas == ()
    assert new.leader_epoch == 6
    result, _ = run(56, img, request(1, [1, 2, 3, 4]), 1)
    assert only(result.response).error_code == E.FENCED_LEADER_EPOCH  # v0-1 know no NEW_LEADER_ELECTED


def test_an_expansion_that_completes_a_reassignment_keeps_a_leader_that_stays():
    img = image_with(replicas=(1, 2, 4, 3), isr=(1, 2, 3), leader=1, adding_replicas=[4], removing_replicas=[3])
    result, after = run(56, img, request(2, [1, 2, 3, 4]), 2)
    p = only(result.response)
    new = part(after)
    assert p.error_code == 0 and new.replicas == (1, 2, 4) and set(new.isr) == {1, 2, 4} and new.leader == 1
    assert p.isr == list(new.isr)
    assert new.leader_epoch == 6  # replica 3 left: the epoch bump fences it
