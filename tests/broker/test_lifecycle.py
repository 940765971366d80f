"""The broker's lifecycle state machine alone (seed 004's broker states, Kafka's
BrokerLifecycleManager): what it sends, how each controller answer moves it, and when it may
serve clients."""

from __future__ import annotations

import uuid

from kraft.broker.lifecycle import FAST_HEARTBEAT_MS, SUPPORTED_FEATURES, BrokerLifecycle, BrokerState
from kraft.errors import ErrorCode as E
from kraft.protocol import BrokerHeartbeatResponse, BrokerRegistrationResponse

SESSION = 9000
INTERVAL = 2000


def lifecycle(**kw) -> BrokerLifecycle:
    return BrokerLifecycle(4, "cluster-x", listeners=[("PLAINTEXT", "127.0.0.1", 9094, 0)], rack="r1",
                           log_dir_ids=[uuid.UUID(int=7)], session_timeout_ms=SESSION,
                           heartbeat_interval_ms=INTERVAL, **kw)


def registered(code=0, epoch=42):
    return BrokerRegistrationResponse(error_code=int(code), broker_epoch=epoch)


def beat(code=0, *, fenced=False, caught_up=True, shut_down=False):
    return BrokerHeartbeatResponse(error_code=int(code), is_fenced=fenced, is_caught_up=caught_up,
                                   should_shut_down=shut_down)


def running(now=0) -> BrokerLifecycle:
    lc = lifecycle()
    lc.ready_to_unfence = True  # its first caught-up image is published
    lc.on_registration(registered(), now)
    lc.on_heartbeat(beat(), now)
    assert lc.state == BrokerState.RUNNING
    return lc


def test_registration_request_carries_identity_listeners_rack_features_and_log_dirs():
    lc = lifecycle()
    req = lc.registration_request()
    assert (req.broker_id, req.cluster_id, req.rack) == (4, "cluster-x", "r1")
    assert req.incarnation_id == lc.incarnation_id
    assert [(l.name, l.host, l.port) for l in req.listeners] == [("PLAINTEXT", "127.0.0.1", 9094)]
    assert {f.name: (f.min_supported_version, f.max_supported_version) for f in req.features} == SUPPORTED_FEATURES
    assert req.log_dirs == [uuid.UUID(int=7)]


def test_registration_names_the_epoch_of_a_clean_shutdown():
    assert lifecycle().registration_request().previous_broker_epoch == -1
    lc = BrokerLifecycle(4, "cluster-x", listeners=[("PLAINTEXT", "127.0.0.1", 9094, 0)], previous_broker_epoch=12)
    assert lc.registration_request().previous_broker_epoch == 12


def test_each_process_start_gets_a_new_incarnation_id():
    assert lifecycle().incarnation_id != lifecycle().incarnation_id


def test_registered_broker_stays_fenced_and_not_serving_until_the_controller_unfences_it():
    lc = lifecycle()
    assert lc.wants_registration() and not lc.serving(0)
    assert lc.on_registration(registered(epoch=42), 0) == 0
    assert lc.state == BrokerState.RECOVERY and lc.broker_epoch == 42 and lc.fenced
    assert not lc.serving(1)
    assert lc.heartbeat_request(10).broker_epoch == 42
    lc.on_heartbeat(beat(fenced=True, caught_up=False), 100)
    assert lc.state == BrokerState.RECOVERY and not lc.serving(100)
    assert lc.next_heartbeat_ms() == FAST_HEARTBEAT_MS  # catching up: ask often
    lc.on_heartbeat(beat(fenced=False), 200)
    assert lc.state == BrokerState.RUNNING and lc.serving(200)
    assert lc.next_heartbeat_ms() == INTERVAL


def test_heartbeats_ask_to_stay_fenced_until_ready_to_unfence():
    lc = lifecycle()
    lc.on_registration(registered(), 0)
    assert lc.heartbeat_request(5).want_fence
    lc.ready_to_unfence = True
    assert not lc.heartbeat_request(5).want_fence


def test_heartbeat_reports_the_metadata_offset_it_is_given():
    lc = running()
    req = lc.heartbeat_request(1234)
    assert req.current_metadata_offset == 1234 and not req.want_shut_down and not req.want_fence


def test_refused_registration_stays_starting_and_retries():
    lc = lifecycle()
    assert lc.on_registration(registered(E.DUPLICATE_BROKER_REGISTRATION, -1), 0) == E.DUPLICATE_BROKER_REGISTRATION
    assert lc.state == BrokerState.STARTING and lc.wants_registration() and not lc.registered
    assert not lc.serving(0)


