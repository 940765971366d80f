"""ListOffsets (API key 2, v1-v10) on the partition leader (Kafka's
``UnifiedLog.fetchOffsetByTimestamp``): -2 earliest (log start offset), -1 latest (high
watermark; the last stable offset for read_committed, isolation level 1, v2+),
-3 the record with the largest timestamp (v7+, KIP-734), -4 the local log start (v8+,
KIP-405: the log start, kraft having no remote tier), -5 the last tiered offset (v9+,
KIP-1005: -1 without a remote tier, as Kafka answers), any other timestamp the first record
at or after it (the time index narrows the walk), or offset -1 when there is none. v10's
timeout is for remote reads, which kraft has none of.
Leader and leader-epoch checks as for Fetch. Reads the log; writes nothing.
"""

from __future__ import annotations

from kraft.broker.broker_state import NONE, BrokerState
from kraft.errors import ErrorCode, FatalLogError, KraftError
from kraft.log.log_reads import max_timestamp_offset, offset_for_timestamp
from kraft.protocol import ListOffsetsRequest, ListOffsetsResponse

L = ListOffsetsResponse
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def handle_list_offsets(state: BrokerState, request: ListOffsetsRequest, version: int) -> ListOffsetsResponse:
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            try:
                parts.append(_one(state, t.name, p, version, request.isolation_level if version >= 2 else 0))
            except FatalLogError:
                parts.append(L.Topic.Partition(partition_index=p.partition_index,
                                               error_code=int(ErrorCode.KAFKA_STORAGE_ERROR)))
            except KraftError as exc:
                parts.append(L.Topic.Partition(partition_index=p.partition_index, error_code=int(exc.code)))
        topics.append(L.Topic(name=t.name, partitions=parts))
    return L(throttle_time_ms=0, topics=topics)


def _one(state: BrokerState, topic: str, p, version: int, request_isolation: int = 0) -> L.Topic.Partition:
    code, plog, reg = state.local_leader(topic, p.partition_index, p.current_leader_epoch)
    if code != NONE:
        return L.Topic.Partition(partition_index=p.partition_index, error_code=code)
    log = plog.log
    hw = state.advance_high_watermark(plog, reg)
    ts = p.timestamp
    if ts == EARLIEST or (ts == EARLIEST_LOCAL and version >= 8):
        found = (-1, log.start_offset)
    elif ts == LATEST_TIERED and version >= 9:
        out = L.Topic.Partition(partition_index=p.partition_index, error_code=NONE, timestamp=-1, offset=-1)
        out.leader_epoch = -1
        return out
    elif ts == LATEST:
        # read_committed sees up to the last stable offset (Kafka's fetchOffsetByTimestamp).
        found = (-1, state.producer_states.last_stable_offset(plog) if request_isolation == 1 else hw)
    elif ts == MAX_TIMESTAMP and version >= 7:
        found = max_timestamp_offset(log, hw)
    elif ts < 0:
        return L.Topic.Partition(partition_index=p.partition_index, error_code=int(ErrorCode.INVALID_REQUEST))
    else:
        found = offset_for_timestamp(log, ts, hw)
    if found is None:
        return L.Topic.Partition(partition_index=p.partition_index, error_code=NONE, timestamp=-1, offset=-1)
    timestamp, offset = found
    out = L.Topic.Partition(partition_index=p.partition_index, error_code=NONE, timestamp=timestamp, offset=offset)
    if version >= 4:  # the field exists from v4; the codec refuses a value a version cannot carry
        epoch = log.epoch_for_offset(offset) if offset < log.end_offset else log.latest_epoch
        out.leader_epoch = -1 if epoch is None else epoch
    return out
