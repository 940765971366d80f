"""Shared by the log-port contract tests: building batches and snapshots, and an observable
summary of a log so "the log is unchanged" and "both implementations agree" are one ``==``."""

from __future__ import annotations

from kraft.log import LogConfig
from kraft.types import OffsetAndEpoch
from kraft.raft.snapshot import SnapshotWriter
from kraft.records import build_batch, iter_batches
from kraft.log.replicated_log import MetadataLog
from kraft.testing import InMemoryLog

IMPLS = ("memory", "disk", "disk-small-segments")


def open_log(impl: str, directory, **config):
    if impl == "memory":
        return InMemoryLog()
    if impl == "disk-small-segments":
        config.setdefault("segment_bytes", 256)  # a roll every few batches
    return MetadataLog(str(directory), LogConfig(background_flush=False, **config))


def close_log(log) -> None:
    if isinstance(log, MetadataLog) and not log.log.closed:
        log.close()


def batch(n: int, epoch: int, base: int = 0, tag: str = "v") -> bytes:
    return build_batch([f"{tag}{base + i}".encode() for i in range(n)], base_offset=base,
                       partition_leader_epoch=epoch, timestamp=0)


def lead(log, epoch: int, n: int = 3, batches: int = 1) -> tuple[int, int]:
    """append_as_leader ``batches`` batches of ``n`` records at ``epoch``; returns (first, last)."""
    first = last = None
    for _ in range(batches):
        f, last = log.append_as_leader(batch(n, epoch), epoch)
        first = f if first is None else first
    return first, last


def write_snapshot(log, offset: int, epoch: int, values=(b"state",)) -> OffsetAndEpoch:
    """A well-formed snapshot (header, one data batch, footer) through the port's raw writer."""
    sid = OffsetAndEpoch(offset, epoch)
    raw = log.create_snapshot(sid)
    assert raw is not None, f"snapshot {sid} already exists"
    w = SnapshotWriter(raw, -1, 0, lambda s: None)
    w.append(list(values))
    w.freeze()
    return sid


def read_all(log) -> list[tuple[int, int, int, bytes]]:
    """(base, last, epoch, raw) of every batch from start to end, through ``read``."""
    out, pos = [], log.start_offset()
    while pos < log.end_offset():
        data = log.read(pos, 1 << 20)
        assert data, f"read({pos}) returned nothing below the end offset {log.end_offset()}"
        for b in iter_batches(data):
            if b.next_offset > pos:
                out.append((b.base_offset, b.last_offset, b.partition_leader_epoch, b.tobytes()))
                pos = b.next_offset
    return out


def oe(x: OffsetAndEpoch) -> tuple[int, int]:
    return (x.offset, x.epoch)


def summary(log, epochs=range(-1, 12)) -> dict:
    return {
        "start": log.start_offset(),
        "end": log.end_offset(),
        "last_fetched_epoch": log.last_fetched_epoch(),
        "batches": [b[:3] for b in read_all(log)],
        "end_offset_for_epoch": {e: oe(log.end_offset_for_epoch(e)) for e in epochs},
        "snapshots": (log.earliest_snapshot_id(), log.latest_snapshot_id()),
    }
