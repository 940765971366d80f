"""The broker side of log compaction: which local partition logs the cleaner compacts (those
whose topic's ``cleanup.policy`` has ``compact``; leaders and followers alike each compact
their own replica, as in Kafka) and with which settings, and the bridge that runs the
cleaner's owner-thread steps (listing candidates, swapping segments) on the event loop.

The cleaner's threads do the reading, hashing, writing and fsyncs; the loop only lists
candidates (a pass over the local logs) and renames files during a swap.
"""

from __future__ import annotations

import asyncio
import concurrent.futures

from kraft.errors import ConfigError
from kraft.log.cleaner import CleanAborted
from kraft.log.log_cleaner import CleanCandidate, CleanerConfig, CompactionPolicy, LogCleaner


def cleaner_config(values: dict) -> CleanerConfig:
    """``log.cleaner.*`` from the node's settings (server.properties)."""
    cap = values.get("log.cleaner.io.max.bytes.per.second") or ""
    try:
        rate = float(cap) if cap else float("inf")
    except ValueError:
        raise ConfigError(f"log.cleaner.io.max.bytes.per.second must be a number, got {cap!r}") from None
    return CleanerConfig(threads=values["log.cleaner.threads"], dedupe_buffer_size=values["log.cleaner.dedupe.buffer.size"],
                         backoff_ms=values["log.cleaner.backoff.ms"], io_max_bytes_per_second=rate)


def compaction_candidates(logs, state) -> list[CleanCandidate]:
    """The local logs of compacted topics, with their topics' settings (owner thread)."""
    out, configs = [], {}
    for plog in logs:
        cfg = configs.get(plog.topic)
        if cfg is None:
            cfg = configs[plog.topic] = state.topic_config(plog.topic)
        if not cfg.compact:
            continue
        policy = CompactionPolicy(min_cleanable_ratio=cfg.min_cleanable_ratio,
                                  min_compaction_lag_ms=cfg.min_compaction_lag_ms,
                                  max_compaction_lag_ms=cfg.max_compaction_lag_ms,
                                  delete_retention_ms=cfg.delete_retention_ms, segment_bytes=cfg.segment_bytes)
        out.append(CleanCandidate((plog.topic, plog.partition), plog.log_dir, plog.log, plog.high_watermark, policy))
    return out


class LoopBridge:
    """``run_on_owner(fn)`` for cleaner threads: ``fn`` runs on ``loop``; the thread waits for
    its result, giving up (CleanAborted) once ``stopping`` is set and ``fn`` has not started."""

    def __init__(self, loop: asyncio.AbstractEventLoop, stopping):
        self.loop = loop
        self.stopping = stopping

    def __call__(self, fn):
        future: concurrent.futures.Future = concurrent.futures.Future()

        def call():
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the cleaner thread
                future.set_exception(exc)
        try:
            self.loop.call_soon_threadsafe(call)
        except RuntimeError as exc:  # the loop is closed
            raise CleanAborted("the event loop is gone") from exc
        while True:
            try:
                return future.result(timeout=0.2)
            except concurrent.futures.TimeoutError:
                if self.stopping() and future.cancel():
                    raise CleanAborted("the broker is stopping") from None


def start_cleaner(loop, logs, state, values: dict) -> LogCleaner:
    """A running LogCleaner for the broker's partition logs."""
    holder = {}
    bridge = LoopBridge(loop, lambda: holder["cleaner"].stopping)
    cleaner = LogCleaner(cleaner_config(values), lambda: compaction_candidates(logs, state), run_on_owner=bridge)
    holder["cleaner"] = cleaner
    cleaner.start()
    return cleaner
