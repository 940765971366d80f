"""The active controller's periodic leader rebalance (``auto.leader.rebalance.enable``): after
a broker comes back, its preferred leaderships return to it once per check interval, through
records every standby replays to the same image; disabled, nothing moves."""

from controller_fakes import FakeRaft, active_controller, cluster_of, create_topics, standby
from kraft.errors import ErrorCode as E
from kraft.metadata import encode_record
from kraft.metadata.records import PartitionChangeRecord

SETTINGS = {"leader.imbalance.check.interval.seconds": "1", "leader.imbalance.per.broker.percentage": "10",
            "broker.session.timeout.ms": "100000"}


def _imbalanced(raft, ctl, other):
    """Three brokers, topic t (3 partitions, RF 3); every partition that prefers broker 1 is led
    by another replica, as after broker 1 was fenced and came back."""
    cluster_of(raft, ctl, 3, others=(other,))
    ctl.submit(19, create_topics(("t", 3, 3)), 7, 0, "create")
    raft.commit(ctl, other)
    assert ctl.respond.got["create"].topics[0].error_code == E.NONE
    topic = ctl.image.topics.get_topic_by_name("t")
    moves = [PartitionChangeRecord(partition_id=pid, topic_id=topic.id, leader=p.replicas[1])
             for pid, p in topic.partitions.items() if p.replicas[0] == 1]
    assert moves
    raft.append_foreign([encode_record(r) for r in moves])
    raft.commit(ctl, other)
    return topic.id


def test_the_rebalance_moves_leadership_back_to_preferred_replicas_once_per_interval():
    raft = FakeRaft()
    ctl, _ = active_controller(raft, **SETTINGS)
    other, _ = standby()
    tid = _imbalanced(raft, ctl, other)
    assert any(p.leader != p.replicas[0] for p in ctl.image.topics.by_id[tid].partitions.values())
    end = raft.end
    ctl.tick(0)  # the first look only schedules the check one interval later
    ctl.tick(999)
    assert raft.end == end
    ctl.tick(1000)
    assert raft.end > end and ctl.rebalances == 1
    raft.commit(ctl, other)
    for image in (ctl.image, other.image):
        assert all(p.leader == p.replicas[0] for p in image.topics.by_id[tid].partitions.values())
    ctl.tick(2000)  # balanced now: nothing more to write
    assert ctl.rebalances == 1


def test_no_rebalance_when_disabled():
    raft = FakeRaft()
    ctl, _ = active_controller(raft, **SETTINGS, **{"auto.leader.rebalance.enable": "false"})
    other, _ = standby()
    _imbalanced(raft, ctl, other)
    end = raft.end
    for t in (0, 1000, 5000):
        ctl.tick(t)
    assert raft.end == end and ctl.rebalances == 0
