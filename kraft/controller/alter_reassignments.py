"""AlterPartitionReassignments (45): start or cancel moving a partition's replicas (seed 003's
reassignment; Kafka's ``ReplicationControlManager.alterPartitionReassignments``, KIP-455).

Starting: the target list is checked as a manual assignment (non-empty, no duplicates, every
broker registered -> else INVALID_REPLICA_ASSIGNMENT; v1 with
``allow_replication_factor_change`` false and another replica count -> INVALID_REPLICATION_FACTOR),
then one PartitionChangeRecord sets replicas = target + leaving, adding and removing. The
reassignment completes later, when AlterPartition reports every adding replica in the ISR: the
leaving replicas are dropped and, if the leader was one of them, leadership moves to the first
target replica in the ISR (``partition_change.build`` does both). A reassignment the ISR
already satisfies (a reordering, a pure removal) completes in the same record.

Cancelling (null replicas): NO_REASSIGNMENT_IN_PROGRESS when there is none; otherwise back to
the original replicas with the adding ones out of the ISR, which needs an unclean election
(INVALID_REPLICA_ASSIGNMENT unless allowed) when only adding replicas were in sync. One request
is one atomic unit. This module must not elect leaders itself.
"""

from __future__ import annotations

from kraft.controller.api_error import ApiError
from kraft.controller.partition_change import (ONLINE, UNCLEAN, build, in_reassignment, reassignment_targets,
                                               reverted_reassignment)
from kraft.controller.result import ControllerResult
from kraft.controller.topic_handlers import acceptable_leader
from kraft.controller.topic_policy import elr_min_isr, unclean_allowed
from kraft.errors import ErrorCode
from kraft.protocol.messages.partition_reassignments import (AlterPartitionReassignmentsRequest,
                                                             AlterPartitionReassignmentsResponse)

E = ErrorCode
RTopic = AlterPartitionReassignmentsResponse.Topic
RPartition = RTopic.Partition


def _validate_target(image, replicas) -> None:
    if not replicas:
        raise ApiError(E.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    brokers = image.cluster.brokers
    seen = set()
    for b in sorted(replicas):
        if b not in brokers:
            raise ApiError(E.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker {b}, "
                           "but no broker with that id is registered.")
        if b in seen:
            raise ApiError(E.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the broker {b} "
                           "more than once.")
        seen.add(b)


def reassign(ctx, topic, partition_id: int, target, allow_rf_change: bool):
    """The record starting (``target`` a list) or cancelling (None) a reassignment, or None
    when nothing changes; ApiError when refused."""
    image, settings = ctx.image, ctx.settings
    part = topic.partitions.get(partition_id)
    if part is None:
        raise ApiError(E.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic.name}:{partition_id}.")
    ok = acceptable_leader(image)
    min_isr = elr_min_isr(image, settings)
    elr = min_isr(topic.name) if min_isr is not None else 0
    unclean = unclean_allowed(image, settings, topic.name)
    if target is None:
        if not in_reassignment(part):
            raise ApiError(E.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress for the topic "
                           f"{topic.name} partition {partition_id}")
        replicas, isr, needs_unclean = reverted_reassignment(part)
        if needs_unclean and not unclean:
            raise ApiError(E.INVALID_REPLICA_ASSIGNMENT, f"Unable to revert partition assignment for {topic.name}:"
                           f"{partition_id} because it would require an unclean leader election.")
        return build(topic.id, partition_id, part, ok, target_isr=isr, target_replicas=replicas, target_removing=(),
                     target_adding=(), election=UNCLEAN if unclean else ONLINE, elr_min_isr=elr)
    _validate_target(image, target)
    original = [r for r in part.replicas if r not in part.adding_replicas]
    if not allow_rf_change and len(target) != len(original):
        raise ApiError(E.INVALID_REPLICATION_FACTOR, f"The replication factor is changed from {len(original)} to "
                       f"{len(target)}")
    # As Kafka, a new target is measured from the current replica list (a reassignment in
    # progress included): whatever is not in the target leaves once the target is in sync.
    replicas, removing, adding = reassignment_targets(part.replicas, target)
    return build(topic.id, partition_id, part, ok, target_replicas=replicas, target_removing=removing,
                 target_adding=adding, elr_min_isr=elr)


def handle_alter_partition_reassignments(ctx, req: AlterPartitionReassignmentsRequest) -> ControllerResult:
    topics = ctx.image.topics
    allow_rf_change = req.allow_replication_factor_change if ctx.version >= 1 else True
    records = []
    response = AlterPartitionReassignmentsResponse(error_code=0, error_message=None,
                                                   allow_replication_factor_change=allow_rf_change)
    for t in req.topics:
        out = RTopic(name=t.name, partitions=[])
        response.responses.append(out)
        topic = topics.get_topic_by_name(t.name)
        for p in t.partitions:
            code, message = 0, None
            try:
                if topic is None:
                    raise ApiError(E.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {t.name}.")
                rec = reassign(ctx, topic, p.partition_index, p.replicas, allow_rf_change)
                if rec is not None:
                    records.append(rec)
            except ApiError as e:
                code, message = int(e.code), e.message
            out.partitions.append(RPartition(partition_index=p.partition_index, error_code=code, error_message=message))
    return ControllerResult(records, response, atomic=True)


def alter_reassignments_error(req, version: int, code: int, message: str | None = None):
    return AlterPartitionReassignmentsResponse(error_code=int(code), error_message=message, responses=[])


HANDLERS = {45: handle_alter_partition_reassignments}
ERROR_RESPONSES = {45: alter_reassignments_error}
