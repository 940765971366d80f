"""The partitions this broker leads, as replication sees them: one ``PartitionLeaderState``
per led partition (made when first needed from the image registration, dropped when the
image names another leader or leader epoch), the high watermarks they move, and the ISR
changes they propose, batched into AlterPartition requests the way Kafka's
``AlterPartitionManager`` does (one request in flight per broker, one proposal per partition;
a proposal whose outcome is unknown goes out again after ``retry_backoff_ms``).

The request handlers call ``high_watermark`` / ``on_leader_append`` / ``on_follower_fetch``;
the server layer calls ``tick`` every ``replica.lag.time.max.ms / 2`` (ISR shrink), sends
what ``poll_alter_partition`` returns to the active controller and hands the answer (or the
failure) back. No sockets, no timers, no asyncio: time is passed in or read from the
injected clock.
"""

from __future__ import annotations

import time

import numpy as np

from kraft.broker.leader_partition import (DEFAULT_REPLICA_LAG_TIME_MAX_MS, NONE, IsrProposal, PartitionLeaderState,
                                           advance_hw)
from kraft.errors import ErrorCode
from kraft.protocol import AlterPartitionRequest, AlterPartitionResponse

A = AlterPartitionRequest


#: Kafka's ``retry.backoff.ms`` default: the wait before a failed AlterPartition goes out again.
DEFAULT_RETRY_BACKOFF_MS = 100


def _wall_ms() -> int:
    return int(time.time() * 1000)


