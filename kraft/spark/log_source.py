"""``spark.read.format("kraft-log").load(LOG_DIRS_DIR)``: the records of every partition log
(``name-N/`` with Kafka segment files) under a ``log.dirs`` directory, one row per record.

Planning (driver) lists directories and turns the pushed-down filters (PySpark >= 4.1's
``pushFilters``) or the options ``topic``, ``partition``, ``start_offset``, ``end_offset``
into segment slices: segments that cannot hold a wanted offset are never planned, and the
first kept segment starts at its ``.index`` position. As in Spark's file sources
(``spark.sql.files.maxPartitionBytes``, ``openCostInBytes``), a segment larger than option
``maxPartitionBytes`` is cut at indexed batch positions, and consecutive small segments are
packed into one input partition up to that size, each counted with option
``openCostInBytes`` (4 MiB) more, keeping at least option ``minPartitions`` (default: the
driver's CPU count) while there is data for them. The default, 256 MiB, is twice Spark's:
every task of a Python data source costs about 60 ms of a core (PySpark 4.3), so with one
64 MiB segment per task a fifth of a query went to task overhead. Every pushed filter is
still handed back to Spark, so pruning only has to be safe, never exact. Executors decode
with the native codec (``records.log_columns``, whole chunks of batches into Arrow buffers)
and yield Arrow batches. Option ``mode``: PERMISSIVE (default; a damaged segment ends in a
row whose ``error`` is set) or FAILFAST (raise).
"""

from __future__ import annotations

import os

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kraft import records
from kraft.errors import CorruptRecordError
from kraft.spark import layout
from kraft.spark.layout import NO_LIMIT
from kraft.spark.log_arrow import (
    LOG_DDL,
    LOG_SCHEMA,
    MAX_BYTES,
    columns_to_arrow,
    error_batch,
)
from kraft.spark.segment_reader import CorruptSliceError, iter_chunks

try:  # PySpark >= 4.1
    from pyspark.sql.datasource import (
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
    )
except ImportError:  # pragma: no cover - PySpark 4.0: options only
    EqualTo = GreaterThan = GreaterThanOrEqual = In = LessThan = LessThanOrEqual = None


#: Options ``maxPartitionBytes`` / ``openCostInBytes`` (Spark's file-source knobs): a segment
#: larger than the first is read by several tasks, cut at indexed batch positions; smaller
#: ones are packed together up to it. Twice Spark's 128 MiB: see the module docstring.
DEFAULT_SPLIT_BYTES = 256 << 20
DEFAULT_OPEN_COST = 4 << 20


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
        self.max_bytes = int(options.get("maxPartitionBytes", DEFAULT_SPLIT_BYTES))
        self.open_cost = int(options.get("openCostInBytes", DEFAULT_OPEN_COST))
        self.min_partitions = int(options.get("minPartitions", os.cpu_count() or 1))
        if self.max_bytes < 1 or self.open_cost < 0 or self.min_partitions < 1:
            raise ValueError("options maxPartitionBytes and minPartitions must be positive, openCostInBytes >= 0")

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
                    out += layout.plan_segments(path, self.first, self.end, self.max_bytes, topic=topic,
                                                partition=partition)
        return out


def projected(schema) -> tuple | None:
    """The columns of a user-given schema (``.schema("offset long, value binary")``, any
    subset of ``LOG_DDL``'s columns with their types), or None for all of them: fewer
    columns cost less to hand to the JVM (no column pruning reaches Python sources)."""
    if schema is None:
        return None
    names = tuple(f.name for f in schema.fields)
    if names == tuple(LOG_SCHEMA.names):
        return None
    from pyspark.sql.pandas.types import to_arrow_schema

    wanted = to_arrow_schema(schema)
    for field in wanted:
        if field.name not in LOG_SCHEMA.names or LOG_SCHEMA.field(field.name).type != field.type:
            raise ValueError(f"kraft-log has no column {field.name} {field.type} (its columns: {LOG_DDL})")
    return names


class KraftLogReader(DataSourceReader):
    def __init__(self, options, columns: tuple | None = None):
        self.directories = layout.expand_paths(options.get("path", ""))
        self.mode = read_mode(options)
        self.scan = LogScan(options)
        self.columns = columns

    def pushFilters(self, filters):
        for f in filters:
            self.scan.narrow(f)
            yield f  # Spark still evaluates every filter: pruning is by whole segments

    def partitions(self):
        scan = self.scan
        return [SlicePartition(group) for group in
                layout.pack_slices(scan.plan(self.directories), scan.max_bytes, scan.open_cost, scan.min_partitions)]

    def read(self, partition):
        for fs in partition.value:
            for batch in read_slice(fs, self.mode):
                yield batch if self.columns is None else batch.select(self.columns)


def read_slice(fs, mode: str):
    """Arrow batches of one segment slice (the executors' work): whole-batch chunks decoded
    into columns by the native codec. A record that does not decode inside a CRC-valid
    batch ends the slice like a bad batch does (that batch is found by decoding the
    chunk's batches one by one, which only ever happens on damaged data)."""
    try:
        for buf, positions, shift in iter_chunks(fs, MAX_BYTES):
            try:
                yield _arrow(fs, buf, positions)
            except (CorruptRecordError, ValueError):
                yield from _until_bad_batch(fs, buf, positions, shift)
    except CorruptSliceError as exc:
        if mode == "FAILFAST":
            raise
        yield error_batch(fs.topic, fs.partition, exc.last_good_offset + 1, str(exc))


def _arrow(fs, buf, positions):
    return columns_to_arrow(fs.topic, fs.partition, records.log_columns(buf, positions, fs.first_offset,
                                                                         fs.end_offset))


def _until_bad_batch(fs, buf, positions, shift):
    last_good = fs.first_offset - 1
    for i in range(len(positions)):
        one = positions[i:i + 1]
        try:
            out = _arrow(fs, buf, one)
        except (CorruptRecordError, ValueError) as exc:
            raise CorruptSliceError(fs.path, shift + int(one[0]), last_good, str(exc)) from exc
        if out.num_rows:
            yield out
        last_good = max(last_good, records.RecordBatch(buf, int(one[0])).last_offset)
    raise AssertionError("the chunk failed to decode but each of its batches decoded")


class KraftLogDataSource(DataSource):
    @classmethod
    def name(cls):
        return "kraft-log"

    def schema(self):
        return LOG_DDL

    def reader(self, schema):
        return KraftLogReader(self.options, projected(schema))

    def streamReader(self, schema):
        from kraft.spark.stream_source import LogStreamReader

        return LogStreamReader(self.options)
