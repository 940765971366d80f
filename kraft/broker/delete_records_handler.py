"""DeleteRecords on a partition leader (Kafka's ``ReplicaManager.deleteRecords``): the log start
offset moves to the requested offset (-1: the high watermark), the segments wholly below it
go, and the answer waits until every in-sync follower has moved its own start as far (the low
watermark: Kafka's ``DelayedDeleteRecords``) or the request's timeout passes. Followers learn the
new start from the leader's Fetch answers; parked follower fetches are woken so they do at once.

Refused as Kafka refuses: an offset above the high watermark (OFFSET_OUT_OF_RANGE), a topic
whose ``cleanup.policy`` lacks ``delete`` (POLICY_VIOLATION), an internal topic
(INVALID_TOPIC_EXCEPTION); not the leader: NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

import asyncio
import logging

from kraft.broker.broker_state import INTERNAL_TOPICS
from kraft.errors import ErrorCode as E
from kraft.errors import KraftError
from kraft.protocol import DeleteRecordsResponse

log = logging.getLogger("kraft.broker.delete_records")

POLL_S = 0.01


def low_watermark(state, plog, reg) -> int:
    """The smallest log start offset of the leader and its in-sync followers that fetched."""
    low = plog.log.start_offset
    st = state.replication.states.get((plog.topic, plog.partition))
    if st is not None:
        for replica_id in reg.isr:
            f = st.followers.get(replica_id)
            if f is not None:
                low = min(low, f.log_start_offset) if f.log_start_offset >= 0 else -1
    return low


class DeleteRecordsHandler:
    def __init__(self, state, wake):
        """``wake(plog)``: wake the fetches parked on ``plog`` (the followers')."""
        self.state, self.wake = state, wake

    def handle(self, request, version: int):
        R = DeleteRecordsResponse
        waiting = []  # (R partition, plog, reg, target)
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                out = R.Topic.Partition(partition_index=p.partition_index, low_watermark=-1, error_code=0)
                parts.append(out)
                code, target, plog, reg = self._delete(t.name, p.partition_index, p.offset)
                out.error_code = code
                if code == 0:
                    waiting.append((out, plog, reg, target))
            topics.append(R.Topic(name=t.name, partitions=parts))
        resp = R(throttle_time_ms=0, topics=topics)
        if not waiting:
            return resp
        return self._answer_when_low(resp, waiting, max(0, request.timeout_ms) / 1000)

    def _delete(self, topic: str, partition: int, offset: int):
        if topic in INTERNAL_TOPICS:
            return int(E.INVALID_TOPIC_EXCEPTION), -1, None, None
        code, plog, reg = self.state.local_leader(topic, partition)
        if code:
            return code, -1, None, None
        if not self.state.topic_config(topic).delete:
            return int(E.POLICY_VIOLATION), -1, None, None
        hw = self.state.advance_high_watermark(plog, reg)
        target = hw if offset == -1 else offset
        if target < 0 or target > hw:
            return int(E.OFFSET_OUT_OF_RANGE), -1, None, None
        try:
            if target > plog.log.start_offset:
                plog.log.delete_below(target)
        except KraftError as exc:
            log.warning("delete records %s-%d below %d: %s", topic, partition, target, exc)
            return int(exc.code), -1, None, None
        self.wake(plog)
        return 0, target, plog, reg

    async def _answer_when_low(self, resp, waiting, timeout_s: float):
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while True:
            pending = []
            for out, plog, reg, target in waiting:
                low = low_watermark(self.state, plog, reg)
                if low >= target:
                    out.low_watermark = low
                else:
                    pending.append((out, plog, reg, target))
            if not pending:
                return resp
            if loop.time() >= end:
                for out, *_ in pending:
                    out.error_code = int(E.REQUEST_TIMED_OUT)
                return resp
            waiting = pending
            await asyncio.sleep(POLL_S)
