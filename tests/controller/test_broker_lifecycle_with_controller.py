"""A broker's lifecycle (``kraft.broker.lifecycle``) and its metadata follower against the real
controller handlers over a fake Raft log: register, catch up, unfence; lease lost and regained;
a duplicate node id is refused while the first holds its lease and never both are active;
controlled shutdown moves leadership away before ``should_shut_down``."""

from __future__ import annotations

from kraft.broker.lifecycle import BrokerLifecycle, BrokerState
from kraft.broker.metadata_follower import MetadataFollower
from kraft.errors import ErrorCode as E
from controller_fakes import CLUSTER, FakeRaft, active_controller, create_topics

SESSION = 3000


class Broker:
    """One broker process: a lifecycle plus the follower that reads committed metadata."""

    def __init__(self, broker_id: int, port: int = 9092):
        self.lc = BrokerLifecycle(broker_id, CLUSTER, listeners=[("PLAINTEXT", "127.0.0.1", port, 0)],
                                  session_timeout_ms=SESSION, heartbeat_interval_ms=500)
        self.lc.ready_to_unfence = True  # BrokerRole sets it once its first image is published
        self.follower = MetadataFollower()

    def step(self, ctl, raft, now: int):
        """Send what the lifecycle wants (registration or heartbeat), commit, apply the answer."""
        token = object()
        if self.lc.wants_registration():
            ctl.submit(62, self.lc.registration_request(), 4, now, token)
            raft.commit(ctl, *FOLLOWERS)
            return self.lc.on_registration(ctl.respond.got[token], now)
        ctl.submit(63, self.lc.heartbeat_request(self.follower.last_applied_offset), 1, now, token)
        raft.commit(ctl, *FOLLOWERS)
        return self.lc.on_heartbeat(ctl.respond.got[token], now)


FOLLOWERS: list = []


def setup(*brokers):
    raft = FakeRaft()
    ctl, _ = active_controller(raft, **{"broker.session.timeout.ms": SESSION})
    FOLLOWERS[:] = [b.follower for b in brokers]
    return raft, ctl


def test_register_catch_up_unfence():
    b = Broker(1)
    raft, ctl = setup(b)
    assert b.step(ctl, raft, 0) == 0 and b.lc.state == BrokerState.RECOVERY
    assert b.follower.image.cluster.brokers[1].fenced
    assert b.step(ctl, raft, 10) == 0
    assert b.lc.state == BrokerState.RUNNING and b.lc.serving(10)
    assert not b.follower.image.cluster.brokers[1].fenced  # the follower saw the unfence record


def test_a_lagging_follower_is_not_unfenced():
    b = Broker(1)
    raft, ctl = setup(b)
    b.step(ctl, raft, 0)
    b.follower.next_offset = 0  # pretend it has read nothing (it reports offset -1)
    b.step(ctl, raft, 10)
    assert b.lc.state == BrokerState.RECOVERY and not b.lc.serving(10)


def test_a_broker_that_has_not_published_its_first_image_stays_fenced():
    """Kafka's setReadyToUnfence: caught up with its registration is not enough, the broker
    asks to stay fenced until it has acted on a caught-up image (its logs are set up)."""
    b = Broker(1)
    b.lc.ready_to_unfence = False
    raft, ctl = setup(b)
    b.step(ctl, raft, 0)
    for now in (10, 20, 30):
        b.step(ctl, raft, now)
        assert b.lc.state == BrokerState.RECOVERY and b.lc.fenced and b.lc.caught_up
    b.lc.ready_to_unfence = True
    b.step(ctl, raft, 40)
    assert b.lc.state == BrokerState.RUNNING and b.lc.serving(40)


def test_a_cleanly_stopped_broker_registers_again_at_once():
    """Kafka's hasValidSession is false for a fenced broker: the next incarnation of a broker
    that finished its controlled shutdown (fenced by SHUTDOWN_NOW) registers without waiting
    for the old lease to run out (it waited broker.session.timeout.ms)."""
    first, second = Broker(1), Broker(1, 9093)
    raft, ctl = setup(first, second)
    first.step(ctl, raft, 0)
    first.step(ctl, raft, 10)
    assert first.lc.serving(10)
    first.lc.begin_controlled_shutdown()
    for now in (20, 30, 40):
        if not first.lc.done:
            first.step(ctl, raft, now)
    assert first.lc.done and ctl.image.cluster.brokers[1].fenced
    assert second.step(ctl, raft, 50) == 0  # well within the old incarnation's session
    second.step(ctl, raft, 60)
    assert second.lc.serving(60)


