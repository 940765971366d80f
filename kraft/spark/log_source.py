"""``spark.read.format("kraft-log").load(LOG_DIRS_DIR)``: the records of every partition log
(``name-N/`` with Kafka segment files) under a ``log.dirs`` directory, one row per record.

Planning (driver) lists directories and turns the pushed-down filters (PySpark >= 4.1's
``pushFilters``) or the options ``topic``, ``partition``, ``start_offset``, ``end_offset``
into segment slices: segments that cannot hold a wanted offset are never planned, and the
first kept segment starts at its ``.index`` position. Every pushed filter is still handed
back to Spark, so pruning only has to be safe, never exact. Executors decode with the
native codec and yield Arrow batches. Option ``mode``: PERMISSIVE (default; a damaged
segment ends in a row whose ``error`` is set) or FAILFAST (raise).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kraft.spark import layout
from kraft.spark.layout import NO_LIMIT
from kraft.spark.log_arrow import LOG_DDL, LogBatchAssembler, error_batch
from kraft.spark.segment_reader import CorruptSliceError, iter_decoded

try:  # PySpark >= 4.1
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual
except ImportError:  # pragma: no cover - PySpark 4.0: options only
    EqualTo = GreaterThan = GreaterThanOrEqual = In = LessThan = LessThanOrEqual = None


class SlicePartition(InputPartition):
    def __init__(self, slices):
        super().__init__(tuple(slices))


def read_mode(options) -> str:
    mode = str(options.get("mode", "PERMISSIVE")).upper()
    if mode not in ("PERMISSIVE", "FAILFAST"):
        raise ValueError(f"option mode must be PERMISSIVE or FAILFAST, got {mode!r}")
    return mode


class LogScan:
    """What to read: topic and partition sets (None: all) and an offset range. Narrowed by
    options and filters; ``plan()`` gives the slices."""

    def __init__(self, options):
        self.topics = None if "topic" not in options else {s.strip() for s in options["topic"].split(",")}
        self.partitions = (None if "partition" not in options
                           else {int(s) for s in options["partition"].split(",")})
        self.first = int(options.get("start_offset", 0))
        self.end = int(options.get("end_offset", NO_LIMIT))

    def narrow(self, f) -> None:
        """Apply one pushed filter if it is one we prune by (silently ignore the rest)."""
        col = f.attribute[0] if len(f.attribute) == 1 else None
        if not hasattr(f, "value"):  # IsNull, IsNotNull, Not...: nothing to prune by
            return
        if col == "topic" and isinstance(f, EqualTo) and isinstance(f.value, str):
            self.topics = {f.value} if self.topics is None else self.topics & {f.value}
        elif col == "topic" and isinstance(f, In) and all(isinstance(v, str) for v in f.value):
            self.topics = set(f.value) if self.topics is None else self.topics & set(f.value)
        elif col == "partition" and isinstance(f, EqualTo) and isinstance(f.value, int):
            self.partitions = {f.value} if self.partitions is None else self.partitions & {f.value}
        elif col == "partition" and isinstance(f, In) and all(isinstance(v, int) for v in f.value):
            self.partitions = set(f.value) if self.partitions is None else self.partitions & set(f.value)
        elif col == "offset" and isinstance(f.value, int) and not isinstance(f.value, bool):
            v = f.value
            lo, hi = {EqualTo: (v, v + 1), GreaterThan: (v + 1, NO_LIMIT), GreaterThanOrEqual: (v, NO_LIMIT),
                      LessThan: (0, v), LessThanOrEqual: (0, v + 1)}.get(type(f), (0, NO_LIMIT))
            self.first, self.end = max(self.first, lo), min(self.end, hi)

    def plan(self, directories) -> list:
        out = []
        for d in directories:
            for topic, partition, path in layout.partition_dirs(d):
                if self.topics is not None and topic not in self.topics:
                    continue
                if self.partitions is not None and partition not in self.partitions:
                    continue
                if self.first < self.end:
                    out += layout.plan_segments(path, self.first, self.end, topic=topic, partition=partition)
        return out


class KraftLogReader(DataSourceReader):
    def __init__(self, options):
        self.directories = layout.expand_paths(options.get("path", ""))
        self.mode = read_mode(options)
        self.scan = LogScan(options)

    def pushFilters(self, filters):
        for f in filters:
            self.scan.narrow(f)
            yield f  # Spark still evaluates every filter: pruning is by whole segments

    def partitions(self):
        return [SlicePartition([s]) for s in self.scan.plan(self.directories)]

    def read(self, partition):
        for fs in partition.value:
            yield from read_slice(fs, self.mode)


def read_slice(fs, mode: str):
    """Arrow batches of one segment slice (the executors' work)."""
    out = LogBatchAssembler(fs.topic, fs.partition, fs.first_offset, fs.end_offset)
    try:
        for batch, decoded in iter_decoded(fs):
            out.add(batch, decoded)
            if out.full:
                yield out.take()
    except CorruptSliceError as exc:
        if mode == "FAILFAST":
            raise
        rest = out.take()
        if rest is not None:
            yield rest
        yield error_batch(fs.topic, fs.partition, exc.last_good_offset + 1, str(exc))
        return
    rest = out.take()
    if rest is not None:
        yield rest


class KraftLogDataSource(DataSource):
    @classmethod
    def name(cls):
        return "kraft-log"

    def schema(self):
        return LOG_DDL

    def reader(self, schema):
        return KraftLogReader(self.options)

    def streamReader(self, schema):
        from kraft.spark.stream_source import LogStreamReader

        return LogStreamReader(self.options)
