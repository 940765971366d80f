"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37) on the active controller.

Each handler is pure (``result.py``): it checks the request against the uncommitted image and
returns the records of the topics it accepts plus the per-topic answer, with Kafka's error
codes and messages (ReplicationControlManager / ControllerApis); a new topic's configs are
validated as AlterConfigs validates them (``validate_topic_configs``: INVALID_CONFIG), also under
``validate_only``, which answers the same verdicts and writes nothing. A request is one atomic
unit: the accepted topics' records commit together or not at all. Topic ids are derived from
the request and the controller's position (deterministic under the simulator). This module
must not decide placement (``placement.py``) or leadership (``partition_change.py``).
"""

from __future__ import annotations

import hashlib
import re
import uuid

from kraft.controller.api_error import ApiError
from kraft.controller.placement import PlacementError, place
from kraft.controller.result import ControllerResult
from kraft.errors import ConfigError, ErrorCode
from kraft.metadata.config_defs import validate_topic_configs
from kraft.metadata.configs import TOPIC
from kraft.controller.record_cache import PartitionRecordRun
from kraft.metadata.partition import intern_registration, intern_tuple, migrating_directories
from kraft.metadata.records import ConfigRecord, RemoveTopicRecord, TopicRecord
from kraft.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kraft.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kraft.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kraft.protocol.primitives import ZERO_UUID

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: INVALID_TOPIC_EXCEPTION for an illegal name."""
    if not name:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
                       f"topic name: {name}")
    if not _LEGAL.fullmatch(name):
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
                       "alphanumerics, '.', '_' and '-'")


def usable_brokers(image) -> list[tuple[int, str | None]]:
    """(id, rack) of brokers that may get new replicas: unfenced, not shutting down."""
    return [(b.id, b.rack) for b in image.cluster.brokers.values() if not b.fenced and not b.in_controlled_shutdown]


def acceptable_leader(image):
    brokers = image.cluster.brokers

    def ok(bid):
        b = brokers.get(bid)
        return b is not None and not b.fenced and not b.in_controlled_shutdown
    return ok


def new_topic_id(ctx, name: str, taken) -> uuid.UUID:
    """A topic id from the cluster, the name and the controller's log position: unique in
    practice, and the same on every replay of a simulation."""
    salt = 0
    while True:
        h = hashlib.blake2b(f"{ctx.cluster_id}/{name}/{ctx.next_offset}/{ctx.now_ms}/{salt}".encode(),
                            digest_size=16).digest()
        tid = uuid.UUID(bytes=h)
        if tid.int >= 1 << 64 and tid not in taken:  # Kafka reserves the ids with zero high bits
            return tid
        salt += 1


def _partition_records(topic_id, assignments, start_index: int, acceptable=None) -> list:
    """The PartitionRecords of new partitions, as one ``PartitionRecordRun`` of registrations
    (leader: the first acceptable replica, epochs 0, directories to be assigned). ``acceptable``
    None: every replica is usable (placed ones are). Partitions placed alike share a
    registration, made once per replica list here."""
    made: dict = {}
    parts = {}
    for i, replicas in enumerate(assignments):
        reg = made.get(id(replicas))
        if reg is None or reg[0] is not replicas:
            r = intern_tuple(replicas)
            isr = r if acceptable is None else intern_tuple(x for x in r if acceptable(x))
            reg = made[id(replicas)] = (replicas, intern_registration(
                (r, migrating_directories(len(r)), isr, (), (), isr[0], 0, 0, 0, (), ())))
        parts[start_index + i] = reg[1]
    return [PartitionRecordRun(topic_id, parts)]


def _manual(image, index_of, assignments, acceptable, expected_rf: int | None = None) -> list[list[int]]:
    """Kafka's ``validateManualPartitionAssignment`` for each replica list, in order."""
    brokers = image.cluster.brokers
    out = []
    for i, replicas in enumerate(assignments):
        pid = index_of(i)
        if not replicas:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           "The manual partition assignment includes an empty replica list.")
        if len(set(replicas)) != len(replicas):
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes the broker(s) more than once: {replicas}")
        for r in replicas:
            if r not in brokers:
                raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"The manual partition assignment includes broker {r}, but no broker with that "
                               "id is registered.")
        if expected_rf is None:
            expected_rf = len(replicas)
        elif len(replicas) != expected_rf:
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                           f"but this is not consistent with previous partitions, which have {expected_rf} "
                           "replica(s).")
        if not any(acceptable(r) for r in replicas):
            raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"All brokers specified in the manual partition assignment for partition {pid} are "
                           "fenced or in controlled shutdown.")
        out.append(list(replicas))
    return out


