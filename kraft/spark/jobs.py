"""The two pipeline jobs behind ``kraft pipeline audit`` and ``kraft pipeline traffic``:
read, write each table as Parquet under ``out/``, print progress, write ``report.html``.

A job takes a SparkSession (local or a cluster: nothing here assumes one machine beyond
``out`` being a path every executor and the driver can write, as for any Spark job) and
``say``, a progress printer. Only small aggregates are collected to the driver.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kraft.spark import audit, traffic
from kraft.spark.report import Plot, Report, Table

#: At most this many time buckets in a plot.
PLOT_BUCKETS = 120


@dataclass
class AuditResult:
    nodes: list  # (node, first_offset, last_offset, records, errors)
    hw: int | None
    divergent: int
    divergent_at_or_below_hw: int
    tables: dict  # name -> rows written


def _write(df: DataFrame, out: str, name: str, say, step: str) -> int:
    t0 = time.monotonic()
    path = os.path.join(out, name)
    df.write.mode("overwrite").parquet(path)
    n = df.sparkSession.read.parquet(path).count()
    say(f"{step} {name}: {n} rows -> {path} ({time.monotonic() - t0:.1f} s)")
    return n


def _series(df: DataFrame, ts: str, value, group: str | None = None, agg: str = "sum") -> dict:
    """``{group: [(bucket_ms, value)]}`` over at most PLOT_BUCKETS equal time buckets."""
    lo, hi = df.agg(F.min(ts), F.max(ts)).first()
    if lo is None:
        return {}
    width = max(1000, -(-(hi - lo + 1) // PLOT_BUCKETS))
    bucket = (F.floor((F.col(ts) - lo) / width) * width + lo).alias("bucket")
    fn = {"sum": F.sum, "avg": F.avg, "max": F.max, "min": F.min}[agg]
    keys = [bucket] + ([F.col(group).cast("string").alias("g")] if group else [])
    rows = df.groupBy(*keys).agg(fn(value).alias("v")).orderBy("bucket").collect()
    out: dict = {}
    for r in rows:
        out.setdefault(r["g"] if group else "all", []).append((r["bucket"], r["v"]))
    return out


def run_audit(spark, paths: str, out: str, say=print, node_labels: str | None = None) -> AuditResult:
    os.makedirs(out, exist_ok=True)
    reader = spark.read.format("kraft-metadata").option("history", "true")
    if node_labels:
        reader = reader.option("node", node_labels)
    t0 = time.monotonic()
    rows = reader.load(paths).persist()
    total = rows.count()
    say(f"[1/9] read {total} metadata records ({time.monotonic() - t0:.1f} s)")
    records = audit.records_once(rows).persist()
    history = audit.partition_history(records)
    events = audit.broker_events(records)
    nodes_df, divergent_df = audit.consistency(rows)
    tables = {}
    steps = [("topics", audit.topic_lifecycle(records)), ("topic_configs", audit.topic_configs(records)),
             ("partition_history", history), ("broker_events", events),
             ("broker_sessions", audit.broker_sessions(events)), ("quorum_history", audit.quorum_history(rows)),
             ("voter_changes", audit.voter_changes(rows)), ("consistency_divergent", divergent_df)]
    for i, (name, df) in enumerate(steps, start=2):
        tables[name] = _write(df, out, name, say, f"[{i}/9]")
    nodes = nodes_df.collect()
    hw = nodes[0]["hw"] if nodes else None
    diverged = spark.read.parquet(os.path.join(out, "consistency_divergent"))
    below = diverged.where("at_or_below_hw").count()
    result = AuditResult([(r["node"], r["first_offset"], r["last_offset"], r["records"], r["errors"]) for r in nodes],
                         hw, tables["consistency_divergent"], below, tables)
    for node, first, last, n, errors in result.nodes:
        say(f"  node {node}: offsets {first}..{last}, {n} records, {errors} unreadable")
    say(f"consistency: {len(nodes)} node(s) compared at every offset; high watermark estimate {hw} "
        f"(the last offset every node holds); {result.divergent} divergent offset(s), "
        f"{below} at or below the high watermark" + (" -- A BUG: committed records differ" if below else ""))
    if below:
        for r in diverged.where("at_or_below_hw").orderBy("offset").limit(10).collect():
            say(f"  offset {r['offset']}: " + ", ".join(f"{c['node']}={c['record_type']}@{c['leader_epoch']}"
                                                      for c in r["copies_seen"]))

    report = Report("kraft metadata audit", summary=[
        f"source: {paths}", f"{total} records read from {len(nodes)} node(s)",
        (f"{tables['topics']} topics, {tables['partition_history']} partition changes, "
         f"{tables['broker_events']} broker events, {tables['quorum_history']} epochs"),
        f"consistency: {result.divergent} divergent offsets, {below} at or below the high watermark ({hw})"])
    leader_changes = history.where("leader_changed")
    report.parts += [
        Plot("Partition leadership changes over time", _series(leader_changes, "timestamp", F.lit(1)), "changes",
             bars=True),
        Plot("ISR size over time (mean and minimum after each partition change)",
             {"mean": _series(history, "timestamp", F.col("isr_size"), agg="avg").get("all", []),
              "min": _series(history, "timestamp", F.col("isr_size"), agg="min").get("all", [])}, "replicas"),
        Plot("Broker fencing events", _series(events.where("event IN ('fenced', 'unfenced', 'shutting_down')"),
                                              "timestamp", F.lit(1), "event"), "events", bars=True),
        Table("Nodes", ["node", "first offset", "last offset", "records", "unreadable"], result.nodes),
        _quorum_table(spark.read.parquet(os.path.join(out, "quorum_history"))),
        _table(spark.read.parquet(os.path.join(out, "voter_changes")).withColumnRenamed("timestamp", "time_ms"),
               "Voter set and kraft.version records", ["offset", "time_ms", "leader_epoch", "record_type", "json"]),
        _table(spark.read.parquet(os.path.join(out, "topic_configs")).withColumnRenamed("timestamp", "time_ms"),
               "Topic config changes", ["offset", "time_ms", "topic_name", "name", "value"]),
        _table(spark.read.parquet(os.path.join(out, "broker_sessions")), "Broker sessions",
               ["broker_id", "broker_epoch", "registered_ms", "first_unfenced_ms", "times_fenced", "last_event"]),
        _table(spark.read.parquet(os.path.join(out, "topics")), "Topics",
               ["topic_name", "partitions", "created_offset", "deleted_offset", "config_changes"]),
    ]
    _save(report, out, say)
    rows.unpersist()
    records.unpersist()
    return result


def _voter_ids(voters) -> tuple:
    """Voter ids from a LeaderChange record's ``voters`` JSON (ids, or objects naming one)."""
    try:
        items = json.loads(voters) if isinstance(voters, str) else (voters or [])
    except ValueError:
        return ()
    ids = []
    for v in items:
        if isinstance(v, dict):
            v = v.get("voter_id", v.get("VoterId", v.get("replica_id")))
        if isinstance(v, int):
            ids.append(v)
    return tuple(sorted(ids))


