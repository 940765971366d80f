"""Read a metadata log directory offline into a ``MetadataImage``: the latest complete snapshot,
then the log segments' records after it (Kafka's loader order), or one snapshot file alone.

Read-only like ``dump-log``: no lock, no repair; the log is read up to its first invalid or
torn batch (what recovery would keep). Everything in the log is replayed, committed or not:
offline there is no high watermark to stop at. Used by ``kraft metadata-shell`` and the
snapshot benchmark; the running node loads through its Raft log instead.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from kraft import records
from kraft.log import files
from kraft.log.snapshot import SnapshotFileReader, latest_snapshot, parse_snapshot_name
from kraft.metadata.snapshot_image import LoadedImage, load_image
from kraft.types import SnapshotId

METADATA_PARTITION_DIR = "__cluster_metadata-0"


class LoadedDirectory(NamedTuple):
    directory: str
    snapshot_id: SnapshotId | None
    segments: list  # paths of the .log files read
    loaded: LoadedImage
    log_error: str | None  # why reading the log stopped early, if it did
    # (batches, records) skipped because they are not metadata records (e.g. `kraft produce`)
    skipped: tuple[int, int] = (0, 0)


def metadata_log_dir(path: str) -> str:
    """``path`` itself, or its ``__cluster_metadata-0`` child when given a node's log dir."""
    child = os.path.join(path, METADATA_PARTITION_DIR)
    if not os.path.isdir(path):
        raise FileNotFoundError(2, "no such directory", path)
    names = os.listdir(path)
    has_own = any(parse_snapshot_name(n) or files.parse_segment_name(n) for n in names)
    return child if not has_own and os.path.isdir(child) else path


def _segments(directory: str) -> list[tuple[int, str]]:
    out = []
    for name in os.listdir(directory):
        parsed = files.parse_segment_name(name)
        if parsed and parsed[1] == "log":
            out.append((parsed[0], os.path.join(directory, name)))
    return sorted(out)


# Every metadata record's value starts with its frame version, 1, as an unsigned varint.
METADATA_FRAME_BYTE = 1


def is_metadata_batch(batch) -> bool:
    """A data batch whose first value is framed as a metadata record. ``kraft produce`` writes
    whole batches of its own values into ``__cluster_metadata``, so a batch is judged by its
    first record; a control batch (leader change, voters) is part of the log's own story."""
    if batch.is_control:
        return True
    for record in batch:
        value = record.value
        return value is not None and len(value) > 0 and value[0] == METADATA_FRAME_BYTE
    return True


def _log_batches(paths: list[str], errors: list[str], skipped: list[int] | None = None):
    """The log's batches in order; those that are not metadata are counted in ``skipped``
    ([batches, records]) and left out, so one stray writer cannot hide the whole log."""
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        scan = records.scan_batches(data)
        for position in scan.positions.tolist():
            batch = records.RecordBatch(data, position)
            if skipped is not None and not is_metadata_batch(batch):
                skipped[0] += 1
                skipped[1] += batch.records_count
                continue
            yield batch
        if scan.error is not None:
            errors.append(f"{os.path.basename(path)}: {scan.error} at position {scan.valid_end}")
            return  # what follows a bad batch is not the log


def load_directory(path: str, *, codec=None) -> LoadedDirectory:
    directory = metadata_log_dir(path)
    sid = latest_snapshot(directory)
    start = sid.offset if sid is not None else 0
    segments = _segments(directory)
    # Segments wholly below the snapshot are skipped without reading them.
    paths = [p for i, (base, p) in enumerate(segments)
             if i + 1 >= len(segments) or segments[i + 1][0] > start]
    errors: list[str] = []
    skipped = [0, 0]
    if sid is None:
        loaded = load_image((), _log_batches(paths, errors, skipped), start_offset=0, codec=codec)
    else:
        with SnapshotFileReader(directory, sid) as reader:
            loaded = load_image(reader.batches(), _log_batches(paths, errors, skipped), start_offset=start,
                                codec=codec)
    return LoadedDirectory(directory, sid, paths, loaded, errors[0] if errors else None, tuple(skipped))


def load_snapshot_file(path: str, *, codec=None) -> LoadedDirectory:
    """One ``<offset>-<epoch>.checkpoint`` file alone (Kafka's ``--snapshot``)."""
    parsed = parse_snapshot_name(os.path.basename(path))
    if parsed is None or parsed[1] != ".checkpoint":
        raise ValueError(f"not a snapshot file name: {path}")
    directory, sid = os.path.dirname(os.path.abspath(path)), parsed[0]
    with SnapshotFileReader(directory, sid) as reader:
        loaded = load_image(reader.batches(), start_offset=sid.offset, codec=codec)
    return LoadedDirectory(directory, sid, [], loaded, None)
