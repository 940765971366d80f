"""Metadata (API key 3, v0-v12) from the broker's ``MetadataImage`` (Kafka's
``KRaftMetadataCache.getTopicMetadata``).

Brokers: every registered, unfenced broker with an endpoint on the listener the request
came in on (this broker itself only while it serves: registered, unfenced, lease held). Topics: all (v0 empty list, v1+ null) or the named ones (v10+ also by id);
unknown ones get UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id). Partitions: leader,
leader epoch, replicas, ISR, offline replicas (replicas whose broker is unregistered, fenced
or lacks the listener); a leader without an endpoint on this listener is LEADER_NOT_AVAILABLE
with leader -1. Authorized operations, when asked (v8+), are what Kafka reports without an
authorizer (``kraft.metadata.authorization``). Auto topic creation is not done here (it needs the controller). Pure: reads
the image only.
"""

from __future__ import annotations

from kraft.broker.broker_state import INTERNAL_TOPICS, NONE, BrokerState
from kraft.errors import ErrorCode
from kraft.metadata.authorization import authorized_operations
from kraft.protocol import ZERO_UUID, MetadataRequest, MetadataResponse
from kraft.protocol.messages.acls import RESOURCE_CLUSTER, RESOURCE_TOPIC

M = MetadataResponse


def _list(b, listener: str, alive: dict, brokers: list) -> None:
    for e in b.listeners:
        if e.name == listener:
            alive[b.id] = e
            brokers.append(M.Broker(node_id=b.id, host=e.host, port=e.port, rack=b.rack))
            return


def handle_metadata(state: BrokerState, request: MetadataRequest, version: int, listener: str) -> MetadataResponse:
    image = state.image
    alive = {}
    brokers = []
    serving = state.is_serving()
    registered = sorted(image.cluster.brokers.values(), key=lambda b: b.id)
    # Listing itself while the image still says fenced made admin requests hang when the active
    # controller was paused (test_reassignment): only the empty-list fallback below names it.
    for b in registered:
        if b.fenced or (b.id == state.broker_id and not serving):
            continue
        _list(b, listener, alive, brokers)
    if not brokers:
        # Never an empty list: librdkafka treats it as a failed Metadata and then waited ~60 s
        # before asking again (an admin call at cluster start timed out). The broker answering
        # is reachable, so it names itself; its partitions' errors still say what it leads.
        for b in registered:
            if b.id == state.broker_id:
                _list(b, listener, alive, brokers)
        own = state.own_endpoints.get(listener)
        if not brokers and own is not None:  # its registration is not in the image yet
            alive[state.broker_id] = own
            brokers.append(M.Broker(node_id=state.broker_id, host=own[0], port=own[1], rack=None))
    topics_image = image.topics
    wanted = request.topics
    if wanted is None or (version == 0 and not wanted):
        chosen = [(t.name, t) for t in sorted(topics_image.by_name.values(), key=lambda t: t.name)]
    else:
        chosen = []
        for entry in wanted:
            if entry.name is None and version >= 10:
                chosen.append((None, topics_image.by_id.get(entry.topic_id), entry.topic_id))
                continue
            chosen.append((entry.name, topics_image.by_name.get(entry.name)))
    topic_ops = authorized_operations(RESOURCE_TOPIC, version >= 8 and request.include_topic_authorized_operations)
    out = []
    for item in chosen:
        name, topic = item[0], item[1]
        if topic is None:
            if name is None:  # asked by id
                out.append(M.Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_ID), name=None, topic_id=item[2],
                                   partitions=[], topic_authorized_operations=topic_ops))
            else:
                out.append(M.Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name,
                                   topic_id=ZERO_UUID, partitions=[], topic_authorized_operations=topic_ops))
            continue
        out.append(M.Topic(error_code=NONE, name=topic.name, topic_id=topic.id,
                           is_internal=topic.name in INTERNAL_TOPICS, topic_authorized_operations=topic_ops,
                           partitions=[_partition(pid, reg, alive, version)
                                       for pid, reg in sorted(topic.partitions.items())]))
    cluster_ops = authorized_operations(RESOURCE_CLUSTER,
                                        8 <= version <= 10 and request.include_cluster_authorized_operations)
    # The controller named must be one of the brokers listed: librdkafka waits for a named
    # controller it has no address for until something else refreshes its metadata (an admin
    # call at cluster start waited its whole 60 s), while -1 makes it ask again at once.
    controller = state.controller_id if state.controller_id in alive else min(alive, default=-1)
    return M(throttle_time_ms=0, brokers=brokers, cluster_id=state.cluster_id, controller_id=controller,
             topics=out, cluster_authorized_operations=cluster_ops)


def _partition(pid: int, reg, alive: dict, version: int) -> M.Topic.Partition:
    offline = [r for r in reg.replicas if r not in alive]
    leader, code = reg.leader, NONE
    if leader not in alive:
        leader, code = -1, int(ErrorCode.LEADER_NOT_AVAILABLE)
    return M.Topic.Partition(error_code=code, partition_index=pid, leader_id=leader, leader_epoch=reg.leader_epoch,
                             replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr), offline_replicas=offline)
