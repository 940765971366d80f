"""DescribeProducers (API key 61, v0) on a partition leader (Kafka's
``ReplicaManager.activeProducerState``): per partition, the producers its producer state holds
with their epoch, last sequence and timestamp, the coordinator epoch of their last marker and
the first offset of their ongoing transaction (-1: none). Not the leader:
NOT_LEADER_OR_FOLLOWER; no such partition: UNKNOWN_TOPIC_OR_PARTITION. Reads state only.
"""

from __future__ import annotations

from kraft.broker.broker_state import NONE, BrokerState
from kraft.errors import KraftError
from kraft.protocol import DescribeProducersRequest, DescribeProducersResponse

R = DescribeProducersResponse


def handle_describe_producers(state: BrokerState, request: DescribeProducersRequest, version: int):
    topics = []
    for t in request.topics:
        parts = []
        for index in t.partition_indexes:
            out = R.Topic.Partition(partition_index=index, error_code=NONE, active_producers=[])
            code, plog, _reg = state.local_leader(t.name, index)
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
