"""MetadataSnapshots: when and how a controller node snapshots its committed metadata image.

When: ``kraft.metadata.snapshot_schedule.decide`` (Kafka's byte and time triggers, voters
staggered by turns), asked after every commit and at the deadline it names. What: the
controller's committed image at the committed offset, written as Kafka's snapshot file
(``<offset>-<epoch>.checkpoint``: header, the image's records, footer). How: the records are
encoded and the file written and fsynced on one worker thread (the image is immutable, so the
loop goes on serving); the loop then publishes the snapshot to the log and the core, which may
trim the log prefix. No snapshot is taken inside an open metadata transaction (its records
would be split between snapshot and log) or while the controller lags the Raft commit.

This module decides nothing about the metadata itself; it must not block the loop on the disk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from kraft.metadata.snapshot_image import write_image_snapshot
from kraft.metadata.snapshot_schedule import ScheduleConfig, ScheduleState, decide, voter_index
from kraft.types import OffsetAndEpoch

log = logging.getLogger("kraft.snapshots")


def wall_ms() -> int:
    return int(time.time() * 1000)


class MetadataSnapshots:
    def __init__(self, core, records_listener, controller, *, config: ScheduleConfig, node_id: int, voters,
                 clock_ms=wall_ms):
        self.core = core
        self.listener = records_listener  # committed offset, epoch, timestamp and bytes since the last snapshot
        self.controller = controller  # the committed image
        self.config = config
        self.index = voter_index(voters, node_id)
        self.voters = len(list(voters))
        self.clock_ms = clock_ms
        self.last_snapshot_ms = clock_ms()
        self.writing = False
        self.taken = 0
        self.failed = 0
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="metadata-snapshot")
        self._timer = None
        self._loop = None
        self._closed = False

    def after_commit(self, now_ms: int) -> None:
        if self.writing or self._closed:
            return
        if self._timer is not None and self.listener.bytes_since_snapshot < self.config.max_bytes:
            # Not due by bytes, and the timer armed at the last decision decides the rest when
            # it fires (deciding again after every commit cost each node a schedule per write).
            return
        state = ScheduleState(self.listener.bytes_since_snapshot, self.last_snapshot_ms, self.writing)
        decision = decide(self.config, state, now_ms, index=self.index, voters=self.voters)
        if not decision.start:
            if decision.retry_at_ms is not None:
                self._arm(decision.retry_at_ms - now_ms)
            return
        self._start(now_ms, decision.reason)

    def _arm(self, delay_ms: int) -> None:
        # A timer due no later stays: it re-decides when it fires (re-arming at every commit
        # was a timer handle per write).
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()  # a getpid per call: ask once
        due = loop.time() + max(0, delay_ms) / 1000
        if self._timer is not None:
            if self._timer.when() <= due:
                return
            self._timer.cancel()
        self._timer = loop.call_at(due, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self.after_commit(self.clock_ms())

    def _start(self, now_ms: int, reason: str) -> None:
        lst, ctl = self.listener, self.controller
        if ctl.next_offset != lst.next_offset or ctl.open_transaction:
            return  # asked again after the next commit
        sid = OffsetAndEpoch(lst.next_offset, lst.last_epoch)
        try:
            # The last contained record's timestamp: metadata.max.retention.ms ages the
            # snapshot (and the segments it replaces) by it, as Kafka does.
            writer = self.core.create_snapshot(sid, now_ms, lst.last_timestamp)
        except ValueError as exc:  # e.g. the listener is ahead of this node's HW after a reload
            log.debug("no snapshot at %s: %s", sid, exc)
            return
        self.last_snapshot_ms = now_ms
        lst.bytes_since_snapshot = 0
        if writer is None:
            return
        self.writing = True
        image = ctl.image
        started = time.monotonic()
        fut = asyncio.get_running_loop().run_in_executor(self._executor, self._write, image, writer)
        fut.add_done_callback(lambda f: self._written(f, writer, sid, started, reason))

    @staticmethod
    def _write(image, writer):
        stats = write_image_snapshot(image, writer.append)
        writer.seal()
        return stats

    def _written(self, fut, writer, sid: OffsetAndEpoch, started: float, reason: str) -> None:
        self.writing = False
        exc = None if fut.cancelled() else fut.exception()
        if fut.cancelled() or exc is not None:
            self.failed += 1
            writer.abort()
            log.error("snapshot %020d-%010d failed: %s", sid.offset, sid.epoch, exc or "cancelled")
            return
        if self._closed:
            writer.abort()
            return
        writer.publish()
        self.taken += 1
        stats = fut.result()
        log.info("snapshot %020d-%010d written (%s): %d records in %d batches, %.0f ms off the loop",
                 sid.offset, sid.epoch, reason, stats.records, stats.batches, (time.monotonic() - started) * 1000)

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        self._executor.shutdown(wait=True)
