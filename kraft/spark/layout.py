"""What a Spark scan over kraft's on-disk files will read: directories, segments, snapshots,
and the file position each input partition starts at.

Runs on the driver while a query is planned, so it only lists directories and reads the
small ``.index`` files; it never opens a ``.log`` or ``.checkpoint`` (that is the executors'
job, in ``segment_reader``). Plain Python and picklable values: no pyspark import here, so
the planning can be tested without a JVM.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
from dataclasses import dataclass

import numpy as np

from kraft.log import files
from kraft.log.snapshot import list_snapshots, snapshot_filename

METADATA_DIR = "__cluster_metadata-0"
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_INDEX_DTYPE = np.dtype([("rel", ">i4"), ("pos", ">i4")])
#: Offsets are int64; "no upper bound".
NO_LIMIT = (1 << 63) - 1


@dataclass(frozen=True)
class FileSlice:
    """One input partition: a segment or snapshot file, read from ``position`` up to
    ``end_position`` (-1: the end of the file), rows with ``first_offset <= offset <
    end_offset`` kept. ``topic``/``partition``/``node`` label the rows; ``kind`` is
    ``"log"`` or ``"snapshot"``. Both positions are batch boundaries taken from the
    ``.index``: hints the reader checks (``segment_reader.scan_slice``)."""

    path: str
    kind: str
    position: int = 0
    first_offset: int = 0
    end_offset: int = NO_LIMIT
    topic: str = ""
    partition: int = 0
    node: str = ""
    end_position: int = -1
    first_piece: bool = True  # False for the pieces after a cut of a large segment


def expand_paths(path: str) -> list[str]:
    """``path`` may be one directory, a glob, or a comma-separated list of either; the
    directories found, sorted, without duplicates. A glob matching no directory is an error."""
    out: list[str] = []
    for part in (p.strip() for p in path.split(",")):
        if not part:
            continue
        # a glob's files (e.g. node-1.log beside node-1/) are not candidates; a named one is an error
        matches = sorted(m for m in glob.glob(part) if os.path.isdir(m)) if glob.has_magic(part) else [part]
        if not matches:
            raise FileNotFoundError(f"no directory matches {part!r}")
        for m in matches:
            if not os.path.isdir(m):
                raise FileNotFoundError(f"not a directory: {m!r}")
            if m not in out:
                out.append(m)
    if not out:
        raise FileNotFoundError("no path given")
    return out


def metadata_dir(directory: str) -> str:
    """A node's ``log.dirs`` directory holding ``__cluster_metadata-0``, or that directory itself."""
    inner = os.path.join(directory, METADATA_DIR)
    return inner if os.path.isdir(inner) else directory


def node_labels(directories: list[str], option: str | None) -> list[str]:
    """Labels for the ``node`` column: the ``node`` option (one label, or one per directory,
    comma-separated), else the name of the node's directory (the parent of
    ``__cluster_metadata-0``)."""
    if option:
        labels = [s.strip() for s in option.split(",")]
        if len(labels) == 1:
            return labels * len(directories)
        if len(labels) != len(directories):
            raise ValueError(f"option node has {len(labels)} labels for {len(directories)} directories")
        return labels
    out = []
    for d in directories:
        d = os.path.abspath(d)
        out.append(os.path.basename(os.path.dirname(d)) if os.path.basename(d) == METADATA_DIR
                   else os.path.basename(d))
    return out


def segment_bases(directory: str) -> list[int]:
    """Base offsets of the ``.log`` segments in ``directory``, ascending."""
    bases = []
    for name in os.listdir(directory):
        parsed = files.parse_segment_name(name)
        if parsed and parsed[1] == "log":
            bases.append(parsed[0])
    return sorted(bases)


def _index(directory: str, base: int):
    """``(relative offsets, positions)`` of a segment's ``.index`` as int64 arrays, or None
    when it is missing or not sane (an index is only ever a hint, as in the log itself)."""
    path = os.path.join(directory, files.segment_name(base, files.INDEX_SUFFIX))
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    entries = np.frombuffer(raw[: len(raw) - len(raw) % _INDEX_DTYPE.itemsize], _INDEX_DTYPE)
    rel, pos = entries["rel"].astype(np.int64), entries["pos"].astype(np.int64)
    if len(rel) and (np.any(np.diff(rel) <= 0) or np.any(np.diff(pos) <= 0) or rel[0] < 0 or pos[0] < 0):
        return None
    return rel, pos


def split_points(directory: str, base: int, start: int, size: int, max_bytes: int) -> list[int]:
    """Indexed batch positions cutting ``[start, size)`` of segment ``base`` into pieces of
    about ``max_bytes`` (none without a sane index, or when the rest is small enough)."""
    if size - start <= max_bytes:
        return []
    index = _index(directory, base)
    if index is None:
        return []
    cuts, last = [], start
    for pos in index[1].tolist():
        if pos >= last + max_bytes and pos < size:
            cuts.append(pos)
            last = pos
    return cuts


