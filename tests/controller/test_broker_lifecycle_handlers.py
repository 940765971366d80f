"""BrokerRegistration, BrokerHeartbeat (leases, fencing, unfencing, controlled shutdown),
UnregisterBroker and DescribeCluster on the controller."""

import uuid

from kraft.errors import ErrorCode as E
from kraft.protocol import DescribeClusterRequest, UnregisterBrokerRequest
from controller_fakes import FakeRaft, active_controller, cluster_of, create_topics, heartbeat, registration

SESSION = 9000


def submit(raft, ctl, api_key, request, now_ms=0, version=0, commit=True):
    token = object()
    ctl.submit(api_key, request, version, now_ms, token)
    if commit:
        raft.commit(ctl)
    return ctl.respond.got.get(token)


def test_registration_is_fenced_with_a_growing_epoch_and_a_retry_writes_nothing():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    first = submit(raft, ctl, 62, registration(1))
    assert first.error_code == 0 and ctl.image.cluster.brokers[1].fenced
    end = raft.end
    again = submit(raft, ctl, 62, registration(1))
    assert (again.error_code, again.broker_epoch, raft.end) == (0, first.broker_epoch, end)
    other = submit(raft, ctl, 62, registration(2))
    assert other.broker_epoch > first.broker_epoch


def test_a_new_incarnation_of_a_live_broker_is_a_duplicate_until_its_lease_expires():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    epochs = cluster_of(raft, ctl, 3)
    ctl.submit(19, create_topics(("t", 6, 3)), 7, 0, "t")
    raft.commit(ctl)
    new = registration(2, incarnation=uuid.UUID(int=77))
    assert submit(raft, ctl, 62, new, now_ms=1000).error_code == E.DUPLICATE_BROKER_REGISTRATION
    resp = submit(raft, ctl, 62, new, now_ms=SESSION + 1)
    assert resp.error_code == 0 and resp.broker_epoch > epochs[2]
    b = ctl.image.cluster.brokers[2]
    assert b.incarnation_id == uuid.UUID(int=77) and b.fenced
    # the old incarnation is out of every ISR and leads nothing
    for p in ctl.image.topics.by_name["t"].partitions.values():
        assert 2 not in p.isr and p.leader != 2


def test_heartbeat_errors_for_unknown_brokers_and_stale_epochs():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    epoch = submit(raft, ctl, 62, registration(1)).broker_epoch
    assert submit(raft, ctl, 63, heartbeat(9, 0, 0)).error_code == E.BROKER_ID_NOT_REGISTERED
    assert submit(raft, ctl, 63, heartbeat(1, epoch + 100, 0)).error_code == E.STALE_BROKER_EPOCH


def test_a_broker_is_unfenced_only_once_it_read_its_registration_record():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    raft.append_foreign([b"padding"] * 5)  # the registration record does not sit at the epoch's offset
    raft.commit(ctl)
    epoch = submit(raft, ctl, 62, registration(1)).broker_epoch
    registered_at = raft.end - 1
    behind = submit(raft, ctl, 63, heartbeat(1, epoch, registered_at - 1))
    assert behind.is_fenced and not behind.is_caught_up and ctl.image.cluster.brokers[1].fenced
    caught = submit(raft, ctl, 63, heartbeat(1, epoch, registered_at))
    assert not caught.is_fenced and caught.is_caught_up and not ctl.image.cluster.brokers[1].fenced


def test_an_expired_lease_fences_the_broker_and_moves_its_leaderships():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    epochs = cluster_of(raft, ctl, 3)
    ctl.submit(19, create_topics(("t", 30, 3)), 7, 0, "t")
    raft.commit(ctl)
    led = [p for p in ctl.image.topics.by_name["t"].partitions.values() if p.leader == 3]
    assert led
    for now in (4000, 8000):  # 1 and 2 keep heartbeating, 3 went silent at 0
        for b in (1, 2):
            submit(raft, ctl, 63, heartbeat(b, epochs[b], raft.end), now_ms=now)
    assert ctl.tick(SESSION - 1) == 0
    assert ctl.tick(SESSION) == 1
    raft.commit(ctl)
    img = ctl.image
    assert img.cluster.brokers[3].fenced and not img.cluster.brokers[1].fenced
    for p in img.topics.by_name["t"].partitions.values():
        assert p.leader in (1, 2) and 3 not in p.isr
    # it comes back: unfenced once caught up; it is not leader again (no preferred election here)
    back = submit(raft, ctl, 63, heartbeat(3, epochs[3], raft.end), now_ms=SESSION + 10)
    assert not back.is_fenced and not ctl.image.cluster.brokers[3].fenced