def test_a_broker_unheard_from_past_its_session_stops_serving():
    """A paused broker knows the controller fenced it even before its image says so."""
    lc = running(now=1000)
    assert lc.serving(1000 + SESSION - 1)
    assert not lc.serving(1000 + SESSION)
    lc.on_heartbeat(beat(), 1000 + SESSION + 5)
    assert lc.serving(1000 + SESSION + 5)


def test_the_lease_runs_from_when_the_heartbeat_was_sent():
    """An answer that waited in the socket while the process was paused (SIGSTOP) is older than
    it looks: it must not make the broker serve past its session."""
    lc = running(now=0)
    lc.on_heartbeat(beat(fenced=False), 100)  # sent at 100, just before a long pause
    resumed = 100 + SESSION + 5000
    assert not lc.serving(resumed)
    lc.on_heartbeat(beat(fenced=False), 50)  # an even older answer arriving late changes nothing
    assert lc.last_contact_ms == 100


def test_failed_heartbeats_do_not_renew_the_lease():
    lc = running(now=0)
    lc.on_heartbeat(beat(E.NOT_CONTROLLER, fenced=True), 5000)
    assert lc.state == BrokerState.RUNNING and lc.last_contact_ms == 0
    assert not lc.serving(SESSION)


def test_fenced_by_the_controller_while_running_goes_back_to_recovery():
    lc = running()
    lc.on_heartbeat(beat(fenced=True), 10)
    assert lc.state == BrokerState.RECOVERY and not lc.serving(10)
    lc.on_heartbeat(beat(fenced=False), 20)
    assert lc.state == BrokerState.RUNNING and lc.serving(20)


def test_lost_registration_registers_again_with_the_same_incarnation():
    for code in (E.STALE_BROKER_EPOCH, E.BROKER_ID_NOT_REGISTERED):
        lc = running()
        incarnation = lc.incarnation_id
        lc.on_heartbeat(beat(code), 10)
        assert lc.state == BrokerState.STARTING and lc.wants_registration() and lc.broker_epoch == -1
        assert not lc.serving(10) and lc.lost_registrations == 1
        assert lc.registration_request().incarnation_id == incarnation
        lc.on_registration(registered(epoch=77), 20)
        assert lc.state == BrokerState.RECOVERY and lc.broker_epoch == 77


def test_controlled_shutdown_asks_until_the_controller_says_should_shut_down():
    lc = running()
    lc.begin_controlled_shutdown()
    assert lc.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN and not lc.done
    assert lc.heartbeat_request(5).want_shut_down
    assert lc.serving(1)  # it still leads until the controller moved leadership away
    lc.on_heartbeat(beat(shut_down=False), 2)
    assert not lc.done
    lc.on_heartbeat(beat(shut_down=True), 3)
    assert lc.state == BrokerState.SHUTTING_DOWN and lc.done and not lc.serving(3)


def test_unregistered_broker_shuts_down_at_once():
    lc = lifecycle()
    lc.begin_controlled_shutdown()
    assert lc.done and not lc.wants_registration()


def test_registration_lost_during_controlled_shutdown_ends_it():
    lc = running()
    lc.begin_controlled_shutdown()
    lc.on_heartbeat(beat(E.STALE_BROKER_EPOCH), 1)
    assert lc.done and not lc.wants_registration()


def test_late_registration_answer_after_shutdown_began_is_ignored():
    lc = lifecycle()
    lc.begin_controlled_shutdown()
    lc.on_registration(registered(epoch=5), 1)
    assert lc.done and not lc.registered


def test_every_heartbeat_names_the_offline_log_directories():
    """KIP-858: BrokerHeartbeat v1 ``OfflineLogDirs`` carries the failed directories' ids."""
    lc = lifecycle()
    lc.on_registration(registered(), 0)
    assert lc.heartbeat_request(5).offline_log_dirs == []
    lc.offline_log_dirs = lambda: [uuid.UUID(int=7)]
    req = lc.heartbeat_request(5)
    assert req.offline_log_dirs == [uuid.UUID(int=7)]
    from kraft.protocol.messages.broker_lifecycle import BrokerHeartbeatRequest
    assert BrokerHeartbeatRequest.decode(req.encode(1), 1).offline_log_dirs == [uuid.UUID(int=7)]
