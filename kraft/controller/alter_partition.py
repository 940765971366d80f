"""AlterPartition (56): a partition leader proposes a new ISR (Kafka's
``ReplicationControlManager.alterPartition``).

The request's broker must be registered at the epoch it names (else STALE_BROKER_EPOCH for the
whole request). Per partition, in Kafka's order: unknown -> UNKNOWN_TOPIC_OR_PARTITION (unknown
topic id from v2: UNKNOWN_TOPIC_ID); epochs newer than ours -> NOT_CONTROLLER (we are likely
stale); an older leader epoch -> FENCED_LEADER_EPOCH; not the leader -> INVALID_REQUEST; an older
partition epoch -> INVALID_UPDATE_VERSION; an ISR with strangers, duplicates or without the
leader, or a recovery-state regression -> INVALID_REQUEST; an ISR member that is unregistered,
fenced, shutting down or at another broker epoch (v3) -> INELIGIBLE_REPLICA (v2+; before:
OPERATION_NOT_ATTEMPTED). An accepted ISR goes through ``partition_change.build``, which also
completes a reassignment whose new replicas all joined; when that moves leadership away from
the requester it gets NEW_LEADER_ELECTED (v2+; before: FENCED_LEADER_EPOCH). This module must
not elect leaders itself.
"""

from __future__ import annotations

from kraft.controller.api_error import ApiError
from kraft.controller.partition_change import ONLINE, UNCLEAN, build
from kraft.controller.result import ControllerResult
from kraft.controller.topic_policy import elr_min_isr, unclean_allowed
from kraft.controller.topic_handlers import acceptable_leader
from kraft.errors import ErrorCode
from kraft.metadata.partition import NO_LEADER_CHANGE, RECOVERED, RECOVERING
from kraft.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from kraft.protocol.primitives import ZERO_UUID

E = ErrorCode
RTopic = AlterPartitionResponse.Topic
RPartition = RTopic.Partition


def check_broker_epoch(image, broker_id: int, broker_epoch: int) -> None:
    """Kafka's ``ClusterControlManager.checkBrokerEpoch``."""
    broker = image.cluster.brokers.get(broker_id)
    if broker is None:
        raise ApiError(E.STALE_BROKER_EPOCH, f"No broker registration found for broker {broker_id}")
    if broker.epoch != broker_epoch:
        raise ApiError(E.STALE_BROKER_EPOCH, f"Expected broker epoch {broker.epoch}, but got broker epoch "
                       f"{broker_epoch}")


def _new_isr(p, version: int) -> list[tuple[int, int]]:
    """(broker id, broker epoch or -1) of each proposed ISR member."""
    if version >= 3:
        return [(s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs]
    return [(b, -1) for b in p.new_isr]


def _ineligible(image, members) -> bool:
    brokers = image.cluster.brokers
    for broker_id, epoch in members:
        b = brokers.get(broker_id)
        if b is None or b.in_controlled_shutdown or b.fenced or (epoch != -1 and b.epoch != epoch):
            return True
    return False


def validate(image, broker_id: int, part, p, version: int) -> ErrorCode:
    """Kafka's ``validateAlterPartitionData``: NONE or the partition's error code."""
    if part is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    if p.leader_epoch > part.leader_epoch or p.partition_epoch > part.partition_epoch:
        return E.NOT_CONTROLLER
    if p.leader_epoch < part.leader_epoch:
        return E.FENCED_LEADER_EPOCH
    if broker_id != part.leader:
        return E.INVALID_REQUEST
    if p.partition_epoch < part.partition_epoch:
        return E.INVALID_UPDATE_VERSION
    members = _new_isr(p, version)
    isr = [b for b, _ in members]
    if len(set(isr)) != len(isr) or any(b not in part.replicas for b in isr):
        return E.INVALID_REQUEST
    if part.leader not in isr:  # the ISR always holds its leader
        return E.INVALID_REQUEST
    recovery = p.leader_recovery_state if version >= 1 else RECOVERED
    if recovery not in (RECOVERED, RECOVERING):
        return E.INVALID_REQUEST
    if recovery == RECOVERING and len(isr) > 1:
        return E.INVALID_REQUEST
    if part.leader_recovery_state == RECOVERED and recovery == RECOVERING:
        return E.INVALID_REQUEST
    if _ineligible(image, members):
        return E.INELIGIBLE_REPLICA if version > 1 else E.OPERATION_NOT_ATTEMPTED
    return E.NONE


def handle_alter_partition(ctx, req: AlterPartitionRequest) -> ControllerResult:
    image, version = ctx.image, ctx.version
    check_broker_epoch(image, req.broker_id, req.broker_epoch)
    ok = acceptable_leader(image)
    min_isr = elr_min_isr(image, ctx.settings)
    topics = image.topics
    records, response = [], AlterPartitionResponse(error_code=0)
    for t in req.topics:
        out = RTopic(partitions=[])
        if version >= 2:
            out.topic_id = t.topic_id
            topic = topics.get_topic(t.topic_id) if t.topic_id != ZERO_UUID else None
        else:
            out.topic_name = t.topic_name
            topic = topics.get_topic_by_name(t.topic_name)
        response.topics.append(out)
        if topic is None:
            code = E.UNKNOWN_TOPIC_ID if version >= 2 else E.UNKNOWN_TOPIC_OR_PARTITION
            out.partitions += [RPartition(partition_index=p.partition_index, error_code=int(code)) for p in t.partitions]
            continue
        for p in t.partitions:
            part = topic.partitions.get(p.partition_index)
            code = validate(image, req.broker_id, part, p, version)
            if code != E.NONE:
                out.partitions.append(RPartition(partition_index=p.partition_index, error_code=int(code)))
                continue
            rec = build(topic.id, p.partition_index, part, ok, target_isr=[b for b, _ in _new_isr(p, version)],
                        target_recovery=p.leader_recovery_state if version >= 1 else None,
                        election=UNCLEAN if unclean_allowed(image, ctx.settings, topic.name) else ONLINE,
                        elr_min_isr=min_isr(topic.name) if min_isr is not None else 0)
            if rec is not None:
                records.append(rec)
                part = part.merge(rec)
                if rec.leader not in (req.broker_id, NO_LEADER_CHANGE):
                    # Completing a reassignment moved leadership: the old leader must refresh.
                    code = E.NEW_LEADER_ELECTED if version > 1 else E.FENCED_LEADER_EPOCH
                    out.partitions.append(RPartition(partition_index=p.partition_index, error_code=int(code)))
                    continue
            out.partitions.append(RPartition(partition_index=p.partition_index, error_code=0, leader_id=part.leader,
                                             leader_epoch=part.leader_epoch, isr=list(part.isr),
                                             leader_recovery_state=part.leader_recovery_state,
                                             partition_epoch=part.partition_epoch))
    return ControllerResult(records, response)


def alter_partition_error(req, version: int, code: int, message: str | None = None):
    return AlterPartitionResponse(error_code=int(code), topics=[])


HANDLERS = {56: handle_alter_partition}
ERROR_RESPONSES = {56: alter_partition_error}
