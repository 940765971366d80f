"""The snapshot schedule: Kafka's byte and time triggers, and voters staggered by turns so no
two start within one turn (seed 004), with a bound on how long a due snapshot waits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.config import NodeConfig
from kraft.metadata.snapshot_schedule import ScheduleConfig, ScheduleState, decide, voter_index

CFG = ScheduleConfig(max_bytes=1000, max_interval_ms=60_000, turn_ms=1000)


def test_bytes_trigger_fires_at_the_limit_and_not_before():
    assert not decide(CFG, ScheduleState(999, 0), 10).start
    assert decide(CFG, ScheduleState(1000, 0), 10) == (True, "bytes", None)


def test_time_trigger_needs_new_records_and_the_interval():
    assert decide(CFG, ScheduleState(1, 0), 59_999) == (False, "not due", 60_000)
    assert decide(CFG, ScheduleState(1, 0), 60_000).start
    assert decide(CFG, ScheduleState(0, 0), 10**9) == (False, "no new records", None)
    no_time = CFG._replace(max_interval_ms=0)
    assert decide(no_time, ScheduleState(1, 0), 10**9) == (False, "not due", None)


def test_a_node_never_starts_while_its_own_snapshot_is_being_written():
    assert decide(CFG, ScheduleState(10**9, 0, writing=True), 5) == (False, "writing", None)


def test_a_voter_waits_for_its_turn_and_is_told_when_it_comes():
    # 3 voters, turns of 1 s: at t=5.5 s it is turn 5, which belongs to index 2.
    assert decide(CFG, ScheduleState(1000, 0), 5500, index=2, voters=3).start
    d = decide(CFG, ScheduleState(1000, 0), 5500, index=0, voters=3)
    assert d == (False, "bytes, waiting for its turn", 6000)
    assert decide(CFG, ScheduleState(1000, 0), 7000, index=1, voters=3).start


def test_a_voter_skips_its_turn_while_another_voter_is_writing():
    d = decide(CFG, ScheduleState(1000, 0), 5500, index=2, voters=3, others_writing=True)
    assert d == (False, "bytes, another voter is writing", 8000)


def test_an_overdue_snapshot_starts_at_once_whatever_the_turn():
    d = decide(CFG, ScheduleState(2000, 0), 5500, index=0, voters=3, others_writing=True)
    assert d == (True, "bytes, overdue", None)


def test_observers_do_not_take_turns():
    assert voter_index([3, 1, 2], 7) is None
    assert decide(CFG, ScheduleState(1000, 0), 5500, index=None, voters=3).start
    assert [voter_index([3, 1, 2], i) for i in (1, 2, 3)] == [0, 1, 2]


def test_limits_come_from_kafkas_property_names():
    assert ScheduleConfig.from_config({}).max_bytes == 20 * 1024 * 1024
    cfg = ScheduleConfig.from_config({"metadata.log.max.record.bytes.between.snapshots": "5",
                                      "metadata.log.max.snapshot.interval.ms": "7"}, turn_ms=3)
    assert cfg[:3] == (5, 7, 3)
    node = NodeConfig.from_properties({"process.roles": "controller", "node.id": "1",
                                       "controller.quorum.voters": "1@localhost:9093",
                                       "listeners": "CONTROLLER://localhost:9093",
                                       "controller.listener.names": "CONTROLLER", "log.dirs": "/tmp/x",
                                       "metadata.log.max.snapshot.interval.ms": "1234"})
    assert ScheduleConfig.from_config(node).max_interval_ms == 1234


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 5), st.lists(st.integers(0, 400), min_size=50, max_size=300), st.integers(0, 999))
def test_voters_fed_the_same_log_never_start_in_the_same_turn(voters, commits, clock_start):
    """Every voter commits the same bytes at the same times (the worst case for staggering);
    snapshots take half a turn. Two starts in one turn never happen, and no snapshot waits
    more than the voters' turns once due."""
    cfg = ScheduleConfig(max_bytes=1000, max_interval_ms=20_000, turn_ms=1000, overdue_factor=100)
    state = [ScheduleState(0, clock_start) for _ in range(voters)]
    done_at = [None] * voters
    starts: dict[int, list[int]] = {}
    due_since = [None] * voters
    now = clock_start
    for nbytes in commits:
        now += 250
        for i in range(voters):
            s = state[i]
            if s.writing and now >= done_at[i]:
                s = s._replace(writing=False)
            s = s._replace(bytes_since_snapshot=s.bytes_since_snapshot + nbytes)
            others = any(state[j].writing for j in range(voters) if j != i)
            d = decide(cfg, s, now, index=i, voters=voters, others_writing=others)
            due = s.bytes_since_snapshot >= cfg.max_bytes and not s.writing
            if due and due_since[i] is None:
                due_since[i] = now
            if d.start:
                starts.setdefault(now // cfg.turn_ms, []).append(i)
                assert now - due_since[i] <= (voters + 1) * cfg.turn_ms
                due_since[i] = None
                s = ScheduleState(0, now, writing=True)
                done_at[i] = now + cfg.turn_ms // 2
            state[i] = s
    assert all(len(set(v)) == 1 for v in starts.values()), starts  # one voter per turn (it may start twice)
