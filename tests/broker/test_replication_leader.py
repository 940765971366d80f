"""The leader half of partition replication (replication design V3, section G; Kafka's
Partition/Replica): HW = min LEO over the ISR and never back, ISR shrink after
replica.lag.time.max.ms and expand when a follower reaches the HW (injected clock), one
AlterPartition proposal in flight that takes effect only from the image, acks=all and
min.insync.replicas, and seed 003's "multiple leaders in transition" cases."""

from __future__ import annotations

import uuid

import numpy as np

from kraft.broker.leader_partition import PartitionLeaderState, isr_min_leo
from kraft.broker.leader_replication import LeaderReplication
from kraft.errors import ErrorCode
from kraft.metadata.partition import PartitionRegistration
from kraft.protocol import AlterPartitionResponse

E = ErrorCode
TID = uuid.UUID(int=7)
LAG = 30000


def reg(leader=1, isr=(1, 2, 3), replicas=(1, 2, 3), leader_epoch=5, partition_epoch=10):
    return PartitionRegistration(tuple(replicas), tuple(None for _ in replicas), tuple(isr), (), (), leader, 0,
                                 leader_epoch, partition_epoch, (), ())


def leader(r=None, leo=100, hw=0, now=0, epoch_start=0):
    return PartitionLeaderState(1, "t", 0, TID, r or reg(), leader_leo=leo, high_watermark=hw,
                                epoch_start_offset=epoch_start, now_ms=now, lag_max_ms=LAG)


# --- high watermark ---------------------------------------------------------------------------------
def test_hw_is_the_least_leo_over_the_isr():
    st = leader()
    st.on_follower_fetch(2, 80, 0, 100, 1)
    assert st.high_watermark == 0  # replica 3 has not fetched: its LEO is unknown
    st.on_follower_fetch(3, 60, 0, 100, 2)
    assert st.high_watermark == 60
    st.on_follower_fetch(3, 100, 0, 100, 3)
    assert st.high_watermark == 80


def test_hw_never_moves_back_even_if_a_follower_reports_less():
    st = leader(r=reg(isr=(1, 2), replicas=(1, 2)))
    st.on_follower_fetch(2, 90, 0, 100, 1)
    assert st.high_watermark == 90
    st.on_follower_fetch(2, 50, 0, 100, 2)  # a follower that truncated
    assert st.high_watermark == 90


def test_a_replica_outside_the_isr_does_not_hold_the_hw_back():
    st = leader(r=reg(isr=(1, 2)))
    st.on_follower_fetch(2, 100, 0, 100, 1)
    assert st.high_watermark == 100  # replica 3 (not in the ISR) never fetched


def test_single_member_isr_hw_follows_the_leaders_leo():
    st = leader(r=reg(isr=(1,), replicas=(1,)))
    assert st.on_leader_append(150) and st.high_watermark == 150


def test_vectorised_min_leo_matches_the_per_partition_rule():
    rng = np.random.default_rng(3)
    leos = rng.integers(0, 1000, size=(500, 3)).astype(np.int64)
    mask = rng.random((500, 3)) < 0.7
    mask[:, 0] = True  # the leader is always in the ISR
    got = isr_min_leo(leos, mask)
    want = [min(v for v, m in zip(row, mrow) if m) for row, mrow in zip(leos.tolist(), mask.tolist())]
    assert got.tolist() == want


# --- ISR shrink / expand ---------------------------------------------------------------------------
def test_an_isr_member_is_dropped_only_after_the_lag_time_without_catching_up():
    st = leader(now=0)
    st.on_follower_fetch(2, 100, 0, 100, 1000)
    st.on_follower_fetch(3, 100, 0, 100, 1000)
    assert st.maybe_shrink(100, LAG) is None  # nobody lags: both at the leader's LEO
    st.on_leader_append(200)
    st.on_follower_fetch(2, 200, 0, 200, 20000)  # 2 keeps up; 3 stops fetching at 100
    assert st.maybe_shrink(200, 1000 + LAG) is None  # 3 caught up at 1000: exactly lag ms ago
    p = st.maybe_shrink(200, 1001 + LAG)
    assert p is not None and p.new_isr == (1, 2)
    assert (p.leader_epoch, p.partition_epoch) == (5, 10)


