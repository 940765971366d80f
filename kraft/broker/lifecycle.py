"""A broker's lifecycle as it talks to the active controller (seed 004's broker state machine,
the behaviour of Kafka's ``BrokerLifecycleManager``), sans-I/O: the server layer sends what
this builds and feeds back what the controller answered, with the time.

States (Kafka's ``BrokerState`` numbers): STARTING (not registered) -> RECOVERY (registered,
fenced, catching up with the metadata log) -> RUNNING (the controller unfenced it) ->
PENDING_CONTROLLED_SHUTDOWN (asked to shut down; the controller moves leadership away) ->
SHUTTING_DOWN (the controller said ``should_shut_down``, or there was nothing to move).
A lost registration (STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED: another incarnation took
the id, or an operator unregistered it) goes back to STARTING and registers again with the
same incarnation id; the controller refuses a second live incarnation of an id
(DUPLICATE_BROKER_REGISTRATION), so two processes are never both active.

``serving(now)`` says whether the broker may act as a partition leader for clients: RUNNING
(or shutting down in a controlled way), unfenced, and heard from the controller within
``broker.session.timeout.ms``. The last rule is KIP-631's lease ("brokers will re-enter the
fenced state if they are unable to communicate with the active controller within" the lease
time): a broker that was paused (SIGSTOP, a long stall) or cut off past its session knows the
controller has fenced it and may have moved its partitions, even before its metadata image
says so. The price: with no active controller for that long, brokers stop leading (the
controller quorum is the cluster's source of truth). No asyncio, no sockets, no clock.
"""

from __future__ import annotations

import enum
import uuid

from kraft.errors import ErrorCode
from kraft.protocol.messages.broker_lifecycle import BrokerHeartbeatRequest, BrokerRegistrationRequest

#: feature -> (min, max) level a broker of this build supports (the controller refuses a
#: registration that does not cover every finalized level). metadata.version: 3.3-IV3..4.0-IV3.
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    "metadata.version": (7, 25),
    "transaction.version": (0, 2),
    "group.version": (0, 1),
    "eligible.leader.replicas.version": (0, 1),
}
#: How often a broker that is not RUNNING asks (catching up, shutting down): Kafka sends
#: the next heartbeat at once in those states; a short pause keeps a lagging broker cheap.
FAST_HEARTBEAT_MS = 100
LOST_REGISTRATION = frozenset({int(ErrorCode.STALE_BROKER_EPOCH), int(ErrorCode.BROKER_ID_NOT_REGISTERED)})


class BrokerState(enum.IntEnum):
    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