def index_position(directory: str, base: int, offset: int) -> int:
    """Where to start reading segment ``base`` for records at ``offset`` or later: the
    position of the last indexed batch whose last offset is below ``offset`` (no batch
    before it can hold ``offset``; the row filter drops that batch itself). 0 without a
    sane index: an index is only ever a hint, as in the log itself."""
    if offset <= base:
        return 0
    index = _index(directory, base)
    if index is None:
        return 0  # no sane index: scan from the start
    rel, pos = index
    i = int(np.searchsorted(rel, offset - base, side="left")) - 1
    return int(pos[i]) if i >= 0 else 0


def plan_segments(directory: str, first_offset: int = 0, end_offset: int = NO_LIMIT, max_bytes: int | None = None,
                  **labels) -> list[FileSlice]:
    """One slice per segment that can hold an offset in ``[first_offset, end_offset)``:
    segment ``i`` holds offsets in ``[base_i, base_{i+1})``, so the others are skipped
    without being opened; the first kept one starts at its index position. With
    ``max_bytes``, a larger segment is cut at indexed batch positions into slices of
    about that size (each reads whole batches of its byte range)."""
    bases = segment_bases(directory)
    out = []
    for i, base in enumerate(bases):
        upper = bases[i + 1] if i + 1 < len(bases) else NO_LIMIT
        if upper <= first_offset or base >= end_offset:
            continue
        path = os.path.join(directory, files.segment_name(base, files.LOG_SUFFIX))
        start = index_position(directory, base, first_offset)
        cuts = []
        if max_bytes:
            try:
                cuts = split_points(directory, base, start, os.path.getsize(path), max_bytes)
            except OSError:
                cuts = []
        bounds = [start] + cuts + [-1]
        out += [FileSlice(path, "log", lo, first_offset, end_offset, end_position=hi, first_piece=k == 0, **labels)
                for k, (lo, hi) in enumerate(itertools.pairwise(bounds))]
    return out


def slice_bytes(fs: FileSlice) -> int:
    """The bytes ``fs`` reads (0 if its file is gone: the executor will say so)."""
    if fs.end_position >= 0:
        return max(0, fs.end_position - fs.position)
    try:
        return max(0, os.path.getsize(fs.path) - fs.position)
    except OSError:
        return 0


def pack_slices(slices: list[FileSlice], max_bytes: int, open_cost: int, min_partitions: int = 1
                ) -> list[list[FileSlice]]:
    """Consecutive slices grouped into input partitions of at most about ``max_bytes``, each
    slice counted with ``open_cost`` more bytes (Spark's file sources: ``maxPartitionBytes``,
    ``openCostInBytes``). A Python data source pays tens of milliseconds per task, so many
    small segments are read by few tasks; but the target shrinks to ``total /
    min_partitions`` (never below ``open_cost``) so small inputs still use every core, as
    Spark's ``bytesPerCore`` does. The order is kept: a task reads neighbouring segments."""
    sizes = [slice_bytes(s) for s in slices]
    total = sum(sizes) + open_cost * len(slices)
    target = min(max_bytes, max(open_cost, total // max(1, min_partitions)))
    out: list[list[FileSlice]] = []
    current, used = [], 0
    for fs, size in zip(slices, sizes):
        if current and used + size > target:
            out.append(current)
            current, used = [], 0
        current.append(fs)
        used += size + open_cost
    if current:
        out.append(current)
    return out


def plan_metadata(directory: str, node: str, history: bool) -> list[FileSlice]:
    """The latest snapshot plus the log after it; with ``history`` every segment and no
    snapshot (the log from its start replays to the same state)."""
    mdir = metadata_dir(directory)
    labels = {"topic": METADATA_DIR.rsplit("-", 1)[0], "partition": 0, "node": node}
    snapshots = [] if history else list_snapshots(mdir)
    if not snapshots:
        return plan_segments(mdir, **labels)
    latest = snapshots[-1]
    snap = FileSlice(os.path.join(mdir, snapshot_filename(latest)), "snapshot", **labels)
    return [snap] + plan_segments(mdir, latest.offset, NO_LIMIT, **labels)


def partition_dirs(log_dir: str) -> list[tuple[str, int, str]]:
    """``(topic, partition, path)`` for every ``name-N`` directory under a ``log.dirs`` directory."""
    out = []
    for name in sorted(os.listdir(log_dir)):
        m = _PARTITION_DIR.match(name)
        path = os.path.join(log_dir, name)
        if m and os.path.isdir(path):
            out.append((m.group(1), int(m.group(2)), path))
    return out