def _quorum_table(df: DataFrame, limit: int = 50) -> Table:
    """Epochs in order, each whose voter set differs from the epoch before showing the change."""
    columns = ["leader_epoch", "leader", "voters", "first_offset", "first_ms", "election_gap_ms"]
    rows, before = [], None
    for r in df.select(*columns).orderBy("leader_epoch").collect():
        now = _voter_ids(r["voters"])
        change = ""
        if before is not None and now != before:
            change = " ".join([f"+{v}" for v in sorted(set(now) - set(before))] +
                              [f"-{v}" for v in sorted(set(before) - set(now))])
        before = now
        rows.append((r["leader_epoch"], r["leader"], list(now), change, r["first_offset"], r["first_ms"],
                     r["election_gap_ms"]))
    note = f"first {limit} of {len(rows)}" if len(rows) > limit else ""
    return Table("Quorum history (epochs)", columns[:3] + ["voter change"] + columns[3:], rows[:limit], note=note)


def _table(df: DataFrame, title: str, columns: list, limit: int = 50) -> Table:
    total = df.count()
    rows = [tuple(r) for r in df.select(*columns).limit(limit).collect()]
    return Table(title, columns, rows, note=f"first {limit} of {total}" if total > limit else "")


def _save(report: Report, out: str, say) -> None:
    path = os.path.join(out, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(report.html())
    say(f"report -> {path}")


def run_traffic(spark, paths: str, out: str, say=print, bucket_s: int = 60) -> dict:
    from kraft.spark import layout

    os.makedirs(out, exist_ok=True)
    rows = spark.read.format("kraft-log").load(paths)
    disk = traffic.disk_bytes(spark, layout.expand_paths(paths))
    tables = {}
    steps = [("traffic", traffic.per_bucket(rows, bucket_s * 1000)), ("producers", traffic.producers(rows)),
             ("key_skew", traffic.key_skew(rows)), ("compression", traffic.compression(rows, disk))]
    for i, (name, df) in enumerate(steps, start=1):
        tables[name] = _write(df, out, name, say, f"[{i}/4]")
    per_bucket = spark.read.parquet(os.path.join(out, "traffic"))
    totals = per_bucket.agg(F.sum("records"), F.sum("bytes")).first()
    say(f"traffic: {totals[0] or 0} records, {totals[1] or 0} payload bytes in {tables['traffic']} "
        f"topic/partition/{bucket_s}s buckets")
    report = Report("kraft partition traffic", summary=[
        f"source: {paths}", f"{totals[0] or 0} records, {totals[1] or 0} payload bytes"])
    report.parts += [
        Plot("Records per topic over time", _series(per_bucket, "bucket_ms", F.col("records"), "topic"), "records"),
        Plot("Payload bytes per topic over time", _series(per_bucket, "bucket_ms", F.col("bytes"), "topic"), "bytes"),
        _table(spark.read.parquet(os.path.join(out, "compression")), "Compression",
               ["topic", "partition", "codecs", "records", "payload_bytes", "disk_bytes", "ratio"]),
        _table(spark.read.parquet(os.path.join(out, "key_skew")), "Key skew",
               ["topic", "records", "distinct_keys", "top_key", "top_key_share"]),
        _table(spark.read.parquet(os.path.join(out, "producers")), "Producers",
               ["topic", "producer_id", "records", "first_ms", "last_ms"]),
    ]
    _save(report, out, say)
    return tables
