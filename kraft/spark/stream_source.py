"""Structured Streaming over live log directories: ``spark.readStream.format("kraft-log")``
and ``spark.readStream.format("kraft-metadata")`` tail the logs a node is writing.

A source offset is a JSON object mapping each log directory (its absolute path: a
partition's ``topic-N`` directory for ``kraft-log``, a node's ``__cluster_metadata-0`` for
``kraft-metadata``) to the next log offset to read. A micro-batch ``[start, end)`` is planned
exactly like a batch scan of those offset ranges (``layout.plan_segments``), so replaying it
after a restart reads the same records: with a checkpoint, a file sink's output is
exactly-once. ``latestOffset`` counts only whole CRC-valid batches (``log_tail``), so a
batch the node is still writing waits for the next trigger.

Options: ``startingOffsets`` ``earliest`` (default) or ``latest``; ``kraft-log`` also takes
``topic`` and ``partition`` (comma lists), ``kraft-metadata`` takes ``node`` labels. The
metadata stream reads log segments only (no snapshots: a tail follows appends). A directory
that appears later (a new partition) is read from its first offset. A log truncated below
an offset already read (an uncommitted tail a Raft follower drops) is not re-read: offsets
only move forward.
"""

from __future__ import annotations

import os

from pyspark.sql.datasource import DataSourceStreamReader

from kraft.spark import layout
from kraft.spark.log_source import LogScan, SlicePartition, read_mode, read_slice
from kraft.spark.log_tail import LogTail
from kraft.spark.metadata_source import read_metadata_slice


class _TailingReader(DataSourceStreamReader):
    """Offsets per directory; subclasses say which directories and how a slice is read."""

    def __init__(self, options):
        self.options = options
        self.mode = read_mode(options)
        starting = str(options.get("startingOffsets", "earliest")).lower()
        if starting not in ("earliest", "latest"):
            raise ValueError(f"option startingOffsets must be earliest or latest, got {starting!r}")
        self.starting = starting
        self.tail = LogTail()
        self.split_bytes = None  # cut segments larger than this (kraft-log's maxPartitionBytes)

    def directories(self) -> dict[str, dict]:
        """Absolute log directory -> the labels its slices carry (topic, partition, node)."""
        raise NotImplementedError

    def initialOffset(self) -> dict:
        out = {}
        for d in self.directories():
            offset = self.tail.end_offset(d) if self.starting == "latest" else self.tail.start_offset(d)
            if offset is not None:
                out[d] = offset
        return out

    def latestOffset(self, start=None, limit=None) -> dict:
        out = dict(start or {})
        for d in self.directories():
            end = self.tail.end_offset(d)
            if end is not None:
                out[d] = max(end, out.get(d, end))  # never backwards (see the module doc)
        return out

    def partitions(self, start: dict, end: dict):
        labels = self.directories()
        out = []
        for d, stop in sorted(end.items()):
            first = start.get(d)
            if first is None:
                first = self.tail.start_offset(d) or 0
            if first < stop and os.path.isdir(d):
                out += layout.plan_segments(d, first, stop, self.split_bytes, **labels.get(d, self.labels_of(d)))
        return [SlicePartition([s]) for s in out]

    def labels_of(self, directory: str) -> dict:
        """Labels of a directory no longer listed (e.g. a topic deleted since): from its name."""
        name = os.path.basename(directory)
        topic, _, partition = name.rpartition("-")
        return {"topic": topic, "partition": int(partition) if partition.isdigit() else 0, "node": ""}

    def commit(self, end: dict) -> None:
        pass  # nothing to release: the files are the node's, read-only here


class LogStreamReader(_TailingReader):
    def __init__(self, options):
        super().__init__(options)
        self.roots = layout.expand_paths(options.get("path", ""))
        self.scan = LogScan(options)
        self.split_bytes = self.scan.max_bytes

    def directories(self):
        out = {}
        for root in self.roots:
            for topic, partition, path in layout.partition_dirs(root):
                if self.scan.topics is not None and topic not in self.scan.topics:
                    continue
                if self.scan.partitions is not None and partition not in self.scan.partitions:
                    continue
                out[os.path.abspath(path)] = {"topic": topic, "partition": partition}
        return out

    def read(self, partition):
        for fs in partition.value:
            yield from read_slice(fs, self.mode)


class MetadataStreamReader(_TailingReader):
    def __init__(self, options):
        super().__init__(options)
        self.roots = layout.expand_paths(options.get("path", ""))
        self.nodes = layout.node_labels(self.roots, options.get("node"))

    def directories(self):
        topic = layout.METADATA_DIR.rsplit("-", 1)[0]
        return {os.path.abspath(layout.metadata_dir(root)): {"topic": topic, "partition": 0, "node": node}
                for root, node in zip(self.roots, self.nodes)}

    def read(self, partition):
        for fs in partition.value:
            yield from read_metadata_slice(fs, self.mode == "FAILFAST")
