"""Decode throughput of the ``kraft-log`` Spark data source against its anchor, a pure-Python
data source reading the same segment files with kafka-python's record reader
(``kafka.record.MemoryRecords``) and yielding one tuple per record, in the same run.

    python bench/bench_spark_log.py [--gb 2] [--repeat 3] [--master local[2]] [--dir DIR]

Generated data: one partition ``bench-0`` of 1,000-record batches of 200-byte values and
16-byte keys (uncompressed, every tenth record with one header), rolled into 64 MiB
segments. Each query is ``SELECT count(*), sum(length(value)), sum(length(key))`` so every
record's key and value are materialised. Reported: rows/s and MB/s (segment bytes / s) per
source, medians over ``--repeat`` alternating runs, per executor core, the ratio to the
anchor, and the same two decoders in-process on one core without Spark. ``kraft-log`` is
measured twice: with its full schema (12 columns, headers included) and with the anchor's
6 columns (a user schema; Python sources get no column pruning from Spark). Wall-clock numbers belong here, never
in tests; run on an idle machine.
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
from kraft.spark.log_source import read_slice

RECORDS_PER_BATCH, VALUE_BYTES, KEY_BYTES = 1000, 200, 16


def generate(log_dir: str, gb: float) -> int:
    """Write ``bench-0`` until it holds ``gb`` GB; returns its size in bytes."""
    log = SegmentedLog.open(os.path.join(log_dir, "bench-0"),
                            LogConfig(segment_bytes=64 << 20, background_flush=False))
    values = [bytes([65 + i % 26]) * VALUE_BYTES for i in range(RECORDS_PER_BATCH)]
    keys = [f"key-{i:012d}".encode() for i in range(RECORDS_PER_BATCH)]
    headers = [(("trace", b"abc"),) if i % 10 == 0 else () for i in range(RECORDS_PER_BATCH)]
    batch = records.build_batch(values, keys=keys, headers=headers, timestamp=1_700_000_000_000)
    total, target = 0, int(gb * 1e9)
    try:
        while total < target:
            log.append(bytearray(batch), leader_epoch=1)
            total += len(batch)
        log.request_flush()
    finally:
        log.close()
    return total


class _Slices(InputPartition):
    pass


class KafkaPythonLogReader(DataSourceReader):
    """The anchor: same planning (one partition per segment), per-record decode in Python."""

    def __init__(self, options):
        self.path = options["path"]

    def partitions(self):
        slices = []
        for topic, partition, path in layout.partition_dirs(self.path):
            slices += [(s.path, topic, partition) for s in layout.plan_segments(path)]
        return [_Slices(s) for s in slices]

    def read(self, partition):
        from kafka.record import MemoryRecords

        path, topic, part = partition.value
        with open(path, "rb") as f:
            recs = MemoryRecords(f.read())
        while recs.has_next():
            batch = recs.next_batch()
            for r in batch:
                yield (topic, part, r.offset, r.timestamp, r.key, r.value)


class KafkaPythonLogSource(DataSource):
    @classmethod
    def name(cls):
        return "kafka-python-log"

    def schema(self):
        return "topic string, partition int, offset long, timestamp long, key binary, value binary"

    def reader(self, schema):
        return KafkaPythonLogReader(self.options)


#: The anchor's columns, for kraft-log read with the same (narrower) schema.
ANCHOR_COLUMNS = "topic string, partition int, offset long, timestamp long, key binary, value binary"
SOURCES = {"kraft-log": ("kraft-log", None), "kraft-log (anchor's 6 columns)": ("kraft-log", ANCHOR_COLUMNS),
           "kafka-python-log": ("kafka-python-log", None)}


def timed_query(spark, source: str, path: str):
    fmt, schema = SOURCES[source]
    reader = spark.read.format(fmt)
    df = (reader.schema(schema) if schema else reader).load(path)
    t0 = time.perf_counter()
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS v", "sum(length(key)) AS k").first()
    return time.perf_counter() - t0, row["n"], row["v"], row["k"]


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
        results = {name: [] for name in SOURCES}
        answers = {}
        timed_query(spark, "kraft-log", log_dir)  # warm the JVM and the Python workers
        for _ in range(args.repeat):
            for fmt, times in results.items():
                secs, n, v, k = timed_query(spark, fmt, log_dir)
                times.append(secs)
                answers.setdefault(fmt, (n, v, k))
        if len(set(answers.values())) != 1:
            print(f"MISMATCH: {answers}")
            return 1
        n = answers["kraft-log"][0]
        cores = spark.sparkContext.defaultParallelism
        print(f"Spark {spark.version} {args.master} ({cores} executor cores), {n} rows, {size / 1e6:.0f} MB, "
              f"{spark.read.format('kraft-log').load(log_dir).rdd.getNumPartitions()} input partitions, "
              f"median of {args.repeat}:")
        anchor = statistics.median(results["kafka-python-log"])
        for fmt, times in results.items():
            secs = statistics.median(times)
            print(f"  {fmt:31s} {secs:7.2f} s  {n / secs / 1e6:6.2f} M rows/s  {size / secs / 1e6:7.1f} MB/s"
                  f"  {size / secs / 1e6 / cores:6.1f} MB/s per core  x{anchor / secs:.1f} vs kafka-python"
                  f"  (runs: {', '.join(f'{t:.1f}' for t in times)} s)")
        spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
