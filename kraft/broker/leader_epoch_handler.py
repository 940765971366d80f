"""OffsetForLeaderEpoch (API key 23, v2-v4) and DescribeLogDirs (API key 35, v1-v4).

OffsetForLeaderEpoch is Kafka's ``Partition.lastOffsetForLeaderEpoch`` on the leader: the
end offset of the requested epoch from the leader-epoch cache (the largest epoch <= it and
where the next one starts, or the log end for the latest), with the leader and epoch checks.
DescribeLogDirs lists every log dir with its partitions' sizes and offset lag (log end minus
high watermark). Both read state only.
"""

from __future__ import annotations

import os

from kraft.broker.broker_state import NONE, BrokerState
from kraft.errors import ErrorCode
from kraft.protocol import (DescribeLogDirsRequest, DescribeLogDirsResponse, OffsetForLeaderEpochRequest,
                            OffsetForLeaderEpochResponse)

O = OffsetForLeaderEpochResponse
D = DescribeLogDirsResponse


def handle_offsets_for_leader_epoch(state: BrokerState, request: OffsetForLeaderEpochRequest,
                                    version: int) -> OffsetForLeaderEpochResponse:
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            code, plog, _ = state.local_leader(t.topic, p.partition, p.current_leader_epoch)
            if code != NONE:
                parts.append(O.Topic.Partition(error_code=code, partition=p.partition))
                continue
            found = plog.log.end_offset_for_epoch(p.leader_epoch)
            parts.append(O.Topic.Partition(error_code=NONE, partition=p.partition, leader_epoch=found.epoch,
                                           end_offset=found.offset))
        topics.append(O.Topic(topic=t.topic, partitions=parts))
    return O(throttle_time_ms=0, topics=topics)


def handle_describe_log_dirs(state: BrokerState, request: DescribeLogDirsRequest,
                             version: int) -> DescribeLogDirsResponse:
    wanted = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    results = []
    logs = state.logs
    for log_dir in logs.log_dirs:
        if not logs.dirs.is_online(log_dir):  # KIP-858: a failed directory, reported as Kafka does
            results.append(D.Result(error_code=int(ErrorCode.KAFKA_STORAGE_ERROR), log_dir=log_dir, topics=[],
                                    total_bytes=-1, usable_bytes=-1))
            continue
        by_topic: dict = {}
        for plog in logs:
            if plog.log_dir != log_dir or (wanted is not None and (plog.topic, plog.partition) not in wanted):
                continue
            by_topic.setdefault(plog.topic, []).append(D.Result.Topic.Partition(
                partition_index=plog.partition, partition_size=plog.log.size_bytes,
                offset_lag=max(0, plog.log.end_offset - plog.high_watermark), is_future_key=False))
        for move in (logs.moves.moves.values() if logs.moves is not None else ()):
            plog = move.plog  # a replica being moved here: Kafka's future replica
            if move.target != log_dir or (wanted is not None and (plog.topic, plog.partition) not in wanted):
                continue
            by_topic.setdefault(plog.topic, []).append(D.Result.Topic.Partition(
                partition_index=plog.partition, partition_size=move.future.size_bytes, offset_lag=move.lag,
                is_future_key=True))
        total = usable = -1
        try:
            st = os.statvfs(log_dir)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            pass
        results.append(D.Result(error_code=int(ErrorCode.NONE), log_dir=log_dir,
                                topics=[D.Result.Topic(name=n, partitions=ps) for n, ps in sorted(by_topic.items())],
                                total_bytes=total, usable_bytes=usable))
    return D(throttle_time_ms=0, error_code=NONE, results=results)
