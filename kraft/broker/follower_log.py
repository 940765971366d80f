"""The replica fetchers' view of and hands on the local partition logs: ``LocalReplicas`` is
the read-only port a ``ReplicaFetcher`` asks (end offset, latest epoch, epoch end offsets from
the leader-epoch checkpoint, HW), and ``apply_fetch_effects`` executes a fetcher's effects on
``PartitionLogs`` in order (Kafka's ``ReplicaFetcherThread.processPartitionData`` and
``truncate``): follower appends keep the leader's offsets and epochs (bytes as they arrived,
a partial trailing batch dropped), truncations rebuild the producer state, the follower's HW
is the leader's clamped to its own log end. The server layer calls it on the loop thread
(or hands the appends to its I/O thread); no sockets here.
"""

from __future__ import annotations

import logging

from kraft.broker.replica_fetcher import (AppendAsFollower, Truncate, TruncateFullyAndStartAt, UpdateHighWatermark,
                                          UpdateLogStart)
from kraft.errors import KraftError

log = logging.getLogger("kraft.broker.follower")


class LocalReplicas:
    """``ReplicaFetcher``'s ``local`` port over ``PartitionLogs`` (tp = (topic, partition))."""

    def __init__(self, logs):
        self.logs = logs

    def changes(self) -> int:
        """Moves whenever a local log is made, replaced or deleted or retention cuts one: what a
        fetcher cannot learn from its own answers (see ``ReplicaFetcher``)."""
        return self.logs.changes

    def has(self, tp) -> bool:
        """Is there a local log (one being made off the loop is not there yet)?"""
        return self.logs.get(*tp) is not None

    def _log(self, tp):
        plog = self.logs.get(*tp)
        if plog is None:
            raise KeyError(f"no local log for {tp[0]}-{tp[1]}")
        return plog

    def end_offset(self, tp) -> int:
        return self._log(tp).log.end_offset

    def start_offset(self, tp) -> int:
        return self._log(tp).log.start_offset

    def latest_epoch(self, tp):
        return self._log(tp).log.latest_epoch

    def position(self, tp) -> tuple:
        """(end offset, start offset, latest epoch or None): what a Fetch asks with, in one
        lookup (a fetcher asks it of every partition of its session on every request)."""
        log = self._log(tp).log
        return log.end_offset, log.start_offset, log.latest_epoch

    def high_watermark(self, tp) -> int:
        return self._log(tp).high_watermark

    def end_offset_for_epoch(self, tp, epoch: int) -> tuple[int, int]:
        found = self._log(tp).log.end_offset_for_epoch(epoch)
        return found.offset, found.epoch


def apply_fetch_effects(logs, effects, producer_states=None) -> list:
    """Execute ``effects`` in order; returns the PartitionLogs that changed. A failed
    effect (corrupt batch from the leader, storage error) skips that partition's remaining
    effects in this batch and is logged; the next fetch starts again from the log end."""
    changed = []
    failed = set()
    for eff in effects:
        tp = eff.tp
        if tp in failed:
            continue
        plog = logs.get(*tp)
        if plog is None:
            continue
        seg_log = plog.log
        try:
            if isinstance(eff, AppendAsFollower):
                info = seg_log.append(eff.records, assign_offsets=False, ignore_partial_tail=True)
                if info is not None and producer_states is not None:
                    producer_states.on_appended(plog, eff.records)
            elif isinstance(eff, Truncate):
                seg_log.truncate_to(eff.offset)
                plog.high_watermark = min(plog.high_watermark, seg_log.end_offset)
                if producer_states is not None:
                    producer_states.on_truncated(plog)
            elif isinstance(eff, TruncateFullyAndStartAt):
                seg_log.truncate_fully_and_start_at(eff.offset)
                plog.high_watermark = eff.offset
                if producer_states is not None:
                    producer_states.on_truncated(plog)
            elif isinstance(eff, UpdateLogStart):
                if eff.offset > seg_log.start_offset:
                    seg_log.delete_below(min(eff.offset, seg_log.end_offset))
            elif isinstance(eff, UpdateHighWatermark):
                # A follower's HW may go back only by truncation; the leader's value is
                # clamped to what this replica holds.
                plog.high_watermark = max(plog.high_watermark, min(eff.high_watermark, seg_log.end_offset))
        except KraftError as exc:
            log.warning("follower %s-%d: %s failed: %s", tp[0], tp[1], type(eff).__name__, exc)
            failed.add(tp)
            continue
        if plog not in changed:
            changed.append(plog)
    return changed
