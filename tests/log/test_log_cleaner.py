"""LogCleaner's choice of what to clean (Kafka's LogCleanerManager): the dirty ratio,
min/max compaction lag, the high watermark, the cleaner-offset-checkpoint file, and its
threads stopping cleanly."""

from __future__ import annotations

import os
import time

from _compaction_helpers import append_keyed, latest_per_key, open_compact_log, read_all

from kraft.log.checkpoint import OffsetCheckpointFile
from kraft.log.log_cleaner import (CLEANER_CHECKPOINT, CleanCandidate, CleanerConfig, CompactionPolicy, LogCleaner,
                                   cleanable_section)


def _log_with(tmp_path, rounds=30, keys=20, timestamp=1_000):
    log = open_compact_log(tmp_path / "t-0")
    append_keyed(log, [(f"k{k}".encode(), f"v{r}".encode() * 5) for r in range(rounds) for k in range(keys)],
                 timestamp=timestamp)
    return log


def _candidate(tmp_path, log, hw=None, **policy):
    return CleanCandidate(("t", 0), str(tmp_path), log, log.end_offset if hw is None else hw,
                          CompactionPolicy(segment_bytes=log.config.segment_bytes, **policy))


def test_dirty_ratio_decides_and_a_clean_log_is_not_cleaned_again(tmp_path):
    log = _log_with(tmp_path)
    c = _candidate(tmp_path, log)
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20), lambda: [c], clock_ms=lambda: 5_000)
    first = cleaner.clean_once()
    assert first is not None and first.bytes_written < first.bytes_read
    cp = OffsetCheckpointFile(os.path.join(tmp_path, CLEANER_CHECKPOINT)).read()
    assert cp == {("t", 0): first.end_offset} and first.end_offset == log.segments[-1].base_offset
    assert cleaner.clean_once() is None  # nothing dirty left
    section = cleanable_section(c, None, 5_000)
    assert section is not None and section.ratio == 1.0  # with no checkpoint it is all dirty
    log.close()


def test_ratio_below_the_minimum_is_left_alone(tmp_path):
    log = _log_with(tmp_path)
    c = _candidate(tmp_path, log, min_cleanable_ratio=1.01)
    cleaner = LogCleaner(CleanerConfig(), lambda: [c], clock_ms=lambda: 5_000)
    assert cleaner.clean_once() is None
    log.close()


def test_max_compaction_lag_forces_a_clean_below_the_ratio(tmp_path):
    log = _log_with(tmp_path, timestamp=1_000)
    c = _candidate(tmp_path, log, min_cleanable_ratio=1.01, max_compaction_lag_ms=1_000)
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20), lambda: [c], clock_ms=lambda: 5_000)
    assert cleaner.clean_once() is not None
    log.close()


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    log = _log_with(tmp_path, timestamp=4_500)
    before = read_all(log)
    c = _candidate(tmp_path, log, min_compaction_lag_ms=1_000)
    cleaner = LogCleaner(CleanerConfig(), lambda: [c], clock_ms=lambda: 5_000)
    assert cleaner.clean_once() is None  # every record is younger than 1 s
    assert read_all(log) == before
    log.close()


def test_nothing_at_or_above_the_high_watermark_is_cleaned(tmp_path):
    log = _log_with(tmp_path)
    before = read_all(log)
    hw = log.segments[2].base_offset
    c = _candidate(tmp_path, log, hw=hw)
    cleaner = LogCleaner(CleanerConfig(dedupe_buffer_size=1 << 20), lambda: [c], clock_ms=lambda: 5_000)
    stats = cleaner.clean_once()
    assert stats.end_offset <= hw
    assert [r for r in read_all(log) if r[0] >= hw] == [r for r in before if r[0] >= hw]
    log.close()


def test_threads_clean_in_the_background_and_stop(tmp_path):
    log = _log_with(tmp_path)
    before = read_all(log)
    c = _candidate(tmp_path, log)
    cleaner = LogCleaner(CleanerConfig(threads=1, backoff_ms=50, dedupe_buffer_size=1 << 20), lambda: [c])
    cleaner.start()
    deadline = time.monotonic() + 10
    while cleaner.totals.passes == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    cleaner.stop()
    assert cleaner.totals.passes >= 1 and cleaner.totals.failed == 0
    assert latest_per_key(read_all(log)) == latest_per_key(before)
    log.close()