def test_duplicate_node_id_is_refused_and_never_both_active():
    first, second = Broker(1, 9092), Broker(1, 9093)
    raft, ctl = setup(first, second)
    first.step(ctl, raft, 0)
    first.step(ctl, raft, 10)
    assert first.lc.serving(10)
    assert second.step(ctl, raft, 20) == E.DUPLICATE_BROKER_REGISTRATION
    assert not second.lc.serving(20) and second.lc.wants_registration()
    # The first stops heartbeating: the controller fences it, the second may now take the id.
    later = 10 + SESSION + 1
    ctl.tick(later)
    raft.commit(ctl, *FOLLOWERS)
    assert second.step(ctl, raft, later) == 0
    second.step(ctl, raft, later + 1)
    assert second.lc.serving(later + 1)
    # The first wakes up: its lease is gone from its own point of view, and the controller says
    # its registration is stale; it registers again and is refused. Never both active.
    assert not first.lc.serving(later + 2)
    assert first.step(ctl, raft, later + 2) == E.STALE_BROKER_EPOCH
    assert first.lc.state == BrokerState.STARTING
    assert first.step(ctl, raft, later + 3) == E.DUPLICATE_BROKER_REGISTRATION
    assert [b.lc.serving(later + 3) for b in (first, second)] == [False, True]
    assert first.follower.image.cluster.brokers[1].listeners[0].port == 9093


def test_fenced_after_a_pause_then_unfenced_by_its_next_heartbeat():
    b = Broker(1)
    raft, ctl = setup(b)
    b.step(ctl, raft, 0)
    b.step(ctl, raft, 10)
    ctl.tick(10 + SESSION)
    raft.commit(ctl, *FOLLOWERS)
    assert b.follower.image.cluster.brokers[1].fenced
    assert not b.lc.serving(10 + SESSION)
    b.step(ctl, raft, 20 + SESSION)  # caught up: the controller unfences it at once
    assert b.lc.state == BrokerState.RUNNING and b.lc.serving(20 + SESSION)
    assert not b.follower.image.cluster.brokers[1].fenced


def test_controlled_shutdown_moves_leadership_before_should_shut_down():
    brokers = [Broker(i, 9090 + i) for i in (1, 2)]
    raft, ctl = setup(*brokers)
    for b in brokers:
        b.step(ctl, raft, 0)
    for b in brokers:
        b.step(ctl, raft, 1)
    ctl.submit(19, create_topics(("t", {0: [1, 2], 1: [2, 1]})), 7, 2, "ct")
    raft.commit(ctl, *FOLLOWERS)
    b1 = brokers[0]
    parts = b1.follower.image.topics.by_name["t"].partitions
    assert parts[0].leader == 1
    b1.lc.begin_controlled_shutdown()
    for now in range(3, 10):
        b1.step(ctl, raft, now)
        if b1.lc.done:
            break
    assert b1.lc.state == BrokerState.SHUTTING_DOWN
    parts = b1.follower.image.topics.by_name["t"].partitions
    assert all(p.leader == 2 for p in parts.values()) and all(1 not in p.isr for p in parts.values())


def _running_with_session(session_ms: int, **settings):
    b = Broker(1)
    raft = FakeRaft()
    ctl, _ = active_controller(raft, **{"broker.session.timeout.ms": session_ms, "broker.heartbeat.interval.ms": 500,
                                        **settings})
    FOLLOWERS[:] = [b.follower]
    b.step(ctl, raft, 0)
    b.step(ctl, raft, 10)
    assert b.lc.serving(10)
    return b, raft, ctl


def _fenced_at(ctl, raft, now) -> bool:
    ctl.tick(now)
    raft.commit(ctl, *FOLLOWERS)
    return ctl.image.cluster.brokers[1].fenced


def test_a_broker_whose_connection_closed_is_fenced_after_the_disconnected_timeout_not_the_session():
    """SIGKILL closes the broker's sockets: it is fenced 3 s after the close (so the partitions
    it led, group coordinators among them, move then), not after the 9 s session."""
    b, raft, ctl = _running_with_session(9000, **{"kraft.broker.disconnected.session.timeout.ms": 3000})
    ctl.broker_disconnected([1], 1000)
    assert not _fenced_at(ctl, raft, 3999)
    assert _fenced_at(ctl, raft, 4000)


def test_a_broker_that_heartbeats_again_after_its_connection_closed_keeps_its_session():
    b, raft, ctl = _running_with_session(9000, **{"kraft.broker.disconnected.session.timeout.ms": 3000})
    ctl.broker_disconnected([1], 1000)
    b.step(ctl, raft, 2500)  # reconnected and heartbeated
    assert not _fenced_at(ctl, raft, 9000)
    assert _fenced_at(ctl, raft, 2500 + 9000)


def test_disconnected_timeout_off_or_too_short_keeps_kafkas_session_or_a_heartbeats_grace():
    b, raft, ctl = _running_with_session(9000, **{"kraft.broker.disconnected.session.timeout.ms": -1})
    ctl.broker_disconnected([1], 1000)
    assert not _fenced_at(ctl, raft, 9000)  # Kafka's behaviour: the whole session from the heartbeat at 10
    assert _fenced_at(ctl, raft, 9010)
    # Shorter than a heartbeat interval (500 ms here) plus a second: a live broker reconnecting
    # would be fenced before its next heartbeat, so the floor applies.
    b, raft, ctl = _running_with_session(9000, **{"kraft.broker.disconnected.session.timeout.ms": 100})
    ctl.broker_disconnected([1], 1000)
    assert not _fenced_at(ctl, raft, 2499)
    assert _fenced_at(ctl, raft, 2500)
