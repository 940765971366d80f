"""PartitionChangeRecords as Kafka's PartitionChangeBuilder (without ELR) computes them."""

import uuid

from kraft.controller.partition_change import PREFERRED, UNCLEAN, change_record, elect_away
from kraft.metadata import MetadataDelta, PartitionRecord, TopicRecord
from kraft.metadata.partition import RECOVERING

TID = uuid.UUID(int=(1 << 64) + 5)


def part(replicas, isr, leader):
    rec = PartitionRecord(partition_id=0, topic_id=TID, replicas=replicas, isr=isr, removing_replicas=[],
                          adding_replicas=[], leader=leader, leader_epoch=3, partition_epoch=7)
    d = MetadataDelta()
    d.replay(TopicRecord(name="t", topic_id=TID))
    d.replay(rec)
    return d.apply()


def alive(*ids):
    return lambda b: b in ids


def test_a_live_leader_in_the_isr_keeps_leading_and_only_the_isr_shrinks():
    img = part([1, 2, 3], [1, 2, 3], 1)
    p = img.topics.by_id[TID].partitions[0]
    rec = change_record(TID, 0, p, alive(1, 2), target_isr=(1, 2))
    assert rec.leader == -2 and tuple(rec.isr) == (1, 2)


def test_a_fenced_leader_is_replaced_by_the_first_live_isr_member_in_replica_order_with_epoch_bumps():
    img = part([3, 1, 2], [1, 2, 3], 3)
    [rec] = elect_away(img, {3}, alive(1, 2))
    assert rec.leader == 1 and tuple(rec.isr) == (1, 2)
    d = MetadataDelta(img)
    d.replay(rec)
    p = d.apply().topics.by_id[TID].partitions[0]
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1, 2), 4, 8)


def test_fencing_the_last_isr_member_keeps_it_in_the_isr_and_leaves_no_leader():
    img = part([1, 2, 3], [1], 1)
    [rec] = elect_away(img, {1}, alive(2, 3))
    assert rec.leader == -1 and rec.isr is None  # the ISR is never shrunk to empty


def test_unclean_election_only_when_enabled_picks_a_live_replica_and_marks_recovery():
    img = part([1, 2, 3], [1], 1)
    [rec] = elect_away(img, {1}, alive(2, 3), unclean=True)
    assert rec.leader == 2 and tuple(rec.isr) == (2,) and rec.leader_recovery_state == RECOVERING
    p = img.topics.by_id[TID].partitions[0]
    assert change_record(TID, 0, p, alive(2, 3), election=UNCLEAN).leader == 2


def test_no_change_gives_no_record_and_untouched_partitions_are_skipped():
    img = part([1, 2, 3], [1, 2, 3], 1)
    p = img.topics.by_id[TID].partitions[0]
    assert change_record(TID, 0, p, alive(1, 2, 3)) is None
    assert elect_away(img, {4}, alive(1, 2, 3)) == []


def test_preferred_election_moves_leadership_back_to_the_first_replica():
    img = part([1, 2, 3], [1, 2, 3], 2)
    p = img.topics.by_id[TID].partitions[0]
    assert change_record(TID, 0, p, alive(1, 2, 3), election=PREFERRED).leader == 1
    assert change_record(TID, 0, p, alive(1, 2, 3)) is None


# --- ELR (KIP-966): members leaving an ISR below min ISR stay eligible -----------------------

from kraft.controller.partition_change import build, elect_leaderless  # noqa: E402


def _replay(img, records):
    d = MetadataDelta(img)
    for r in records:
        d.replay(r)
    return d.apply()