class BrokerLifecycle:
    """Invariants: ``broker_epoch >= 0`` exactly when registered (RECOVERY, RUNNING,
    PENDING_CONTROLLED_SHUTDOWN); RUNNING implies the last heartbeat answer said unfenced."""

    def __init__(self, broker_id: int, cluster_id: str, *, listeners, rack: str | None = None,
                 log_dir_ids=(), incarnation_id: uuid.UUID | None = None, session_timeout_ms: int = 9000,
                 heartbeat_interval_ms: int = 2000, features: dict | None = None, previous_broker_epoch: int = -1):
        self.broker_id = broker_id
        #: the broker epoch this broker shut down cleanly in (its log dirs' clean-shutdown files),
        #: -1 after an unclean stop: KIP-966 keeps a cleanly restarted broker eligible to lead
        self.previous_broker_epoch = previous_broker_epoch
        self.cluster_id = cluster_id
        self.listeners = list(listeners)  # (name, host, port, security protocol)
        self.rack = rack
        self.log_dir_ids = list(log_dir_ids)
        #: () -> directory ids of the failed log dirs, sent in every heartbeat (KIP-858)
        self.offline_log_dirs = lambda: []
        self.incarnation_id = incarnation_id or uuid.uuid4()
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.features = dict(SUPPORTED_FEATURES if features is None else features)
        self.state = BrokerState.STARTING
        self.broker_epoch = -1
        self.fenced = True  # as the controller last said
        self.caught_up = False
        #: Set by the broker once it has published its first caught-up metadata image: until
        #: then its heartbeats ask to stay fenced (Kafka's ``setReadyToUnfence``), so the
        #: controller never gives it leadership of partitions it has not set up.
        self.ready_to_unfence = False
        self.last_contact_ms: int | None = None  # the last successful answer of the controller
        self.last_error: int = 0
        self.registrations = 0
        self.lost_registrations = 0

    # --- registration -------------------------------------------------------------------
    @property
    def registered(self) -> bool:
        return self.broker_epoch >= 0

    def wants_registration(self) -> bool:
        return not self.registered and self.state == BrokerState.STARTING

    def registration_request(self) -> BrokerRegistrationRequest:
        R = BrokerRegistrationRequest
        return R(broker_id=self.broker_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation_id,
                 listeners=[R.Listener(name=n, host=h, port=p, security_protocol=s) for n, h, p, s in self.listeners],
                 features=[R.Feature(name=name, min_supported_version=lo, max_supported_version=hi)
                           for name, (lo, hi) in sorted(self.features.items())],
                 rack=self.rack, is_migrating_zk_broker=False, log_dirs=self.log_dir_ids,
                 previous_broker_epoch=self.previous_broker_epoch)

    def on_registration(self, resp, sent_ms: int) -> int:
        """Apply a BrokerRegistration answer to a request sent at ``sent_ms``; returns its error
        code (0: registered)."""
        code = resp.error_code
        self.last_error = code
        if code != 0 or self.state != BrokerState.STARTING:
            return code
        self.broker_epoch = resp.broker_epoch
        self.state = BrokerState.RECOVERY
        self.fenced = True
        self.caught_up = False
        self.last_contact_ms = sent_ms
        self.registrations += 1
        return 0

    # --- heartbeats ---------------------------------------------------------------------
    def heartbeat_request(self, metadata_offset: int) -> BrokerHeartbeatRequest:
        return BrokerHeartbeatRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch,
                                      current_metadata_offset=metadata_offset,
                                      want_fence=not self.ready_to_unfence,
                                      want_shut_down=self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN,
                                      offline_log_dirs=list(self.offline_log_dirs()))

    def on_heartbeat(self, resp, sent_ms: int) -> int:
        """Apply a BrokerHeartbeat answer to a request sent at ``sent_ms``; returns its error code.
        The lease runs from the send time, not the arrival: an answer that waited in the socket
        while the process was paused must not make a fenced broker serve again."""
        code = resp.error_code
        self.last_error = code
        if not self.registered:
            return code
        if code in LOST_REGISTRATION:
            self.lost_registrations += 1
            self.broker_epoch = -1
            self.fenced = True
            self.caught_up = False
            self.state = (BrokerState.SHUTTING_DOWN if self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN
                          else BrokerState.STARTING)
            return code
        if code != 0:
            return code
        if self.last_contact_ms is None or sent_ms > self.last_contact_ms:
            self.last_contact_ms = sent_ms
        self.fenced = resp.is_fenced
        self.caught_up = resp.is_caught_up
        if self.state == BrokerState.RECOVERY and not resp.is_fenced:
            self.state = BrokerState.RUNNING
        elif self.state == BrokerState.RUNNING and resp.is_fenced:
            self.state = BrokerState.RECOVERY  # the controller fenced us: catch up again
        elif self.state == BrokerState.PENDING_CONTROLLED_SHUTDOWN and resp.should_shut_down:
            self.state = BrokerState.SHUTTING_DOWN
        return code

    def next_heartbeat_ms(self) -> int:
        if self.state == BrokerState.RUNNING:
            return self.heartbeat_interval_ms
        return min(self.heartbeat_interval_ms, FAST_HEARTBEAT_MS)

    # --- shutdown -----------------------------------------------------------------------
    def begin_controlled_shutdown(self) -> None:
        """Ask to shut down; an unregistered broker has nothing to move and goes at once."""
        if self.state in (BrokerState.RECOVERY, BrokerState.RUNNING) and self.registered:
            self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
        elif self.state != BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            self.state = BrokerState.SHUTTING_DOWN

    @property
    def done(self) -> bool:
        return self.state in (BrokerState.SHUTTING_DOWN, BrokerState.NOT_RUNNING)

    # --- what clients get ---------------------------------------------------------------
    def serving(self, now_ms: int) -> bool:
        if self.state not in (BrokerState.RUNNING, BrokerState.PENDING_CONTROLLED_SHUTDOWN) or self.fenced:
            return False
        return self.last_contact_ms is not None and now_ms - self.last_contact_ms < self.session_timeout_ms