def test_a_follower_that_fetches_but_never_reaches_the_leo_is_dropped():
    st = leader(r=reg(isr=(1, 2), replicas=(1, 2)), now=0)
    now, leo = 0, 100
    for _ in range(40):  # the leader grows faster than the follower reads
        now += 1000
        leo += 10
        st.on_follower_fetch(2, leo - 50, 0, leo, now)
    assert st.maybe_shrink(leo, now) is not None


def test_a_follower_reaching_the_leo_of_its_previous_fetch_counts_as_caught_up_then():
    st = leader(r=reg(isr=(1, 2), replicas=(1, 2)), now=0)
    st.on_follower_fetch(2, 50, 0, 100, 10000)  # behind; the leader was at 100
    st.on_follower_fetch(2, 100, 0, 150, 20000)  # reached the old 100 by now: caught up as of 10000
    assert st.followers[2].last_caught_up_ms == 10000
    assert st.maybe_shrink(150, 10000 + LAG) is None
    assert st.maybe_shrink(150, 10001 + LAG) is not None


def test_a_follower_joins_the_isr_when_it_reaches_the_hw_and_the_epoch_start():
    st = leader(r=reg(isr=(1, 2)), epoch_start=90)
    st.on_follower_fetch(2, 100, 0, 100, 1)
    _, p = st.on_follower_fetch(3, 80, 0, 100, 2)
    assert p is None  # below the HW (100)
    _, p = st.on_follower_fetch(3, 100, 0, 100, 3)
    assert p is not None and p.new_isr == (1, 2, 3)
    assert st.maximal_isr == (1, 2, 3) and st.isr == (1, 2)  # counts for the HW, not for min.insync yet


def test_one_proposal_at_a_time_and_it_applies_only_from_the_image():
    st = leader(r=reg(isr=(1, 2)), now=0)
    st.on_follower_fetch(2, 100, 0, 100, 1)
    _, p = st.on_follower_fetch(3, 100, 0, 100, 2)
    assert p is not None
    assert st.maybe_shrink(100, 10 * LAG) is None  # pending: no second proposal
    st.on_alter_partition_result(E.NONE, 11)
    assert st.isr == (1, 2) and st.pending is not None  # answered, not yet in the image
    assert st.on_registration(reg(isr=(1, 2, 3), partition_epoch=11), 100, 3)
    assert st.isr == (1, 2, 3) and st.pending is None


def test_a_change_the_controller_did_not_apply_lets_the_check_propose_again():
    st = leader(now=0)
    p = st.maybe_shrink(100, LAG + 1)
    assert p is not None
    st.on_alter_partition_result(E.INELIGIBLE_REPLICA)
    assert st.pending is None
    assert st.maybe_shrink(100, LAG + 2) == p


def test_a_change_with_an_unknown_outcome_stays_in_the_maximal_isr_and_goes_out_again():
    """A timeout says nothing about the controller: the expansion may be committed, so the
    joining member keeps holding the HW back until an answer or the image says otherwise.
    (Found by the replication simulator, seed 1462: the answer to an expansion was lost, the
    leader forgot the proposal, moved the HW alone, and the controller's new member was elected
    without those records.)"""
    lr = LeaderReplication(1, lag_max_ms=LAG, clock_ms=lambda: now[0])
    now = [0]
    plog = _Plog(84, hw=84)
    alone = reg(isr=(1,), replicas=(1, 2))
    lr.on_follower_fetch(plog, alone, 2, 84, 0, 1)  # 2 caught up: propose {1, 2}
    req = lr.poll_alter_partition(broker_epoch=3)
    assert req.topics[0].partitions[0].new_isr == [1, 2]
    lr.on_alter_partition_failed()  # the answer was lost
    st = lr.states[("t", 0)]
    assert st.pending is not None and st.maximal_isr == (1, 2)
    plog.log.end_offset = 87
    assert lr.high_watermark(plog, alone) == 84  # 2 holds only 84
    assert lr.poll_alter_partition(broker_epoch=3) is None  # backing off
    now[0] = 200
    again = lr.poll_alter_partition(broker_epoch=3)
    assert again is not None and again.topics[0].partitions[0].new_isr == [1, 2]