def test_with_elr_an_isr_below_min_isr_keeps_its_leavers_eligible_and_may_become_empty():
    img = part([1, 2, 3], [1, 2, 3], 1)
    min_isr = {"t": 2}.get
    img = _replay(img, elect_away(img, {1}, alive(2, 3), min_isr=min_isr))
    p = img.topics.by_id[TID].partitions[0]
    assert (p.leader, p.isr, p.elr) == (2, (2, 3), ())  # still at min ISR: no ELR
    img = _replay(img, elect_away(img, {2}, alive(3), min_isr=min_isr))
    p = img.topics.by_id[TID].partitions[0]
    assert (p.leader, p.isr, p.elr) == (3, (3,), (2,))
    img = _replay(img, elect_away(img, {3}, alive(), min_isr=min_isr))
    p = img.topics.by_id[TID].partitions[0]
    assert (p.leader, p.isr, p.elr) == (-1, (), (2, 3))  # the ISR empties; both stay eligible
    # broker 2 comes back: it leads cleanly from the ELR and is the ISR again
    img = _replay(img, elect_leaderless(img, alive(2), min_isr=min_isr))
    p = img.topics.by_id[TID].partitions[0]
    assert (p.leader, p.isr, p.elr, p.leader_recovery_state) == (2, (2,), (3,), 0)


def test_a_leader_from_the_elr_that_alone_meets_min_isr_leaves_no_one_else_eligible():
    """With min.insync.replicas 1, a leader elected from the ELR is a full ISR by itself and its
    HW moves on: the other ELR members miss what it commits, so they must leave the ELR, or a
    later election may pick one of them and lose committed records. (Found by the replication
    simulator, seed 257: 3 led from the ELR with ISR {3} and ELR {4}, committed offsets 41-102,
    then 4 was elected from the ELR.)"""
    img = part([1, 2, 3], [1, 2, 3], 1)
    min_isr = {"t": 1}.get
    img = _replay(img, elect_away(img, {1, 2, 3}, alive(), min_isr=min_isr))
    p = img.topics.by_id[TID].partitions[0]
    assert (p.leader, p.isr, p.elr) == (-1, (), (1, 2, 3))
    img = _replay(img, elect_leaderless(img, alive(3), min_isr=min_isr))
    p = img.topics.by_id[TID].partitions[0]
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (3, (3,), (), ())
    img = _replay(img, elect_away(img, {3}, alive(1, 2), min_isr=min_isr))
    p = img.topics.by_id[TID].partitions[0]
    assert p.leader == -1 and 1 not in p.elr and 2 not in p.elr  # only 3 holds everything


def test_without_elr_the_same_failures_leave_only_the_last_member_able_to_lead():
    img = part([1, 2, 3], [1, 2, 3], 1)
    for gone, live in (({1}, (2, 3)), ({2}, (3,)), ({3}, ())):
        img = _replay(img, elect_away(img, gone, alive(*live)))
    p = img.topics.by_id[TID].partitions[0]
    assert (p.leader, p.isr, p.elr) == (-1, (3,), ())
    assert elect_leaderless(img, alive(2)) == []  # 2 may not lead: it is not in the ISR


def test_elr_is_cleared_once_the_isr_is_back_at_min_isr():
    img = part([1, 2, 3], [1, 2, 3], 1)
    min_isr = {"t": 2}.get
    for gone, live in (({1}, (2, 3)), ({2}, (3,))):
        img = _replay(img, elect_away(img, gone, alive(*live), min_isr=min_isr))
    p = img.topics.by_id[TID].partitions[0]
    rec = build(TID, 0, p, alive(1, 2, 3), target_isr=(3, 2), elr_min_isr=2)
    after = _replay(img, [rec]).topics.by_id[TID].partitions[0]
    assert (after.isr, after.elr, after.last_known_elr) == ((3, 2), (), ())


def test_a_reassignment_that_removes_replicas_bumps_the_leader_epoch_even_without_a_new_leader():
    img = part([1, 2, 3], [1, 2, 3], 1)
    p = img.topics.by_id[TID].partitions[0]
    rec = build(TID, 0, p, alive(1, 2, 3), target_replicas=(1, 2))
    after = _replay(img, [rec]).topics.by_id[TID].partitions[0]
    assert rec.leader == 1 and after.leader_epoch == 4 and after.replicas == (1, 2)


