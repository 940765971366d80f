"""Decode throughput of the ``kraft-log`` Spark data source against its anchor, a pure-Python
data source reading the same segment files with kafka-python's record reader
(``kafka.record.MemoryRecords``) and yielding one tuple per record, in the same run.

    python bench/bench_spark_log.py [--gb 2] [--repeat 3] [--master local[2]] [--dir DIR]

Generated data: one partition ``bench-0`` of 1,000-record batches of 200-byte values and
16-byte keys (uncompressed, every tenth record with one header, batch timestamps one second
apart over ten minutes), rolled into 64 MiB segments.

Fair by construction: both sources are planned the same way (kraft-log's plan: 64 MiB
segments packed into input partitions of up to ``maxPartitionBytes``), read the same files in the same Spark session (same configuration), give the
same schema and run the same query, and their answers must be equal. The query is the
traffic a ``kraft pipeline traffic`` user asks for: records and key/value bytes per topic,
partition and minute (``GROUP BY topic, partition, timestamp DIV 60000``), so every record's
key and value reach Spark. Each source is measured twice: with the full ``kraft-log``
schema (12 columns: headers, epochs, producer ids, codec names... all materialised by
Spark, which gives Python sources no column pruning) and with a user schema of the six
columns the query needs (``.schema(...)``, what a user who knows this does). Reported:
rows/s and MB/s (segment bytes / s) per source and schema, medians over ``--repeat``
alternating runs, per executor core, the ratio to the anchor with the same schema, and the
two decoders in-process on one core without Spark. Wall-clock numbers belong here, never in
tests; run on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from kraft import records
from kraft.log import LogConfig, SegmentedLog
from kraft.spark import layout
from kraft.spark.log_arrow import LOG_DDL
from kraft.spark.log_source import KraftLogReader, read_slice

RECORDS_PER_BATCH, VALUE_BYTES, KEY_BYTES = 1000, 200, 16


def generate(log_dir: str, gb: float) -> int:
    """Write ``bench-0`` until it holds ``gb`` GB; returns its size in bytes."""
    log = SegmentedLog.open(os.path.join(log_dir, "bench-0"),
                            LogConfig(segment_bytes=64 << 20, background_flush=False))
    values = [bytes([65 + i % 26]) * VALUE_BYTES for i in range(RECORDS_PER_BATCH)]
    keys = [f"key-{i:012d}".encode() for i in range(RECORDS_PER_BATCH)]
    headers = [(("trace", b"abc"),) if i % 10 == 0 else () for i in range(RECORDS_PER_BATCH)]
    batches = [records.build_batch(values, keys=keys, headers=headers, timestamp=1_700_000_000_000 + 1000 * s)
               for s in range(600)]
    total, target, i = 0, int(gb * 1e9), 0
    try:
        while total < target:
            batch = batches[i % len(batches)]
            log.append(bytearray(batch), leader_epoch=1)
            total += len(batch)
            i += 1
        log.request_flush()
    finally:
        log.close()
    return total


_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


class KafkaPythonLogReader(DataSourceReader):
    """The anchor: kraft-log's own plan (the same input partitions: segments packed or cut
    by ``maxPartitionBytes``), per-record decode in Python, one tuple per record holding the
    columns of the schema it was asked for."""

    def __init__(self, options, schema):
        self.options = dict(options)
        self.columns = [f.name for f in schema.fields]

    def partitions(self):
        return KraftLogReader(self.options).partitions()

    def read(self, partition):
        for fs in partition.value:
            yield from self._read_slice(fs)

    def _read_slice(self, fs):
        from kafka.record import MemoryRecords

        topic, part = fs.topic, fs.partition
        with open(fs.path, "rb") as f:
            f.seek(fs.position)
            recs = MemoryRecords(f.read() if fs.end_position < 0 else f.read(fs.end_position - fs.position))
        get = {
            "topic": lambda b, r: topic, "partition": lambda b, r: part, "offset": lambda b, r: r.offset,
            "timestamp": lambda b, r: r.timestamp, "timestamp_type": lambda b, r: b.timestamp_type,
            "key": lambda b, r: r.key, "value": lambda b, r: r.value, "headers": lambda b, r: r.headers,
            "leader_epoch": lambda b, r: b.leader_epoch, "producer_id": lambda b, r: b.producer_id,
            "compression": lambda b, r: _CODECS[b.compression_type], "error": lambda b, r: None,
        }
        getters = [get[c] for c in self.columns]
        while recs.has_next():
            batch = recs.next_batch()
            for r in batch:
                yield tuple(g(batch, r) for g in getters)


class KafkaPythonLogSource(DataSource):
    @classmethod
    def name(cls):
        return "kafka-python-log"

    def schema(self):
        return LOG_DDL

    def reader(self, schema):
        return KafkaPythonLogReader(self.options, schema)


class _Partition(InputPartition):
    pass


class _OneRowReader(DataSourceReader):
    def __init__(self, options):
        self.n = int(options["n"])

    def partitions(self):
        return [_Partition(i) for i in range(self.n)]

    def read(self, partition):
        import pyarrow as pa

        yield pa.RecordBatch.from_pydict({"x": [partition.value]}, schema=pa.schema([("x", pa.int64())]))


class OneRowSource(DataSource):
    """What a task of a Python data source costs: one row per input partition."""

    @classmethod
    def name(cls):
        return "one-row-per-task"

    def schema(self):
        return "x long"

    def reader(self, schema):
        return _OneRowReader(self.options)


def task_overhead(spark, cores: int, repeat: int = 3) -> float:
    """Core-seconds one more task of a Python data source costs (2 vs 32 one-row tasks)."""
    def run(n):
        t0 = time.perf_counter()
        spark.read.format("one-row-per-task").option("n", n).load().groupBy().sum("x").collect()
        return time.perf_counter() - t0
    run(2)
    few = statistics.median(run(2) for _ in range(repeat))
    many = statistics.median(run(32) for _ in range(repeat))
    return (many - few) * cores / 30


#: The six columns the query needs, as a user schema (both sources accept it).
QUERY_COLUMNS = "topic string, partition int, offset long, timestamp long, key binary, value binary"
SOURCES = {
    "kraft-log, full schema": ("kraft-log", None),
    "kafka-python-log, full schema": ("kafka-python-log", None),
    "kraft-log, 6 columns": ("kraft-log", QUERY_COLUMNS),
    "kafka-python-log, 6 columns": ("kafka-python-log", QUERY_COLUMNS),
}
QUERY = ("SELECT topic, partition, timestamp DIV 60000 AS minute, count(*) AS records, "
         "sum(length(key)) AS key_bytes, sum(length(value)) AS value_bytes "
         "FROM log GROUP BY topic, partition, timestamp DIV 60000")


def timed_query(spark, source: str, path: str):
    fmt, schema = SOURCES[source]
    reader = spark.read.format(fmt)
    (reader.schema(schema) if schema else reader).load(path).createOrReplaceTempView("log")
    t0 = time.perf_counter()
    rows = spark.sql(QUERY).collect()
    secs = time.perf_counter() - t0
    return secs, tuple(sorted(tuple(r) for r in rows))


def in_process(path: str) -> dict:
    """One core, no Spark: kraft-log's read_slice to Arrow vs kafka-python's loop."""
    from kafka.record import MemoryRecords

    out = {}
    fs = layout.plan_segments(os.path.join(path, "bench-0"), topic="bench", partition=0)[0]
    t0 = time.perf_counter()
    n = sum(b.num_rows for b in read_slice(fs, "FAILFAST"))
    out["kraft"] = (time.perf_counter() - t0, n, os.path.getsize(fs.path))
    t0 = time.perf_counter()
    with open(fs.path, "rb") as f:
        recs = MemoryRecords(f.read())
    m = 0
    while recs.has_next():
        for r in recs.next_batch():
            _ = (r.offset, r.timestamp, r.key, r.value)
            m += 1
    out["kafka-python"] = (time.perf_counter() - t0, m, os.path.getsize(fs.path))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=2.0, help="data to generate, GB (default 2)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir, removed after)")
    args = ap.parse_args()

    import kraft.spark

    base = tempfile.mkdtemp(prefix="bench-spark-", dir=args.dir)
    try:
        log_dir = os.path.join(base, "node")
        t0 = time.perf_counter()
        size = generate(log_dir, args.gb)
        print(f"generated {size / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s under {log_dir}")
        for name, (secs, n, nbytes) in in_process(log_dir).items():
            print(f"in-process, one segment, one core: {name:13s} {n / secs / 1e6:6.2f} M rows/s "
                  f"{nbytes / secs / 1e6:7.1f} MB/s")

        spark = kraft.spark.local_session(args.master, "bench-spark-log",
                                          {"spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(KafkaPythonLogSource)
        spark.dataSource.register(OneRowSource)
        results = {name: [] for name in SOURCES}
        answers = {}
        timed_query(spark, "kraft-log, full schema", log_dir)  # warm the JVM and the Python workers
        for _ in range(args.repeat):
            for fmt, times in results.items():
                secs, answer = timed_query(spark, fmt, log_dir)
                times.append(secs)
                answers.setdefault(fmt, answer)
        if len(set(answers.values())) != 1:
            print(f"MISMATCH: {answers}")
            return 1
        n = sum(r[3] for r in answers["kraft-log, full schema"])
        cores = spark.sparkContext.defaultParallelism
        print(f"Spark {spark.version} {args.master} ({cores} executor cores), {n} rows, {size / 1e6:.0f} MB, "
              f"{spark.read.format('kraft-log').load(log_dir).rdd.getNumPartitions()} input partitions, "
              f"{len(answers['kraft-log, full schema'])} (topic, partition, minute) groups, median of {args.repeat}:")
        print(f"  one task of a Python data source costs {task_overhead(spark, cores) * 1e3:.0f} ms of a core "
              f"(one-row tasks, 32 against 2)")
        for fmt, times in results.items():
            secs = statistics.median(times)
            anchor = statistics.median(results[fmt.replace("kraft-log", "kafka-python-log")])
            print(f"  {fmt:30s} {secs:7.2f} s  {n / secs / 1e6:6.2f} M rows/s  {size / secs / 1e6:7.1f} MB/s"
                  f"  {size / secs / 1e6 / cores:6.1f} MB/s per core  x{anchor / secs:.1f} vs kafka-python"
                  f"  (runs: {', '.join(f'{t:.1f}' for t in times)} s)")
        spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
