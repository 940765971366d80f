"""BrokerRegistration (62), BrokerHeartbeat (63) and UnregisterBroker (64), and the records
that fence a broker (KIP-631, Kafka's ClusterControlManager / BrokerHeartbeatManager rules).

Registration: a broker id held by a different, unfenced incarnation whose lease is still valid
gets DUPLICATE_BROKER_REGISTRATION; the same incarnation again is answered with its epoch and writes
nothing (a retry); otherwise a RegisterBrokerRecord (fenced) with a new, larger epoch. A
re-registration after an unclean restart first takes the old incarnation out of every ISR
(and ELR); after a clean one (its PreviousBrokerEpoch is the registered epoch) it stays eligible.

Heartbeat, per the broker's state in the image: fenced -> unfenced once its reported metadata
offset reached its registration record (``BrokerLeases.caught_up``), which also gives leaderless
partitions a leader if it can lead them; unfenced + want_fence -> fenced; unfenced +
want_shut_down -> controlled shutdown (leadership and ISR membership move off it); in controlled
shutdown -> should_shut_down once it leads nothing, fenced in the same step (Kafka's
SHUTDOWN_NOW). Handlers are pure: lease times are the controller's business
(``quorum_controller.py``).
"""

from __future__ import annotations

from kraft.controller.api_error import ApiError
from kraft.controller.log_directories import offline_dir_records
from kraft.controller.partition_change import elect_away, elect_leaderless
from kraft.controller.record_cache import record_count
from kraft.controller.result import ControllerResult
from kraft.controller.topic_policy import elr_min_isr, unclean_allowed
from kraft.controller.topic_handlers import acceptable_leader
from kraft.errors import ErrorCode
from kraft.metadata.records import (BrokerRegistrationChangeRecord, FenceBrokerRecord, RegisterBrokerRecord,
                                    UnfenceBrokerRecord, UnregisterBrokerRecord)
from kraft.protocol.messages.broker_lifecycle import (BrokerHeartbeatRequest, BrokerHeartbeatResponse,
                                                      BrokerRegistrationRequest, BrokerRegistrationResponse,
                                                      UnregisterBrokerRequest, UnregisterBrokerResponse)


def unclean_enabled(image, settings):
    """``topic_name -> bool``: unclean election allowed for that topic (its config wins)."""
    return lambda topic_name: unclean_allowed(image, settings, topic_name)


def _without(image, brokers: set):
    ok = acceptable_leader(image)
    return lambda b: b not in brokers and ok(b)


class MoveOff:
    """``elect_away`` (plus FenceBrokerRecords when ``fence``) as ``ControllerResult.steps``: the
    image's topics in order, a step ending once it holds ``step_records`` records, the fence
    records last (after every partition moved, as ``fence_records`` orders them). For one broker
    the partitions it leads go first (a pass over the topics), then those it is only in sync for:
    new leaders are in the log, and commit, before the ISR bookkeeping (``milestone`` marks
    where)."""

    def __init__(self, broker_ids, settings, step_records: int, *, fence: bool):
        self.gone = set(broker_ids)
        self.settings = settings
        self.step_records = max(1, step_records)
        self.fence = fence
        self._topics = None  # topic ids, in the image's order at the first step
        self._at = 0
        self._passes = [1, 2] if len(self.gone) == 1 else [0]  # elect_away's ``which``
        self._decided: dict = {}
        #: (what, index): set by the step in which the first pass ended, ``index`` = how many of
        #: that step's records belong to it (the controller logs when they commit)
        self.milestone = None

    def __call__(self, image) -> tuple[list, bool]:
        if self._topics is None:
            self._topics = list(image.topics.by_id)
        gone, by_id, records = self.gone, image.topics.by_id, []
        acceptable = _without(image, gone)
        unclean, min_isr = unclean_enabled(image, self.settings), elr_min_isr(image, self.settings)
        n = 0  # records in ``records`` (a run counts its partitions)
        while self._passes and n < self.step_records:
            if self._at >= len(self._topics):
                self._at = 0
                if self._passes.pop(0) != 2:
                    # (the records of this step before here are the last new leaders)
                    self.milestone = (f"broker(s) {sorted(gone)}: every partition led there has a new leader", n)
                continue
            topic = by_id.get(self._topics[self._at])
            self._at += 1
            if topic is not None:
                more = elect_away(image, gone, acceptable, unclean=unclean, min_isr=min_isr, topics=(topic,),
                                  decided=self._decided, which=self._passes[0], runs=True)
                records += more
                n += record_count(more)
        done = not self._passes
        if done and self.fence:
            brokers = image.cluster.brokers
            records += [FenceBrokerRecord(id=b, epoch=brokers[b].epoch) for b in sorted(gone)]
        return records, done


