"""``LogCleaner``: the threads that compact logs with ``cleanup.policy=compact`` (Kafka's
``LogCleaner`` and ``LogCleanerManager``): each thread picks the dirtiest log over its
``min.cleanable.dirty.ratio`` (or one whose dirty head is older than ``max.compaction.lag.ms``),
cleans it (``cleaner.clean_log``) and records where the clean part ends in its log dir's
``cleaner-offset-checkpoint``; with nothing to do it sleeps ``log.cleaner.backoff.ms``.

The cleanable section of a log is ``[first dirty offset, first uncleanable offset)``: the first
dirty offset is the checkpointed one (the log start if none, or if it fell outside the log);
the first uncleanable is the lowest of the high watermark, the active segment's base offset
and the base of the first segment with a record newer than ``min.compaction.lag.ms``.

Threads: the candidates are read and every swap is done on the logs' owner thread through
``run_on_owner``; everything else (reading, hashing, writing, fsyncs) runs here.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from kraft import records
from kraft.log.checkpoint import OffsetCheckpointFile
from kraft.log.cleaner import CleanAborted, CleanStats, Throttle, clean_log
from kraft.log.compact_codec import OffsetMap
from kraft.log.segment_swap import SwapAborted

_log = logging.getLogger("kraft.log.cleaner")

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings (Kafka's CleanerConfig defaults)."""

    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_load_factor: float = 0.9
    backoff_ms: int = 15_000
    io_max_bytes_per_second: float = float("inf")
    enable: bool = True


@dataclass(frozen=True)
class CompactionPolicy:
    """A topic's compaction settings."""

    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86_400_000
    segment_bytes: int = 1 << 30


@dataclass
class CleanCandidate:
    """A compacted log as the owner thread saw it when the cleaner asked."""

    key: tuple  # (topic, partition)
    log_dir: str
    log: object  # SegmentedLog
    high_watermark: int
    policy: CompactionPolicy


@dataclass
class _Cleanable:
    candidate: CleanCandidate
    first_dirty: int
    upper: int
    ratio: float
    dirty_bytes: int
    overdue: bool


@dataclass
class CleanerTotals:
    """Since start: what every thread did (for metrics and tests)."""

    passes: int = 0
    aborted: int = 0
    failed: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    last: dict = field(default_factory=dict)  # key -> CleanStats of its last pass


