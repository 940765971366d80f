"""DescribeTopicPartitions (KIP-966) from the broker's image: the asked topics (every topic when
none is named) in name order, their partitions from the cursor on, at most
``response_partition_limit`` partitions (capped by ``max.request.partition.size.limit``, 2000)
per answer, with the cursor of the first partition left out. As Kafka's
``DescribeTopicPartitionsRequestHandler``: a cursor naming a topic not asked for is
INVALID_REQUEST; an unknown topic is answered UNKNOWN_TOPIC_OR_PARTITION; a leader or replica
on a broker not alive (unregistered or fenced) is reported as Metadata reports it.
"""

from __future__ import annotations


from kraft.broker.broker_state import INTERNAL_TOPICS
from kraft.errors import ErrorCode, InvalidRequestError
from kraft.metadata.authorization import authorized_operations
from kraft.protocol import ZERO_UUID
from kraft.protocol import DescribeTopicPartitionsResponse as R
from kraft.protocol.messages.acls import RESOURCE_TOPIC
from kraft.protocol.messages.describe_topic_partitions import Cursor

#: Kafka's ``max.request.partition.size.limit`` default
MAX_PARTITIONS = 2000


def handle_describe_topic_partitions(state, request, version: int, max_partitions: int = MAX_PARTITIONS):
    image = state.image
    alive = {b.id for b in image.cluster.brokers.values() if not b.fenced}
    by_name = image.topics.by_name
    names = sorted({t.name for t in request.topics}) if request.topics else sorted(by_name)
    cursor = request.cursor
    if cursor is not None:
        if cursor.topic_name not in names or cursor.partition_index < 0:
            raise InvalidRequestError(f"the cursor's topic {cursor.topic_name!r} is not among those asked for")
        names = names[names.index(cursor.topic_name):]
    limit = max(1, min(request.response_partition_limit, max_partitions))
    ops = authorized_operations(RESOURCE_TOPIC, False)
    out, left, next_cursor = [], limit, None
    for i, name in enumerate(names):
        topic = by_name.get(name)
        if topic is None:
            out.append(R.Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name, topic_id=ZERO_UUID,
                               partitions=[], topic_authorized_operations=ops))
            continue
        first = cursor.partition_index if cursor is not None and i == 0 else 0
        pids = [p for p in sorted(topic.partitions) if p >= first]
        if left <= 0:
            next_cursor = Cursor(topic_name=name, partition_index=pids[0] if pids else 0)
            break
        shown, rest = pids[:left], pids[left:]
        left -= len(shown)
        out.append(R.Topic(error_code=0, name=name, topic_id=topic.id, is_internal=name in INTERNAL_TOPICS,
                           topic_authorized_operations=ops,
                           partitions=[_partition(p, topic.partitions[p], alive) for p in shown]))
        if rest:
            next_cursor = Cursor(topic_name=name, partition_index=rest[0])
            break
    return R(throttle_time_ms=0, topics=out, next_cursor=next_cursor)


def _partition(pid: int, reg, alive: set) -> R.Topic.Partition:
    leader, code = reg.leader, 0
    if leader not in alive:
        leader, code = -1, int(ErrorCode.LEADER_NOT_AVAILABLE)
    return R.Topic.Partition(error_code=code, partition_index=pid, leader_id=leader, leader_epoch=reg.leader_epoch,
                             replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr),
                             eligible_leader_replicas=list(reg.elr), last_known_elr=list(reg.last_known_elr),
                             offline_replicas=[r for r in reg.replicas if r not in alive])