def fence_records(image, broker_ids, settings) -> list:
    """Fence ``broker_ids`` (registered, unfenced) and move every partition off them, in one
    pass over the partitions however many brokers go at once. The partition changes come first
    and the FenceBrokerRecords last (Kafka's order in ``handleBrokerFenced``): the unit is not
    atomic, so past one batch (10,000 records) it commits in parts, and no committed part may
    show a fenced broker leading a partition."""
    gone = set(broker_ids)
    brokers = image.cluster.brokers
    records = elect_away(image, gone, _without(image, gone), unclean=unclean_enabled(image, settings),
                         min_isr=elr_min_isr(image, settings))
    records += [FenceBrokerRecord(id=b, epoch=brokers[b].epoch) for b in sorted(gone)]
    return records


def leads_any(image, broker_id: int) -> bool:
    for topic in image.topics.by_id.values():
        for part in topic.partitions.values():
            if part.leader == broker_id:
                return True
    return False


# --- BrokerRegistration ---------------------------------------------------------------------


def handle_broker_registration(ctx, req: BrokerRegistrationRequest) -> ControllerResult:
    image = ctx.image
    R = BrokerRegistrationResponse
    if ctx.cluster_id and req.cluster_id != ctx.cluster_id:
        raise ApiError(ErrorCode.INCONSISTENT_CLUSTER_ID, f"Expected cluster ID {ctx.cluster_id}, but got "
                       f"cluster ID {req.cluster_id}")
    existing = image.cluster.brokers.get(req.broker_id)
    if existing is not None:
        if existing.incarnation_id == req.incarnation_id:
            return ControllerResult([], R(error_code=0, broker_epoch=existing.epoch))
        # Kafka's hasValidSession: a fenced broker holds no session (it shut down cleanly,
        # its lease expired, or it never caught up), so its next incarnation takes over at once.
        if not existing.fenced and ctx.leases is not None and ctx.leases.has_valid_session(req.broker_id,
                                                                                          ctx.now_ms):
            raise ApiError(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                           f"Another broker is registered with that broker id ({req.broker_id}).")
    supported = {f.name: (f.min_supported_version, f.max_supported_version) for f in req.features}
    for name, level in image.features.finalized_versions.items():
        lo, hi = supported.get(name, (0, 0))
        if not lo <= level <= hi:
            raise ApiError(ErrorCode.UNSUPPORTED_VERSION, f"Unable to register because the broker does not "
                           f"support finalized version {level} of {name}. The broker supports versions {lo}-{hi}.")
    epoch = max(ctx.next_offset, existing.epoch + 1 if existing is not None else 0)
    E, F = RegisterBrokerRecord.BrokerEndpoint, RegisterBrokerRecord.BrokerFeature
    records = [RegisterBrokerRecord(
        broker_id=req.broker_id, incarnation_id=req.incarnation_id, broker_epoch=epoch,
        is_migrating_zk_broker=req.is_migrating_zk_broker,
        end_points=[E(name=l.name, host=l.host, port=l.port, security_protocol=l.security_protocol)
                    for l in req.listeners],
        features=[F(name=f.name, min_supported_version=f.min_supported_version,
                    max_supported_version=f.max_supported_version) for f in req.features],
        rack=req.rack, fenced=True, in_controlled_shutdown=False, log_dirs=list(req.log_dirs))]
    # A new incarnation after an unclean restart may have lost unflushed data, so it must not
    # stay in any ISR or ELR (Kafka's handleBrokerUncleanShutdown). One that shut down cleanly
    # names the broker epoch it shut down in (KIP-966's PreviousBrokerEpoch, from its log dirs'
    # clean-shutdown files): it lost nothing and stays eligible, so the last ELR member of a
    # partition can lead it again when it comes back.
    if existing is None or req.previous_broker_epoch < 0 or req.previous_broker_epoch != existing.epoch:
        gone = {req.broker_id}
        records += elect_away(image, gone, _without(image, gone), unclean=unclean_enabled(image, ctx.settings),
                              min_isr=elr_min_isr(image, ctx.settings), unclean_shutdown=True)
    return ControllerResult(records, R(error_code=0, broker_epoch=epoch), atomic=True)


def broker_registration_error(req, version: int, code: int, message: str | None = None):
    return BrokerRegistrationResponse(error_code=int(code), broker_epoch=-1)


# --- BrokerHeartbeat ------------------------------------------------------------------------


