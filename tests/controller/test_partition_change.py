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