def _segment_max_timestamp(seg) -> int:
    """The largest timestamp in a closed segment (Kafka's ``largestTimestamp``), from its batch headers."""
    if seg.index.loaded and seg.index.ts.n:
        return int(seg.index.ts.view()[-1])
    if not seg.size:
        return -1
    fd = os.open(seg.path, os.O_RDONLY)
    try:
        view = mmap.mmap(fd, seg.size, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    try:
        scan = records.scan_batches(view)
        return int(np.max(scan.max_timestamps)) if len(scan) else -1
    finally:
        del scan
        view.close()


def cleanable_section(c: CleanCandidate, first_dirty: int | None, now_ms: int) -> _Cleanable | None:
    """Where ``c``'s log may be cleaned and how dirty it is (Kafka's ``cleanableOffsets`` and
    ``LogToClean``); None when nothing is cleanable."""
    log, policy = c.log, c.policy
    segments = log.segments
    start, active_base = log.start_offset, segments[-1].base_offset
    if first_dirty is None or first_dirty < start or first_dirty > log.end_offset:
        first_dirty = start
    upper = min(c.high_watermark, active_base)
    overdue = False
    for seg in segments[:-1]:
        if seg.base_offset < first_dirty and (seg.next_offset <= first_dirty):
            continue
        if seg.base_offset >= upper:
            break
        if policy.min_compaction_lag_ms > 0 or policy.max_compaction_lag_ms < LONG_MAX:
            newest = _segment_max_timestamp(seg)
            if policy.min_compaction_lag_ms > 0 and newest > now_ms - policy.min_compaction_lag_ms:
                upper = min(upper, seg.base_offset)
                break
            if policy.max_compaction_lag_ms < LONG_MAX and 0 <= newest < now_ms - policy.max_compaction_lag_ms:
                overdue = True
    clean = dirty = 0
    for i, seg in enumerate(segments[:-1]):
        end = segments[i + 1].base_offset
        if end <= first_dirty:
            clean += seg.size
        elif end <= upper:
            dirty += seg.size
    if dirty == 0 or first_dirty >= upper:
        return None
    return _Cleanable(c, first_dirty, upper, dirty / (clean + dirty), dirty, overdue)


class LogCleaner:
    """``candidates()`` (run on the owner thread) lists the compacted logs; ``run_on_owner(fn)``
    runs ``fn`` there and returns its result (None: call directly, for single-threaded use)."""

    def __init__(self, config: CleanerConfig, candidates, run_on_owner=None, clock_ms=None):
        self.config = config
        self._candidates = candidates
        self._run_on_owner = run_on_owner
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._in_progress: set = set()
        self._uncleanable: set = set()
        self._checkpoints: dict[str, dict] = {}  # log dir -> {(topic, partition): first dirty offset}
        self._threads: list[threading.Thread] = []
        self.totals = CleanerTotals()

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        if not self.config.enable or self.config.threads <= 0:
            return
        for i in range(self.config.threads):
            t = threading.Thread(target=self._run, name=f"kraft-log-cleaner-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the threads: a pass in progress stops at its next segment group (its swaps
        so far are complete; a ``.cleaned`` file it leaves is removed at the next open)."""
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(timeout)
        self._threads = []

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def request_stop(self) -> None:
        """Ask the threads to stop without waiting for them (``stop`` waits)."""
        self._stop.set()
        self._wake.set()

    def wake(self) -> None:
        """Look for work now instead of after the backoff (tests, a config change)."""
        self._wake.set()

    # --- checkpoints ---------------------------------------------------------------------------
    def first_dirty_offset(self, log_dir: str, key: tuple) -> int | None:
        with self._lock:
            return self._checkpoint_of(log_dir).get(key)

    def _checkpoint_of(self, log_dir: str) -> dict:
        cp = self._checkpoints.get(log_dir)
        if cp is None:
            try:
                cp = OffsetCheckpointFile(os.path.join(log_dir, CLEANER_CHECKPOINT)).read()
            except Exception as exc:  # a bad file only costs a full clean, as in Kafka
                _log.warning("%s: %s; cleaning from the log starts", log_dir, exc)
                cp = {}
            self._checkpoints[log_dir] = cp
        return cp

    def _record(self, log_dir: str, key: tuple, offset: int, live: set) -> None:
        with self._lock:
            cp = self._checkpoint_of(log_dir)
            cp[key] = offset
            for gone in [k for k in cp if k not in live]:
                del cp[gone]
            OffsetCheckpointFile(os.path.join(log_dir, CLEANER_CHECKPOINT)).write(dict(cp))

    # --- the threads ---------------------------------------------------------------------------
    def _owner(self, fn):
        return fn() if self._run_on_owner is None else self._run_on_owner(fn)

    def clean_once(self, offset_map=None) -> CleanStats | None:
        """Pick the dirtiest cleanable log and clean it once; None when none qualifies."""
        candidates = self._owner(self._candidates)
        now = self._clock_ms()
        live_by_dir: dict[str, set] = {}
        best = None
        for c in candidates:
            live_by_dir.setdefault(c.log_dir, set()).add(c.key)
            with self._lock:
                if c.key in self._in_progress or (c.log_dir, c.key) in self._uncleanable:
                    continue
            if c.log.closed:
                continue
            section = cleanable_section(c, self.first_dirty_offset(c.log_dir, c.key), now)
            if section is None or not (section.overdue or section.ratio >= c.policy.min_cleanable_ratio):
                continue
            if best is None or section.ratio > best.ratio:
                best = section
        if best is None:
            return None
        c = best.candidate
        with self._lock:
            if c.key in self._in_progress:
                return None
            self._in_progress.add(c.key)
        try:
            if offset_map is None:
                offset_map = OffsetMap(self.config.dedupe_buffer_size // max(1, self.config.threads),
                                       self.config.io_buffer_load_factor)
            stats = clean_log(c.log, best.first_dirty, best.upper, offset_map, now_ms=now,
                              delete_retention_ms=c.policy.delete_retention_ms, segment_bytes=c.policy.segment_bytes,
                              run_on_owner=self._run_on_owner, throttle=Throttle(self.config.io_max_bytes_per_second),
                              stop=self._stop)
            self._record(c.log_dir, c.key, stats.end_offset, live_by_dir.get(c.log_dir, set()))
            with self._lock:
                t = self.totals
                t.passes += 1
                t.bytes_read += stats.bytes_read
                t.bytes_written += stats.bytes_written
                t.seconds += stats.seconds
                t.last[c.key] = stats
            _log.info("cleaned %s-%d below %d: %d -> %d bytes in %.3f s", c.key[0], c.key[1], stats.end_offset,
                      stats.bytes_read, stats.bytes_written, stats.seconds)
            return stats
        except (CleanAborted, SwapAborted, FileNotFoundError) as exc:
            with self._lock:
                self.totals.aborted += 1
            _log.info("cleaning %s-%d stopped: %s", c.key[0], c.key[1], exc)
            return None
        except Exception:
            with self._lock:
                self.totals.failed += 1
                self._uncleanable.add((c.log_dir, c.key))
            _log.exception("cleaning %s-%d failed; it is not cleaned again until restart", c.key[0], c.key[1])
            return None
        finally:
            with self._lock:
                self._in_progress.discard(c.key)

    def _run(self) -> None:
        offset_map = OffsetMap(self.config.dedupe_buffer_size // max(1, self.config.threads),
                               self.config.io_buffer_load_factor)
        while not self._stop.is_set():
            try:
                stats = self.clean_once(offset_map)
            except CleanAborted:
                stats = None
            except Exception:
                _log.exception("log cleaner thread")
                stats = None
            if stats is None:
                self._wake.wait(self.config.backoff_ms / 1000)
                self._wake.clear()
