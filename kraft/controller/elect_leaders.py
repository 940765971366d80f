"""ElectLeaders (43): preferred or unclean leader election on request (Kafka's
``ReplicationControlManager.electLeaders``; ``kafka-leader-election.sh``), and the automatic
preferred-leader rebalance the active controller runs periodically
(``auto.leader.rebalance.enable``).

Per partition: unknown -> UNKNOWN_TOPIC_OR_PARTITION; PREFERRED when the first replica already
leads, or UNCLEAN when some replica leads -> ELECTION_NOT_NEEDED; otherwise
``partition_change.build`` with that election, and when it changes nothing ->
PREFERRED_LEADER_NOT_AVAILABLE (preferred) or ELIGIBLE_LEADERS_NOT_AVAILABLE (unclean). A null
topic list means every partition, and then partitions that need no election are left out of
the answer. An election type other than 0/1 -> INVALID_REQUEST for the whole request. v0 has no
election type: preferred.

Rebalance (``rebalance_records``): as Kafka's ZooKeeper-era controller, a broker whose share of
"partitions it prefers but does not lead" exceeds ``leader.imbalance.per.broker.percentage`` gets
preferred elections for those partitions (KRaft's controller elects every imbalanced partition;
the percentage keeps small imbalances from moving leaders back and forth). At most
``max_elections`` records per round. This module must not elect leaders itself.
"""

from __future__ import annotations

from kraft.controller.api_error import ApiError
from kraft.controller.partition_change import PREFERRED, UNCLEAN, build
from kraft.controller.result import ControllerResult
from kraft.controller.topic_handlers import acceptable_leader
from kraft.controller.topic_policy import elr_min_isr
from kraft.errors import ErrorCode
from kraft.metadata.partition import NO_LEADER
from kraft.protocol.messages.elect_leaders import ELECTION_PREFERRED, ELECTION_UNCLEAN, ElectLeadersRequest, \
    ElectLeadersResponse

E = ErrorCode
Result = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = Result.PartitionResult


def elect_one(topic, partition_id: int, election: str, ok, min_isr, records: list):
    """(error code, message) of electing ``topic``'s partition; appends its record if any."""
    part = topic.partitions.get(partition_id) if topic is not None else None
    if part is None:
        name = topic.name if topic is not None else "?"
        return E.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{partition_id}"
    if election == PREFERRED and part.replicas and part.leader == part.replicas[0]:
        return E.ELECTION_NOT_NEEDED, None
    if election == UNCLEAN and part.leader != NO_LEADER:
        return E.ELECTION_NOT_NEEDED, None
    rec = build(topic.id, partition_id, part, ok, election=election,
                elr_min_isr=min_isr(topic.name) if min_isr is not None else 0)
    if rec is None:
        return (E.PREFERRED_LEADER_NOT_AVAILABLE if election == PREFERRED else E.ELIGIBLE_LEADERS_NOT_AVAILABLE), None
    records.append(rec)
    return E.NONE, None


def handle_elect_leaders(ctx, req: ElectLeadersRequest) -> ControllerResult:
    image = ctx.image
    kind = req.election_type if ctx.version >= 1 else ELECTION_PREFERRED
    if kind not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
        raise ApiError(E.INVALID_REQUEST, f"Unknown election type {kind}")
    election = PREFERRED if kind == ELECTION_PREFERRED else UNCLEAN
    ok = acceptable_leader(image)
    min_isr = elr_min_isr(image, ctx.settings)
    topics = image.topics
    records: list = []
    response = ElectLeadersResponse(error_code=0)
    if req.topic_partitions is None:
        for name in sorted(topics.by_name):
            topic = topics.by_name[name]
            out = Result(topic=name, partition_result=[])
            response.replica_election_results.append(out)
            for pid in sorted(topic.partitions):
                code, message = elect_one(topic, pid, election, ok, min_isr, records)
                if code != E.ELECTION_NOT_NEEDED:
                    out.partition_result.append(PartitionResult(partition_id=pid, error_code=int(code),
                                                                error_message=message))
    else:
        for tp in req.topic_partitions:
            topic = topics.get_topic_by_name(tp.topic)
            out = Result(topic=tp.topic, partition_result=[])
            response.replica_election_results.append(out)
            for pid in tp.partitions:
                if topic is None:
                    code, message = E.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {tp.topic}"
                else:
                    code, message = elect_one(topic, pid, election, ok, min_isr, records)
                out.partition_result.append(PartitionResult(partition_id=pid, error_code=int(code),
                                                            error_message=message))
    return ControllerResult(records, response)


def elect_leaders_error(req, version: int, code: int, message: str | None = None):
    """Before v1 there is no top-level error code: the error sits on every partition asked for."""
    results = [Result(topic=tp.topic, partition_result=[PartitionResult(partition_id=p, error_code=int(code),
                                                                        error_message=message)
                                                        for p in tp.partitions])
               for tp in (req.topic_partitions or [])]
    return ElectLeadersResponse(error_code=int(code) if version >= 1 else 0, replica_election_results=results)


# --- automatic rebalance ----------------------------------------------------------------------


def imbalanced_brokers(image, percentage: float) -> dict[int, list]:
    """broker -> [(topic, partition id)] it prefers but does not lead, for each broker whose
    imbalance ratio (those / all partitions it prefers) exceeds ``percentage``."""
    preferred: dict[int, int] = {}
    not_led: dict[int, list] = {}
    for topic in image.topics.by_id.values():
        for pid, part in topic.partitions.items():
            if not part.replicas:
                continue
            first = part.replicas[0]
            preferred[first] = preferred.get(first, 0) + 1
            if part.leader != first:
                not_led.setdefault(first, []).append((topic, pid))
    return {b: parts for b, parts in not_led.items() if len(parts) * 100.0 / preferred[b] > percentage}


def rebalance_records(image, settings, *, max_elections: int = 1000) -> list:
    """Preferred-election records for the imbalanced brokers that can lead again (unfenced, not
    shutting down, in the ISR), at most ``max_elections``."""
    try:
        percentage = float(settings.get("leader.imbalance.per.broker.percentage", 10))
    except (TypeError, ValueError):
        percentage = 10.0
    ok = acceptable_leader(image)
    min_isr = elr_min_isr(image, settings)
    records: list = []
    for broker in sorted(imbalanced_brokers(image, percentage).items()):
        broker_id, parts = broker
        if not ok(broker_id):
            continue
        for topic, pid in parts:
            part = topic.partitions[pid]
            if broker_id not in part.isr:
                continue
            rec = build(topic.id, pid, part, ok, election=PREFERRED,
                        elr_min_isr=min_isr(topic.name) if min_isr is not None else 0)
            if rec is not None:
                records.append(rec)
                if len(records) >= max_elections:
                    return records
    return records


HANDLERS = {43: handle_elect_leaders}
ERROR_RESPONSES = {43: elect_leaders_error}
