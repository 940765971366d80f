"""Retention of the metadata log below its snapshots (Kafka's KafkaMetadataLog.maybeClean):
segments below the latest snapshot go only when beyond metadata.max.retention.bytes or
metadata.max.retention.ms; the newest snapshot is always kept."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "server"))
from log_port_helpers import close_log, lead  # noqa: E402

from kraft.log import LogConfig  # noqa: E402
from kraft.log.retention import MetadataRetention  # noqa: E402
from kraft.types import OffsetAndEpoch  # noqa: E402
from kraft.raft.snapshot import SnapshotWriter  # noqa: E402
from kraft.log.replicated_log import MetadataLog  # noqa: E402

DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def open_log(tmp_path):
    opened = []

    def factory(retention, clock_ms=None):
        log = MetadataLog(str(tmp_path / "m"), LogConfig(background_flush=False, segment_bytes=256),
                          retention=retention, clock_ms=clock_ms)
        opened.append(log)
        return log
    yield factory
    for log in opened:
        close_log(log)


def _snapshot(log, offset: int, timestamp_ms: int) -> OffsetAndEpoch:
    sid = OffsetAndEpoch(offset, 1)
    w = SnapshotWriter(log.create_snapshot(sid), timestamp_ms, timestamp_ms, lambda s: None)
    w.append([b"state"])
    w.freeze()
    return sid


def _three_snapshots(log, stamps=(-1, -1, -1)):
    """Epoch-1 batches over many 256-byte segments, snapshots at 12, 24 and 36 whose last
    contained records have the given timestamps."""
    lead(log, 1, n=4, batches=12)
    log.update_high_watermark(log.end_offset())
    return [_snapshot(log, off, ts) for off, ts in zip((12, 24, 36), stamps)]


def test_within_the_default_retention_nothing_below_the_latest_snapshot_is_deleted(open_log):
    """Before: the core's delete_before_snapshot after each snapshot deleted the log at once."""
    log = open_log(MetadataRetention())  # 100 MiB, 7 days
    sids = _three_snapshots(log)
    segments_before = len(log.log.segments)
    assert log.delete_before_snapshot(sids[-1]) is False
    assert log.start_offset() == 0 and len(log.log.segments) == segments_before
    assert log.snapshot_ids() == sids


def test_beyond_retention_bytes_snapshots_and_segments_go_oldest_first_keeping_the_newest(open_log):
    log = open_log(MetadataRetention(max_bytes=1, max_ms=-1))
    sids = _three_snapshots(log)
    assert log.delete_before_snapshot(sids[-1]) is True
    assert log.snapshot_ids() == [sids[-1]]  # never the newest one
    assert 0 < log.start_offset() <= 36 and log.log.segments[0].base_offset <= 36


def test_retention_bytes_stops_as_soon_as_the_log_fits(open_log):
    log = open_log(MetadataRetention(max_bytes=-1, max_ms=-1))
    sids = _three_snapshots(log)
    seg_bytes = log.log.size_bytes
    snap_bytes = sum(log._snapshot_size(s) for s in sids)
    # room for everything but a few bytes: dropping the first snapshot (and the segments
    # below the second) is enough, the second pair stays
    log.retention = MetadataRetention(max_bytes=seg_bytes + snap_bytes - 1, max_ms=-1)
    assert log.maybe_clean() is True
    assert log.snapshot_ids() == sids[1:]
    assert log.start_offset() == 24 or log.log.segments[0].base_offset <= 24


def test_beyond_retention_ms_by_the_snapshots_timestamp(open_log):
    now = [0]
    log = open_log(MetadataRetention(max_bytes=-1, max_ms=7 * DAY_MS), clock_ms=lambda: now[0])
    sids = _three_snapshots(log, stamps=(1_000, 2_000, 3_000))
    now[0] = 1_000 + 7 * DAY_MS  # the oldest is exactly 7 days old: kept
    assert log.maybe_clean() is False and log.snapshot_ids() == sids
    now[0] = 2_000 + 7 * DAY_MS  # the oldest is beyond, the second is not
    assert log.maybe_clean() is True and log.snapshot_ids() == sids[1:]
    now[0] = 10 * DAY_MS  # all beyond: the newest stays anyway
    assert log.maybe_clean() is True and log.snapshot_ids() == [sids[-1]]


def test_a_snapshot_without_a_timestamp_is_never_old_by_time(open_log):
    log = open_log(MetadataRetention(max_bytes=-1, max_ms=0), clock_ms=lambda: 10 * DAY_MS)
    sids = _three_snapshots(log)
    assert log.maybe_clean() is False and log.snapshot_ids() == sids


def test_without_retention_the_port_contract_deletes_at_once(open_log):
    """The simulator's contract (InMemoryLog) is unchanged when no retention is configured."""
    log = open_log(None)
    sids = _three_snapshots(log)
    assert log.delete_before_snapshot(sids[-1]) is True
    assert log.snapshot_ids() == [sids[-1]] and log.start_offset() == 36


def test_the_node_passes_its_retention_settings_to_the_log(tmp_path):
    from ops_helpers import CLUSTER, write_config

    from kraft.config import NodeConfig
    from kraft.log.formatting import format_storage
    from kraft.server import eventloop
    from kraft.server.node import KraftNode

    cfg = NodeConfig.from_file(write_config(tmp_path, port=0, **{"metadata.max.retention.bytes": "12345",
                                                                  "metadata.max.retention.ms": "-1"}))
    format_storage(cfg, CLUSTER)

    async def run():
        node = KraftNode(cfg)
        await node.start()
        try:
            return node.log.retention
        finally:
            await node.shutdown(resign_wait_s=0)
    assert eventloop.run(run()) == MetadataRetention(max_bytes=12345, max_ms=-1)
