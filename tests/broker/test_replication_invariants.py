"""Randomised (seeded, deterministic) runs of one partition's leader state against a model
controller and followers that fetch, stall and resume: the invariants the replication issue
names hold after every step — the HW never goes back; every member of the committed ISR
holds everything below the HW (so a committed record survives while one ISR member does);
at most one ISR proposal is in flight and it only takes effect through the image."""

from __future__ import annotations

import random
import uuid

import pytest

from kraft.broker.leader_partition import PartitionLeaderState
from kraft.errors import ErrorCode
from kraft.metadata.partition import PartitionRegistration

LAG = 1000
REPLICAS = (1, 2, 3, 4)


def reg(isr, partition_epoch):
    return PartitionRegistration(REPLICAS, (None,) * 4, tuple(isr), (), (), 1, 0, 3, partition_epoch, (), ())


@pytest.mark.parametrize("seed", range(300))
def test_hw_monotone_and_held_by_every_isr_member(seed):
    rnd = random.Random(seed)
    isr, pepoch = (1, 2, 3), 1
    st = PartitionLeaderState(1, "t", 0, uuid.UUID(int=1), reg(isr, pepoch), leader_leo=0, high_watermark=0,
                              epoch_start_offset=0, now_ms=0, lag_max_ms=LAG)
    leo, now = 0, 0
    follower_leo = {r: 0 for r in REPLICAS[1:]}
    stalled = set()
    in_flight = None  # the proposal the model controller holds
    last_hw = 0
    for _ in range(400):
        now += rnd.randint(1, 300)
        op = rnd.random()
        if op < 0.25:
            leo += rnd.randint(1, 5)
            st.on_leader_append(leo)
        elif op < 0.6:
            r = rnd.choice(REPLICAS[1:])
            if r in stalled:
                continue
            follower_leo[r] = rnd.randint(follower_leo[r], leo)  # a fetch reports what it holds
            _, p = st.on_follower_fetch(r, follower_leo[r], 0, leo, now)
            if p is not None:
                assert in_flight is None
                in_flight = p
        elif op < 0.7:
            r = rnd.choice(REPLICAS[1:])
            stalled.symmetric_difference_update({r})
        elif op < 0.8:
            p = st.maybe_shrink(leo, now)
            if p is not None:
                assert in_flight is None
                in_flight = p
        elif in_flight is not None:  # the controller answers
            if rnd.random() < 0.7 and in_flight.partition_epoch == pepoch:
                pepoch += 1
                isr = in_flight.new_isr
                st.on_alter_partition_result(ErrorCode.NONE, pepoch)
                if rnd.random() < 0.8:  # the image usually arrives
                    st.on_registration(reg(isr, pepoch), leo, now)
            else:
                st.on_alter_partition_result(rnd.choice([ErrorCode.REQUEST_TIMED_OUT,
                                                         ErrorCode.OPERATION_NOT_ATTEMPTED]))
            in_flight = None if st.pending is None or st.pending_committed_epoch >= 0 else in_flight
            if st.pending is not None and st.pending_committed_epoch >= 0:
                st.on_registration(reg(isr, pepoch), leo, now)  # the image catches up
                in_flight = None
        hw = st.high_watermark
        assert hw >= last_hw, "the HW went back"
        assert hw <= leo
        for r in st.isr:  # committed ISR as the leader sees it; the leader itself holds leo
            if r != 1:
                assert follower_leo[r] >= hw, f"ISR member {r} lacks committed offsets below {hw}"
        assert 1 in st.isr
        last_hw = hw