def test_an_unclean_restart_takes_the_broker_out_of_every_elr():
    """Kafka's handleBrokerUncleanShutdown: a new incarnation may have lost unflushed data."""
    img = part([1, 2, 3], [1, 2, 3], 1)
    min_isr = {"t": 3}.get
    img = _replay(img, elect_away(img, {2}, alive(1, 3), min_isr=min_isr))
    assert img.topics.by_id[TID].partitions[0].elr == (2,)
    assert elect_away(img, {2}, alive(1, 3), min_isr=min_isr) == []  # a clean fence again: nothing to do
    img = _replay(img, elect_away(img, {2}, alive(1, 3), min_isr=min_isr, unclean_shutdown=True))
    p = img.topics.by_id[TID].partitions[0]
    assert (p.leader, p.isr, p.elr) == (1, (1, 3), ())


def test_registering_a_new_incarnation_drops_it_from_the_elr():
    import uuid
    from admin_fixtures import context
    from controller_fakes import registration
    from partition_fixtures import image_with, part as registered_part, run
    img = image_with(replicas=(1, 2, 3), isr=(1, 3), leader=1, eligible_leader_replicas=[2])
    settings = {"eligible.leader.replicas.enable": "true", "min.insync.replicas": "3"}
    req = registration(2, incarnation=uuid.UUID(int=0xBEEF))
    req.cluster_id = context(img, 0).cluster_id
    req.features = [type(req).Feature(name="metadata.version", min_supported_version=1, max_supported_version=25)]
    result, after = run(62, img, req, 0, settings)
    assert result.response.error_code == 0
    assert registered_part(after).elr == ()


def test_a_clean_restart_keeps_the_broker_in_the_elr_and_a_wrong_previous_epoch_does_not():
    """KIP-966: a broker that shut down cleanly names the epoch it shut down in
    (PreviousBrokerEpoch); it lost nothing, so it stays eligible. Found by the replication
    simulator (seed 203747): the last ELR member came back from a controlled shutdown and its
    partition stayed offline."""
    import uuid
    from admin_fixtures import context
    from controller_fakes import registration
    from partition_fixtures import image_with, part as registered_part, run
    img = image_with(replicas=(1, 2, 3), isr=(1, 3), leader=1, eligible_leader_replicas=[2])
    settings = {"eligible.leader.replicas.enable": "true", "min.insync.replicas": "3"}
    epoch = img.cluster.brokers[2].epoch
    for previous, kept in ((epoch, (2,)), (epoch - 1, ()), (-1, ())):
        req = registration(2, incarnation=uuid.UUID(int=0xBEEF))
        req.cluster_id = context(img, 0).cluster_id
        req.features = [type(req).Feature(name="metadata.version", min_supported_version=1, max_supported_version=25)]
        req.previous_broker_epoch = previous
        result, after = run(62, img, req, 0, settings)
        assert result.response.error_code == 0
        assert registered_part(after).elr == kept, previous


def test_a_topic_config_allowing_unclean_election_wins_over_the_cluster_setting_when_fencing():
    from admin_fixtures import apply
    from kraft.controller.broker_handlers import fence_records
    from kraft.metadata.records import ConfigRecord
    from partition_fixtures import image_with, part as registered_part
    img = image_with(replicas=(1, 2, 3), isr=(1,), leader=1)
    after = apply(img, fence_records(img, [1], {}))
    assert (registered_part(after).leader, registered_part(after).isr) == (-1, (1,))  # clean only: offline
    img = apply(img, [ConfigRecord(resource_type=2, resource_name="t", name="unclean.leader.election.enable",
                                   value="true")])
    after = apply(img, fence_records(img, [1], {}))
    p = registered_part(after)
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), RECOVERING)