class LeaderReplication:
    def __init__(self, broker_id: int, *, lag_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS, clock_ms=None,
                 min_isr_of=None, retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS):
        self.broker_id = broker_id
        self.lag_max_ms = lag_max_ms
        #: topic name -> min.insync.replicas (read when a state is made and on each image)
        self.min_isr_of = min_isr_of or (lambda topic: 1)
        self.clock_ms = clock_ms or _wall_ms
        self.states: dict[tuple[str, int], PartitionLeaderState] = {}
        self._queued: dict[tuple[str, int], IsrProposal] = {}  # proposals not sent yet
        self.retry_backoff_ms = retry_backoff_ms
        self._retry_at_ms = 0  # no request before this after a failed one
        #: (topic id, partition) -> (state, the proposal sent), while a request is out
        self._in_flight: dict | None = None

    # --- the state of one partition ------------------------------------------------------------
    def state_for(self, plog, reg, now_ms: int | None = None) -> PartitionLeaderState | None:
        """The leader state of ``plog`` under registration ``reg``, made or brought up to
        date; None if this broker does not lead it."""
        key = (plog.topic, plog.partition)
        st = self.states.get(key)
        now = self.clock_ms() if now_ms is None else now_ms
        leo = plog.log.end_offset
        if st is not None:
            if st.on_registration(reg, leo, now):
                self._sync_hw(plog, st)
                return st
            self._drop(key)
        if reg.leader != self.broker_id:
            return None
        seg_log = plog.log
        # Kafka's makeLeader: the new epoch starts at the log end, in the epoch cache at once
        # (followers ask for epoch end offsets before anything is appended in it).
        latest = seg_log.latest_epoch
        if latest is None or latest < reg.leader_epoch:
            seg_log.assign_epoch_start(reg.leader_epoch)
        start = seg_log.end_offset_for_epoch(reg.leader_epoch - 1).offset if reg.leader_epoch > 0 else 0
        st = PartitionLeaderState(self.broker_id, plog.topic, plog.partition, plog.topic_id, reg, leader_leo=leo,
                                  high_watermark=plog.high_watermark, epoch_start_offset=max(start, 0),
                                  now_ms=now, lag_max_ms=self.lag_max_ms, min_isr=self.min_isr_of(plog.topic))
        self.states[key] = st
        self._sync_hw(plog, st)
        return st

    def _drop(self, key) -> None:
        self.states.pop(key, None)
        self._queued.pop(key, None)

    @staticmethod
    def _sync_hw(plog, st: PartitionLeaderState) -> bool:
        if st.high_watermark > plog.high_watermark:
            plog.high_watermark = min(st.high_watermark, plog.log.end_offset)
            return True
        return False

    def on_image(self, image, logs, now_ms: int | None = None) -> list:
        """After each metadata image: drop the states of partitions this broker no longer
        leads (in that epoch), apply committed ISR changes to the others, and make states for
        newly led partitions with other replicas (so ``tick`` judges their followers even
        before anyone produces or fetches). Returns the PartitionLogs whose HW moved (a
        committed shrink can release acks=all waits)."""
        moved = []
        for key in list(self.states):
            topic = image.topics.by_name.get(key[0])
            reg = topic.partitions.get(key[1]) if topic is not None else None
            plog = logs.get(*key)
            if reg is None or plog is None:
                self._drop(key)
                continue
            before = plog.high_watermark
            st = self.states[key]
            st.min_isr = self.min_isr_of(key[0])  # a config change arrives with an image
            self.state_for(plog, reg, now_ms)
            if plog.high_watermark != before:
                moved.append(plog)
        for topic in image.topics.by_id.values():
            for pid, reg in topic.partitions.items():
                if reg.leader == self.broker_id and len(reg.replicas) > 1 and (topic.name, pid) not in self.states:
                    plog = logs.get(topic.name, pid)
                    if plog is not None and plog.topic_id == topic.id:
                        self.state_for(plog, reg, now_ms)
        return moved

    # --- the handlers' calls -------------------------------------------------------------------
    def high_watermark(self, plog, reg) -> int:
        st = self.state_for(plog, reg)
        if st is not None:
            st.on_leader_append(plog.log.end_offset)
            self._sync_hw(plog, st)
        return plog.high_watermark

    def on_follower_fetch(self, plog, reg, replica_id: int, fetch_offset: int, log_start_offset: int,
                          now_ms: int | None = None) -> bool:
        """A follower's fetch at ``fetch_offset``; True if the HW moved (wake waiters)."""
        now = self.clock_ms() if now_ms is None else now_ms
        st = self.state_for(plog, reg, now)
        if st is None:
            return False
        _, proposal = st.on_follower_fetch(replica_id, fetch_offset, log_start_offset, plog.log.end_offset, now)
        if proposal is not None:
            self._queued[(plog.topic, plog.partition)] = proposal
        return self._sync_hw(plog, st)

    def tick(self, logs, now_ms: int | None = None) -> int:
        """The ISR shrink check over every led partition; returns proposals queued."""
        now = self.clock_ms() if now_ms is None else now_ms
        n = 0
        for key, st in self.states.items():
            plog = logs.get(*key)
            if plog is None:
                continue
            proposal = st.maybe_shrink(plog.log.end_offset, now)
            if proposal is not None:
                self._queued[key] = proposal
                n += 1
            self._sync_hw(plog, st)
        return n

    def recompute_all(self, logs) -> int:
        """Every led partition's HW in one vectorised pass (after a batch of ISR or LEO
        changes); returns how many moved. Same result as the per-partition rule."""
        keys = [k for k in self.states if logs.get(*k) is not None]
        if not keys:
            return 0
        width = max(len(self.states[k].replicas) for k in keys) or 1
        leos = np.full((len(keys), width), -1, np.int64)
        mask = np.zeros((len(keys), width), bool)
        for i, k in enumerate(keys):
            st = self.states[k]
            isr = set(st.maximal_isr) if not st.under_min_isr else ()  # a row of no members: no move
            for j, r in enumerate(st.replicas):
                leos[i, j] = logs.get(*k).log.end_offset if r == self.broker_id else st.followers[r].log_end_offset
                mask[i, j] = r in isr
        hws = np.fromiter((self.states[k].high_watermark for k in keys), np.int64, len(keys))
        # The kernel applies "never backwards" itself and hands back only the rows that moved.
        rows, new = advance_hw(leos, mask, hws)
        moved = 0
        for i, hw in zip(rows.tolist(), new.tolist()):
            k = keys[i]
            st = self.states[k]
            st.high_watermark = hw
            moved += self._sync_hw(logs.get(*k), st)
        return moved

    # --- AlterPartition ------------------------------------------------------------------------
    def poll_alter_partition(self, broker_epoch: int = -1) -> AlterPartitionRequest | None:
        """The next AlterPartition request (v2/v3 fields both filled), or None if one is in
        flight or nothing is queued. Send it with version >= 2 (topic ids)."""
        if self._in_flight is not None or not self._queued or self.clock_ms() < self._retry_at_ms:
            return None
        by_topic: dict = {}
        self._in_flight = {}
        for key, p in self._queued.items():
            st = self.states.get(key)
            if st is None or st.pending is not p:
                continue
            st.pending_sent = True
            self._in_flight[(p.topic_id, p.partition)] = (st, p)
            by_topic.setdefault(p.topic_id, []).append(A.Topic.Partition(
                partition_index=p.partition, leader_epoch=p.leader_epoch, new_isr=list(p.new_isr),
                new_isr_with_epochs=[A.Topic.Partition.BrokerState(broker_id=r, broker_epoch=-1) for r in p.new_isr],
                leader_recovery_state=0, partition_epoch=p.partition_epoch))
        self._queued.clear()
        if not by_topic:
            self._in_flight = None
            return None
        return A(broker_id=self.broker_id, broker_epoch=broker_epoch,
                 topics=[A.Topic(topic_id=tid, partitions=ps) for tid, ps in by_topic.items()])

    def _answer(self, sent, code: int, partition_epoch: int = -1) -> None:
        """Hand an answer to the state only if the proposal it answers is still the pending one:
        an image may have settled that proposal while the request was out, and a newer proposal
        (built on the newer partition epoch) must not take the old one's "stale" verdict, which
        would stop the partition's ISR changes until an image that may never come."""
        st, proposal = sent
        key = (st.topic, st.partition)
        if st.pending is proposal and self.states.get(key) is st:  # not a state dropped meanwhile
            st.on_alter_partition_result(code, partition_epoch)
            if st.pending is proposal and not st.pending_sent:  # outcome unknown: send it again
                self._queued[key] = proposal
                self._retry_at_ms = self.clock_ms() + self.retry_backoff_ms

    def on_alter_partition_response(self, resp: AlterPartitionResponse) -> None:
        flight, self._in_flight = self._in_flight or {}, None
        if resp.error_code != NONE:
            for sent in flight.values():
                self._answer(sent, resp.error_code)
            return
        for t in resp.topics:
            for p in t.partitions:
                sent = flight.pop((t.topic_id, p.partition_index), None)
                if sent is not None:
                    self._answer(sent, p.error_code, p.partition_epoch)
        for sent in flight.values():  # not answered: as if failed, may be proposed again
            self._answer(sent, int(ErrorCode.UNKNOWN_SERVER_ERROR))

    def on_alter_partition_failed(self) -> None:
        """The request was not answered (connection lost, timeout)."""
        flight, self._in_flight = self._in_flight or {}, None
        for sent in flight.values():
            self._answer(sent, int(ErrorCode.REQUEST_TIMED_OUT))