def test_shrinking_lets_the_hw_advance_only_once_committed():
    st = leader(now=0)
    st.on_follower_fetch(2, 100, 0, 100, 1)  # 3 never fetches
    assert st.high_watermark == 0
    st.maybe_shrink(100, LAG + 1)
    assert st.high_watermark == 0  # 3 is still in the maximal ISR while the removal is pending
    st.on_registration(reg(isr=(1, 2), partition_epoch=11), 100, LAG + 2)
    assert st.high_watermark == 100


# --- acks=all and min.insync.replicas --------------------------------------------------------------
def test_acks_all_waits_for_every_isr_member_and_checks_min_isr():
    st = leader(r=reg(isr=(1, 2)))
    assert not st.not_enough_replicas(2) and st.not_enough_replicas(3)
    assert st.acks_all_status(100, 2) == (False, E.NONE)
    st.on_follower_fetch(2, 100, 0, 100, 1)
    assert st.acks_all_status(100, 2) == (True, E.NONE)
    assert st.acks_all_status(100, 3) == (True, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


# --- seed 003: multiple leaders in transition ------------------------------------------------------
def test_seed003_deposed_leader_cannot_commit_without_the_new_leaders_fetches():
    """A leads with ISR {A,B,C}; the controller moved leadership to B (ISR {B,C}); B and C stop
    fetching from A. A's appends never reach its HW."""
    a = leader(leo=100, hw=100, now=0)
    for r in (2, 3):
        a.on_follower_fetch(r, 100, 0, 100, 10)
    a.on_leader_append(130)  # A accepts a write it believes it leads
    assert a.high_watermark == 100 and a.acks_all_status(130, 1) == (False, E.NONE)


def test_seed003_deposed_leader_shrink_is_refused_and_it_keeps_the_hw():
    """A tries to drop B and C; the controller answers with a stale-epoch error: A proposes
    nothing more and its HW stays where the real ISR had it, until the image tells it."""
    a = leader(leo=130, hw=100, now=0)
    p = a.maybe_shrink(130, LAG + 1)
    assert p.new_isr == (1,)
    a.on_alter_partition_result(E.INVALID_UPDATE_VERSION)
    assert a.high_watermark == 100 and a.maybe_shrink(130, 10 * LAG) is None
    a.on_alter_partition_result(E.FENCED_LEADER_EPOCH)
    assert a.high_watermark == 100
    # the image arrives: B leads in epoch 6; A's leader state ends
    assert not a.on_registration(reg(leader=2, isr=(2, 3), leader_epoch=6, partition_epoch=11), 130, 10 * LAG)


class _Log:
    def __init__(self, end):
        self.end_offset, self.start_offset, self.latest_epoch, self.starts = end, 0, None, {}

    def assign_epoch_start(self, epoch, start=None):
        self.starts[epoch] = self.end_offset if start is None else start
        self.latest_epoch = epoch

    def end_offset_for_epoch(self, epoch):
        later = sorted(s for e, s in self.starts.items() if e > epoch)
        return type("OE", (), {"offset": later[0] if later else self.end_offset})()


class _Plog:
    def __init__(self, end, hw=0):
        self.topic, self.partition, self.topic_id, self.log, self.high_watermark = "t", 0, TID, _Log(end), hw


class _Logs(dict):
    def get(self, topic, partition):
        return dict.get(self, (topic, partition))


def _answer(req, code=E.NONE, partition_epoch=11, top=E.NONE):
    R = AlterPartitionResponse
    return R(throttle_time_ms=0, error_code=top, topics=[R.Topic(topic_id=t.topic_id, partitions=[
        R.Topic.Partition(partition_index=p.partition_index, error_code=code, leader_id=1, leader_epoch=5,
                          isr=p.new_isr, partition_epoch=partition_epoch) for p in t.partitions]) for t in req.topics])


def test_leader_replication_batches_one_alter_partition_in_flight_and_drops_deposed_state():
    lr = LeaderReplication(1, lag_max_ms=LAG, clock_ms=lambda: 0)
    plog = _Plog(100)
    logs = _Logs({("t", 0): plog})
    assert lr.state_for(plog, reg(), 0) is not None
    assert plog.log.starts == {5: 100}  # the new epoch starts at the log end
    assert lr.tick(logs, LAG + 1) == 1
    req = lr.poll_alter_partition(broker_epoch=3)
    (t,) = req.topics
    (p,) = t.partitions
    assert (t.topic_id, p.leader_epoch, p.partition_epoch, p.new_isr) == (TID, 5, 10, [1])
    assert lr.poll_alter_partition() is None  # one in flight
    lr.on_alter_partition_response(_answer(req))
    assert lr.states[("t", 0)].isr == (1, 2, 3)  # still the image's
    image_reg = reg(isr=(1,), partition_epoch=11)
    assert lr.high_watermark(plog, image_reg) == 100  # ISR {1}: HW = LEO
    assert lr.state_for(plog, reg(leader=2, leader_epoch=6, partition_epoch=12)) is None
    assert ("t", 0) not in lr.states


def test_follower_fetch_through_leader_replication_moves_the_partition_hw():
    lr = LeaderReplication(1, lag_max_ms=LAG, clock_ms=lambda: 0)
    plog = _Plog(100, hw=40)
    r = reg(isr=(1, 2), replicas=(1, 2))
    assert lr.on_follower_fetch(plog, r, 2, 70, 0, 1)
    assert plog.high_watermark == 70
    assert not lr.on_follower_fetch(plog, r, 2, 60, 0, 2)
    assert plog.high_watermark == 70
    assert lr.recompute_all(_Logs({("t", 0): plog})) == 0


class _Topic:
    def __init__(self, r):
        self.name, self.id, self.partitions = "t", TID, {0: r}


class _Image:
    def __init__(self, r):
        t = _Topic(r)
        self.topics = type("Topics", (), {"by_name": {"t": t}, "by_id": {TID: t}})()


def test_on_image_makes_states_for_led_partitions_and_reports_hw_moved_by_a_committed_shrink():
    lr = LeaderReplication(1, lag_max_ms=LAG, clock_ms=lambda: 0)
    plog = _Plog(100, hw=40)
    logs = _Logs({("t", 0): plog})
    assert lr.on_image(_Image(reg()), logs, 0) == [] and ("t", 0) in lr.states
    assert lr.tick(logs, LAG + 1) == 1  # nobody fetched: shrink to {1}
    assert lr.on_image(_Image(reg(isr=(1,), partition_epoch=11)), logs, LAG + 2) == [plog]
    assert plog.high_watermark == 100
    assert lr.on_image(_Image(reg(leader=2, leader_epoch=6)), logs, LAG + 3) == [] and lr.states == {}


def test_an_isr_of_the_leader_alone_still_waits_for_a_member_joining():
    """KIP-497 through ``BrokerState.advance_high_watermark`` (the produce and fetch path): with
    the image's ISR {1} and an expansion to {1, 2} proposed (or committed and not in this image
    yet), the HW must not pass replica 2's LEO, or the controller may later elect 2 without
    records below the HW. (Found by the replication simulator, seed 28: the RF-1 shortcut
    "ISR is this leader alone: HW = LEO" ignored the member joining.)"""
    from kraft.broker.broker_state import BrokerState

    plog = _Plog(50, hw=40)
    state = BrokerState(1, _Logs({("t", 0): plog}))
    state.replication = LeaderReplication(1, lag_max_ms=LAG, clock_ms=lambda: 0)
    alone = reg(isr=(1,), replicas=(1, 2, 3))
    state.replication.on_follower_fetch(plog, alone, 2, 50, 0, 1)  # 2 caught up: propose {1, 2}
    assert state.replication.states[("t", 0)].pending.new_isr == (1, 2)
    plog.log.end_offset = 56  # a produce appended 6 records
    assert state.advance_high_watermark(plog, alone) == 50  # not 56: replica 2 holds only 50
    state.replication.on_follower_fetch(plog, alone, 2, 56, 0, 2)
    assert state.advance_high_watermark(plog, alone) == 56


def test_a_single_replica_partition_hw_is_its_log_end():
    from kraft.broker.broker_state import BrokerState

    plog = _Plog(30, hw=0)
    state = BrokerState(1, _Logs({("t", 0): plog}))
    assert state.advance_high_watermark(plog, reg(isr=(1,), replicas=(1,))) == 30
    assert state.advance_high_watermark(plog, reg(leader=2, isr=(2,), replicas=(2,))) == 30  # not ours: unchanged
    assert ("t", 0) not in state.replication.states


def test_hw_stays_while_the_committed_isr_is_below_min_isr():
    """Kafka's isUnderMinIsr (KAFKA-15583, KIP-966): below min.insync.replicas the HW does not
    move, so a member that left the ISR (and may be elected from the ELR later) holds everything
    below it. (Found by the replication simulator, seed 27: leader 2 alone in ISR {2} with min
    ISR 2 committed offsets 186-201; replica 4, elected from the ELR, never had them.)"""
    st = leader(r=reg(isr=(1,), replicas=(1, 2, 3)), leo=100, hw=80)
    st.min_isr = 2
    assert not st.on_leader_append(120) and st.high_watermark == 80
    st.on_follower_fetch(2, 100, 0, 120, 1)  # 2 caught up with the HW: proposes {1, 2}
    assert st.pending is not None and st.high_watermark == 80  # still only {1} committed
    st.on_registration(reg(isr=(1, 2), replicas=(1, 2, 3), partition_epoch=11), 120, 2)
    assert st.high_watermark == 100  # {1, 2}: min LEO
    one = leader(r=reg(isr=(1,), replicas=(1,)), leo=50)
    one.min_isr = 2  # capped at the replica count: RF 1 still commits
    assert one.on_leader_append(60) and one.high_watermark == 60


def test_vectorised_recompute_honours_min_isr_too():
    lr = LeaderReplication(1, lag_max_ms=LAG, clock_ms=lambda: 0, min_isr_of=lambda topic: 2)
    plog = _Plog(100, hw=40)
    lr.state_for(plog, reg(isr=(1,), replicas=(1, 2)), 0)
    assert lr.recompute_all(_Logs({("t", 0): plog})) == 0 and plog.high_watermark == 40


def test_a_late_answer_does_not_judge_a_newer_proposal():
    """An AlterPartition answer applies only to the proposal it answers. Here the image settles
    the first proposal while it is out, a follower's fetch makes a second one on the new
    partition epoch, and then the first one's INVALID_UPDATE_VERSION arrives: marking the second
    one "stale" would stop every ISR change of the partition until an image that never comes.
    (Found by the replication simulator, seed 248: a caught-up replica never rejoined the ISR.)"""
    lr = LeaderReplication(1, lag_max_ms=LAG, clock_ms=lambda: 0)
    plog = _Plog(100, hw=100)
    logs = _Logs({("t", 0): plog})
    lr.state_for(plog, reg(), 0)
    assert lr.tick(logs, LAG + 1) == 1
    first = lr.poll_alter_partition(broker_epoch=3)  # shrink to {1}, built on partition epoch 10
    moved = reg(isr=(1,), partition_epoch=11)  # the controller fenced 2 and 3 meanwhile
    lr.on_image(_Image(moved), logs, LAG + 2)
    lr.on_follower_fetch(plog, moved, 2, 100, 0, LAG + 3)  # 2 is back: propose {1, 2} on epoch 11
    st = lr.states[("t", 0)]
    second = st.pending
    assert second is not None and second.partition_epoch == 11
    lr.on_alter_partition_response(_answer(first, code=E.INVALID_UPDATE_VERSION))
    assert not st.stale and st.pending is second
    req = lr.poll_alter_partition(broker_epoch=3)
    assert req is not None and req.topics[0].partitions[0].new_isr == [1, 2]


def test_a_failed_request_of_a_dropped_state_does_not_displace_the_new_states_proposal():
    """The request out was built by the state of leader epoch 5; the image brought epoch 6 (a new
    state, which proposed the same ISR again) before the request failed. The old proposal must
    not be queued again in place of the new one, or the new one is never sent and the ISR never
    changes. (Found by the replication simulator, seed 2119.)"""
    lr = LeaderReplication(1, lag_max_ms=LAG, clock_ms=lambda: 1_000)
    plog = _Plog(100, hw=100)
    old = reg(isr=(1,), replicas=(1, 2))
    lr.on_follower_fetch(plog, old, 2, 100, 0, 1)
    assert lr.poll_alter_partition(broker_epoch=3) is not None  # epoch 5's {1, 2} goes out
    new = reg(isr=(1,), replicas=(1, 2), leader_epoch=6, partition_epoch=11)
    lr.on_follower_fetch(plog, new, 2, 100, 0, 2)  # epoch 6's state proposes {1, 2} again
    lr.on_alter_partition_failed()
    req = lr.poll_alter_partition(broker_epoch=3)
    assert req is not None
    (p,) = req.topics[0].partitions
    assert (p.leader_epoch, p.partition_epoch, p.new_isr) == (6, 11, [1, 2])