def test_a_fenced_broker_that_was_the_last_isr_member_gets_leadership_back_when_unfenced():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    epochs = cluster_of(raft, ctl, 2)
    ctl.submit(19, create_topics(("solo", {0: [2]})), 7, 0, "t")
    raft.commit(ctl)
    submit(raft, ctl, 63, heartbeat(2, epochs[2], raft.end, want_fence=True))
    p = ctl.image.topics.by_name["solo"].partitions[0]
    assert (p.leader, p.isr) == (-1, (2,))
    submit(raft, ctl, 63, heartbeat(2, epochs[2], raft.end))
    p = ctl.image.topics.by_name["solo"].partitions[0]
    assert (p.leader, p.isr) == (2, (2,))


def test_controlled_shutdown_moves_leaders_off_then_answers_should_shut_down():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    epochs = cluster_of(raft, ctl, 3)
    ctl.submit(19, create_topics(("t", 12, 2)), 7, 0, "t")
    raft.commit(ctl)
    first = submit(raft, ctl, 63, heartbeat(1, epochs[1], raft.end, want_shut_down=True))
    assert first.error_code == 0 and not first.should_shut_down
    assert ctl.image.cluster.brokers[1].in_controlled_shutdown
    parts = ctl.image.topics.by_name["t"].partitions.values()
    assert all(p.leader != 1 for p in parts)
    # new partitions never land on a broker that is shutting down
    ctl.submit(19, create_topics(("after", 6, 2)), 7, 0, "after")
    raft.commit(ctl)
    assert all(1 not in p.replicas for p in ctl.image.topics.by_name["after"].partitions.values())
    second = submit(raft, ctl, 63, heartbeat(1, epochs[1], raft.end, want_shut_down=True))
    assert second.should_shut_down and second.is_fenced
    assert ctl.image.cluster.brokers[1].fenced  # Kafka's SHUTDOWN_NOW fences it at once
    again = submit(raft, ctl, 63, heartbeat(1, epochs[1], raft.end, want_shut_down=True))
    assert again.should_shut_down  # a retried heartbeat gets the same answer


def test_unregister_broker_removes_it_from_the_image_and_every_isr():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    cluster_of(raft, ctl, 3)
    ctl.submit(19, create_topics(("t", 9, 3)), 7, 0, "t")
    raft.commit(ctl)
    assert submit(raft, ctl, 64, UnregisterBrokerRequest(broker_id=3)).error_code == 0
    assert 3 not in ctl.image.cluster.brokers
    assert all(3 not in p.isr and p.leader != 3 for p in ctl.image.topics.by_name["t"].partitions.values())
    assert submit(raft, ctl, 64, UnregisterBrokerRequest(broker_id=3)).error_code == E.BROKER_ID_NOT_REGISTERED


def test_describe_cluster_lists_unfenced_brokers_from_the_image():
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    cluster_of(raft, ctl, 2)
    submit(raft, ctl, 62, registration(3))  # registered, still fenced
    resp = submit(raft, ctl, 60, DescribeClusterRequest(endpoint_type=1), version=1)
    assert [(b.broker_id, b.port) for b in resp.brokers] == [(1, 9001), (2, 9002)]
    assert resp.cluster_id == "test-cluster"


def test_describe_cluster_reports_kafkas_authorized_operations_without_an_authorizer():
    """AuthHelper.authorizedOperations with no authorizer: every CLUSTER operation when asked,
    Integer.MIN_VALUE when not."""
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    asked = submit(raft, ctl, 60, DescribeClusterRequest(include_cluster_authorized_operations=True), version=1)
    assert asked.cluster_authorized_operations == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
    assert submit(raft, ctl, 60, DescribeClusterRequest(), version=1).cluster_authorized_operations == -(1 << 31)