# --- CreateTopics ---------------------------------------------------------------------------


def handle_create_topics(ctx, req: CreateTopicsRequest) -> ControllerResult:
    image = ctx.image
    T = CreateTopicsResponse.Topic
    names = [t.name for t in req.topics]
    dupes = {n for n in names if names.count(n) > 1} if len(set(names)) != len(names) else set()
    existing = image.topics.by_name
    collide = None  # Kafka's '.' vs '_' collision check, built on first use
    usable = usable_brokers(image)
    acceptable = acceptable_leader(image)
    start = sum(len(t.partitions) for t in image.topics.by_id.values())
    taken = set(image.topics.by_id)
    records, answers, seen = [], [], set()
    default_partitions = int(ctx.settings.get("num.partitions", 1))
    default_rf = int(ctx.settings.get("default.replication.factor", 1))
    for t in req.topics:
        if t.name in dupes:
            if t.name not in seen:
                seen.add(t.name)
                answers.append(T(name=t.name, error_code=int(ErrorCode.INVALID_REQUEST),
                                 error_message="Found multiple entries for this topic."))
            continue
        try:
            validate_topic_name(t.name)
            if t.name in existing:
                raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
            if collide is None:
                collide = {n.replace(".", "_"): n for n in existing}
            other = collide.get(t.name.replace(".", "_"))
            if other is not None:
                raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                               f"Topic '{t.name}' collides with existing topic: {other}")
            nulls = [c.name for c in t.configs if c.value is None]
            if nulls:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}")
            configs = {c.name: c.value for c in t.configs}  # a repeated key: the last one wins, as in Kafka
            validate_topic_configs(configs)
            if t.assignments:
                if t.num_partitions != -1:
                    raise ApiError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                   "numPartitions was not set to -1.")
                if t.replication_factor != -1:
                    raise ApiError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                   "replicationFactor was not set to -1.")
                by_index = {a.partition_index: a.broker_ids for a in t.assignments}
                if sorted(by_index) != list(range(len(t.assignments))):
                    raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be a consecutive "
                                   "0-based integer sequence")
                assignment = _manual(image, lambda i: i, [by_index[i] for i in range(len(by_index))], acceptable)
            else:
                n = default_partitions if t.num_partitions == -1 else t.num_partitions
                rf = default_rf if t.replication_factor == -1 else t.replication_factor
                if n <= 0:
                    raise ApiError(ErrorCode.INVALID_PARTITIONS,
                                   "Number of partitions was set to an invalid non-positive value.")
                if rf <= 0:
                    raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                   "Replication factor must be larger than 0, or -1 to use the default value.")
                assignment = place(usable, n, rf, start)
        except PlacementError as e:
            answers.append(T(name=t.name, error_code=int(e.code), error_message=str(e)))
            continue
        except ApiError as e:
            answers.append(T(name=t.name, error_code=int(e.code), error_message=e.message))
            continue
        except ConfigError as e:
            answers.append(T(name=t.name, error_code=int(e.code), error_message=str(e)))
            continue
        topic_id = new_topic_id(ctx, t.name, taken)
        taken.add(topic_id)
        start += len(assignment)
        answers.append(T(name=t.name, topic_id=topic_id, error_code=0, error_message=None, num_partitions=len(assignment),
                         replication_factor=len(assignment[0]), configs=[]))
        if req.validate_only:
            continue
        records.append(TopicRecord(name=t.name, topic_id=topic_id))
        records.extend(ConfigRecord(resource_type=TOPIC, resource_name=t.name, name=name, value=value)
                       for name, value in configs.items())
        records.extend(_partition_records(topic_id, assignment, 0, acceptable if t.assignments else None))
    return ControllerResult(records, CreateTopicsResponse(topics=answers), atomic=True)


def create_topics_error(req: CreateTopicsRequest, version: int, code: int, message: str | None = None):
    T = CreateTopicsResponse.Topic
    return CreateTopicsResponse(topics=[T(name=t.name, error_code=int(code), error_message=message)
                                        for t in req.topics])


