"""KIP-858 on the controller: where each replica lives (AssignReplicasToDirs, API 73) and what
happens when a broker reports log directories offline (BrokerHeartbeat ``OfflineLogDirs``).

Kafka's ``ReplicationControlManager.handleAssignReplicasToDirs`` / ``handleDirectoriesOffline``:
an assignment is a PartitionChangeRecord carrying ``Directories`` (only the broker's own entry
changes); a directory newly reported offline gives a BrokerRegistrationChangeRecord naming the
broker's remaining online directories, and every partition that broker holds in that directory
loses it as leader and ISR member, while its partitions in other directories are untouched.
An assignment to a directory the broker no longer has online moves the partition the same way.
Pure handlers over the image, as every controller handler.
"""

from __future__ import annotations

from kraft.controller.api_error import ApiError
from kraft.controller.partition_change import ONLINE, UNCLEAN, build
from kraft.controller.result import ControllerResult
from kraft.controller.topic_handlers import acceptable_leader
from kraft.controller.topic_policy import elr_min_isr, unclean_allowed
from kraft.errors import ErrorCode
from kraft.metadata.records import BrokerRegistrationChangeRecord, PartitionChangeRecord
from kraft.protocol.messages.assign_replicas_to_dirs import AssignReplicasToDirsRequest, AssignReplicasToDirsResponse

NONE = int(ErrorCode.NONE)
R = AssignReplicasToDirsResponse


def _registered(image, broker_id: int, broker_epoch: int):
    broker = image.cluster.brokers.get(broker_id)
    if broker is None:
        raise ApiError(ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered.")
    if broker.epoch != broker_epoch:
        raise ApiError(ErrorCode.STALE_BROKER_EPOCH, f"Expected broker epoch {broker.epoch}, but got broker "
                       f"epoch {broker_epoch}")
    return broker


def _move_off(image, settings, broker_id: int, topic, pid: int, part):
    """The change taking ``broker_id`` out of leadership and ISR of one partition (its replica's
    directory failed); None if it neither leads nor is in sync."""
    if part.leader != broker_id and broker_id not in part.isr:
        return None
    ok = acceptable_leader(image)
    election = UNCLEAN if unclean_allowed(image, settings, topic.name) else ONLINE
    min_isr = elr_min_isr(image, settings)
    return build(topic.id, pid, part, lambda b: b != broker_id and ok(b),
                 target_isr=tuple(r for r in part.isr if r != broker_id), election=election,
                 elr_min_isr=min_isr(topic.name) if min_isr is not None else 0)


def handle_assign_replicas_to_dirs(ctx, req: AssignReplicasToDirsRequest) -> ControllerResult:
    image = ctx.image
    broker = _registered(image, req.broker_id, req.broker_epoch)
    online = set(broker.directories)
    records, out_dirs = [], []
    for d in req.directories:
        out_topics = []
        for t in d.topics:
            topic = image.topics.by_id.get(t.topic_id)
            out_parts = []
            for pid in t.partitions:
                part = topic.partitions.get(pid) if topic is not None else None
                if topic is None:
                    code = int(ErrorCode.UNKNOWN_TOPIC_ID)
                elif part is None:
                    code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif broker.id not in part.replicas:
                    code = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                else:
                    code = NONE
                    i = part.replicas.index(broker.id)
                    if part.directories[i] != d.id:
                        dirs = list(part.directories)
                        dirs[i] = d.id
                        records.append(PartitionChangeRecord(partition_id=pid, topic_id=topic.id, directories=dirs))
                    if online and d.id not in online:  # assigned to a directory that is gone
                        moved = _move_off(image, ctx.settings, broker.id, topic, pid, part)
                        if moved is not None:
                            records.append(moved)
                out_parts.append(R.Directory.Topic.Partition(partition_index=pid, error_code=code))
            out_topics.append(R.Directory.Topic(topic_id=t.topic_id, partitions=out_parts))
        out_dirs.append(R.Directory(id=d.id, topics=out_topics))
    return ControllerResult(records, R(throttle_time_ms=0, error_code=NONE, directories=out_dirs))


def assign_replicas_to_dirs_error(req, version: int, code: int, message: str | None = None):
    return R(throttle_time_ms=0, error_code=int(code), directories=[])


def offline_dir_records(ctx, broker, offline_dirs) -> list:
    """Records for a heartbeat's ``OfflineLogDirs``: nothing if none is newly offline; else the
    broker's registration keeps only its online directories and each of its partitions in a
    newly offline directory loses it as leader and ISR member."""
    online = tuple(broker.directories)
    gone = {d for d in offline_dirs if d in online}
    if not gone:
        return []
    image = ctx.image
    records: list = [BrokerRegistrationChangeRecord(broker_id=broker.id, broker_epoch=broker.epoch,
                                                    log_dirs=[d for d in online if d not in gone])]
    for topic in image.topics.by_id.values():
        for pid, part in topic.partitions.items():
            if broker.id not in part.replicas:
                continue
            if part.directories[part.replicas.index(broker.id)] not in gone:
                continue
            moved = _move_off(image, ctx.settings, broker.id, topic, pid, part)
            if moved is not None:
                records.append(moved)
    return records


HANDLERS = {73: handle_assign_replicas_to_dirs}
ERROR_RESPONSES = {73: assign_replicas_to_dirs_error}
