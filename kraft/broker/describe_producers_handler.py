"""DescribeProducers (API key 61, v0) on any replica of a partition (Kafka's
``ReplicaManager.activeProducerState``, which asks for a local partition, not a leader: a
follower builds the same producer state from what it replicates, and ``kafka-transactions.sh
describe-producers --broker-id`` asks a chosen replica): per partition, the producers its
producer state holds with their epoch, last sequence and timestamp, the coordinator epoch of
their last marker and the first offset of their ongoing transaction (-1: none). Not a replica
here: NOT_LEADER_OR_FOLLOWER; no such partition: UNKNOWN_TOPIC_OR_PARTITION. Reads state only.
"""

from __future__ import annotations

from kraft.broker.broker_state import NONE, BrokerState
from kraft.errors import ErrorCode, KraftError
from kraft.protocol import DescribeProducersRequest, DescribeProducersResponse

R = DescribeProducersResponse


def _local_replica(state: BrokerState, topic: str, partition: int):
    """(error code, PartitionLog or None): this broker's log of a partition it is a replica of."""
    t, reg = state.partition(topic, partition)
    if reg is None:
        return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
    plog = state.logs.get(topic, partition)
    if state.broker_id not in reg.replicas or plog is None or plog.topic_id != t.id:
        return int(ErrorCode.NOT_LEADER_OR_FOLLOWER), None
    return NONE, plog


def handle_describe_producers(state: BrokerState, request: DescribeProducersRequest, version: int):
    topics = []
    for t in request.topics:
        parts = []
        for index in t.partition_indexes:
            out = R.Topic.Partition(partition_index=index, error_code=NONE, active_producers=[])
            code, plog = _local_replica(state, t.name, index)
            if code != NONE:
                out.error_code = code
            else:
                try:
                    table = state.producer_states.table(plog)
                except KraftError as exc:
                    out.error_code, out.error_message = int(exc.code), str(exc)
                else:
                    out.active_producers = [
                        R.Topic.Partition.ProducerState(
                            producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
                            last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                            current_txn_start_offset=e.txn_first_offset)
                        for e in sorted(table.producers.values(), key=lambda e: e.producer_id)]
            parts.append(out)
        topics.append(R.Topic(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