# --- DeleteTopics ---------------------------------------------------------------------------


def _delete_targets(req: DeleteTopicsRequest, version: int) -> list[tuple[str | None, uuid.UUID]]:
    if version >= 6:
        return [(t.name, t.topic_id) for t in req.topics]
    return [(n, ZERO_UUID) for n in req.topic_names]


def handle_delete_topics(ctx, req: DeleteTopicsRequest) -> ControllerResult:
    topics = ctx.image.topics
    R = DeleteTopicsResponse.Result
    targets = _delete_targets(req, ctx.version)
    records, answers, removed = [], [], set()
    # Duplicates count among well-formed entries only (exactly one of name and id).
    keys = [name if tid == ZERO_UUID else tid if name is None else object() for name, tid in targets]
    for (name, tid), key in zip(targets, keys):
        try:
            if name is not None and tid != ZERO_UUID:
                raise ApiError(ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
            if name is None and tid == ZERO_UUID:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
            if keys.count(key) > 1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name." if name is not None
                               else "Duplicate topic id.")
            topic = topics.by_name.get(name) if name is not None else topics.by_id.get(tid)
            if topic is None:
                if name is not None:
                    raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   "This server does not host this topic-partition.")
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        except ApiError as e:
            answers.append(R(name=name, topic_id=tid, error_code=int(e.code), error_message=e.message))
            continue
        answers.append(R(name=topic.name, topic_id=topic.id, error_code=0, error_message=None))
        if topic.id not in removed:
            removed.add(topic.id)
            records.append(RemoveTopicRecord(topic_id=topic.id))
    return ControllerResult(records, DeleteTopicsResponse(responses=answers), atomic=True)


def delete_topics_error(req: DeleteTopicsRequest, version: int, code: int, message: str | None = None):
    R = DeleteTopicsResponse.Result
    return DeleteTopicsResponse(responses=[R(name=n, topic_id=t, error_code=int(code), error_message=message)
                                           for n, t in _delete_targets(req, version)])


# --- CreatePartitions -----------------------------------------------------------------------


def handle_create_partitions(ctx, req: CreatePartitionsRequest) -> ControllerResult:
    image = ctx.image
    R = CreatePartitionsResponse.Result
    names = [t.name for t in req.topics]
    usable = usable_brokers(image)
    acceptable = acceptable_leader(image)
    start = sum(len(t.partitions) for t in image.topics.by_id.values())
    records, answers = [], []
    for t in req.topics:
        try:
            if names.count(t.name) > 1:
                raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            topic = image.topics.by_name.get(t.name)
            if topic is None:
                raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {t.name}.")
            current = len(topic.partitions)
            if t.count < current:
                raise ApiError(ErrorCode.INVALID_PARTITIONS, f"The topic {t.name} currently has {current} "
                               f"partition(s); {t.count} would not be an increase.")
            if t.count == current:
                raise ApiError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
            adding = t.count - current
            rf = len(topic.partitions[0].replicas) if 0 in topic.partitions else 1
            if t.assignments is not None:
                if len(t.assignments) != adding:
                    raise ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Attempted to add {adding} additional "
                                   f"partition(s), but only {len(t.assignments)} assignment(s) were specified.")
                assignment = _manual(image, lambda i: current + i, [a.broker_ids for a in t.assignments],
                                     acceptable, expected_rf=rf)
            else:
                assignment = place(usable, adding, rf, start)
        except (ApiError, PlacementError) as e:
            answers.append(R(name=t.name, error_code=int(e.code), error_message=getattr(e, "message", str(e))))
            continue
        start += adding
        answers.append(R(name=t.name, error_code=0, error_message=None))
        if not req.validate_only:
            records.extend(_partition_records(topic.id, assignment, current,
                                              acceptable if t.assignments is not None else None))
    return ControllerResult(records, CreatePartitionsResponse(results=answers), atomic=True)


def create_partitions_error(req: CreatePartitionsRequest, version: int, code: int, message: str | None = None):
    R = CreatePartitionsResponse.Result
    return CreatePartitionsResponse(results=[R(name=t.name, error_code=int(code), error_message=message)
                                             for t in req.topics])


HANDLERS = {19: handle_create_topics, 20: handle_delete_topics, 37: handle_create_partitions}
ERROR_RESPONSES = {19: create_topics_error, 20: delete_topics_error, 37: create_partitions_error}