def handle_broker_heartbeat(ctx, req: BrokerHeartbeatRequest) -> ControllerResult:
    image = ctx.image
    R = BrokerHeartbeatResponse
    broker = image.cluster.brokers.get(req.broker_id)
    if broker is None:
        raise ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {req.broker_id} is not registered.")
    if broker.epoch != req.broker_epoch:
        raise ApiError(ErrorCode.STALE_BROKER_EPOCH, f"Expected broker epoch {broker.epoch}, but got broker "
                       f"epoch {req.broker_epoch}")
    leases = ctx.leases
    caught_up = (leases.caught_up(broker.id, req.current_metadata_offset, broker.epoch) if leases is not None
                 else req.current_metadata_offset >= broker.epoch)
    unclean = unclean_enabled(image, ctx.settings)
    if req.offline_log_dirs:
        # KIP-858: a directory newly reported offline moves its partitions off this broker
        # first; the broker's other state changes wait for its next heartbeat.
        records = offline_dir_records(ctx, broker, req.offline_log_dirs)
        if records:
            return ControllerResult(records, R(error_code=0, is_caught_up=caught_up, is_fenced=broker.fenced))
    if broker.fenced:
        if req.want_shut_down:
            return ControllerResult([], R(error_code=0, is_caught_up=caught_up, is_fenced=True, should_shut_down=True))
        if req.want_fence or not caught_up:
            return ControllerResult([], R(error_code=0, is_caught_up=caught_up, is_fenced=True))
        records = [UnfenceBrokerRecord(id=broker.id, epoch=broker.epoch)]
        # Leaderless partitions this broker can now lead get it (Kafka's handleBrokerUnfenced).
        ok = acceptable_leader(image)
        records += elect_leaderless(image, lambda b: b == broker.id or ok(b), unclean=unclean,
                                    min_isr=elr_min_isr(image, ctx.settings))
        return ControllerResult(records, R(error_code=0, is_caught_up=True, is_fenced=False), atomic=True)
    if broker.in_controlled_shutdown:
        if leads_any(image, broker.id):  # e.g. a partition elected it before the shutdown began
            gone = {broker.id}
            records = elect_away(image, gone, _without(image, gone), unclean=unclean,
                          min_isr=elr_min_isr(image, ctx.settings))
            return ControllerResult(records, R(error_code=0, is_caught_up=caught_up, is_fenced=False))
        # Kafka's SHUTDOWN_NOW: the broker is fenced as it is told to go, so clients stop
        # seeing it at once rather than after its session expires.
        return ControllerResult([], R(error_code=0, is_caught_up=caught_up, is_fenced=True, should_shut_down=True),
                                steps=MoveOff([broker.id], ctx.settings, ctx.step_records, fence=True))
    if req.want_fence:
        return ControllerResult([], R(error_code=0, is_caught_up=caught_up, is_fenced=True),
                                steps=MoveOff([broker.id], ctx.settings, ctx.step_records, fence=True))
    if req.want_shut_down:
        records = [BrokerRegistrationChangeRecord(broker_id=broker.id, broker_epoch=broker.epoch,
                                                  in_controlled_shutdown=1)]
        return ControllerResult(records, R(error_code=0, is_caught_up=caught_up, is_fenced=False),
                                steps=MoveOff([broker.id], ctx.settings, ctx.step_records, fence=False))
    return ControllerResult([], R(error_code=0, is_caught_up=caught_up, is_fenced=False))


def broker_heartbeat_error(req, version: int, code: int, message: str | None = None):
    return BrokerHeartbeatResponse(error_code=int(code), is_caught_up=False, is_fenced=True, should_shut_down=False)


# --- UnregisterBroker -----------------------------------------------------------------------


def handle_unregister_broker(ctx, req: UnregisterBrokerRequest) -> ControllerResult:
    image = ctx.image
    broker = image.cluster.brokers.get(req.broker_id)
    if broker is None:
        raise ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker ID {req.broker_id} is not currently registered")
    gone = {broker.id}
    records = elect_away(image, gone, _without(image, gone), unclean=unclean_enabled(image, ctx.settings),
                          min_isr=elr_min_isr(image, ctx.settings))
    records.append(UnregisterBrokerRecord(broker_id=broker.id, broker_epoch=broker.epoch))
    return ControllerResult(records, UnregisterBrokerResponse(error_code=0), atomic=True)


def unregister_broker_error(req, version: int, code: int, message: str | None = None):
    return UnregisterBrokerResponse(error_code=int(code), error_message=message)


HANDLERS = {62: handle_broker_registration, 63: handle_broker_heartbeat, 64: handle_unregister_broker}
ERROR_RESPONSES = {62: broker_registration_error, 63: broker_heartbeat_error, 64: unregister_broker_error}
