"""The traffic tables of ``kraft pipeline traffic``: what partition logs hold, from
``kraft-log`` rows, as Spark DataFrames: records and bytes per topic/partition/time bucket,
producers, key skew, and bytes on disk against payload bytes (the compression ratio).

Functions of DataFrames only (plus the segment sizes listed on the driver); writes nothing.
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from kraft.spark import layout


def _payload():
    headers = F.coalesce(F.aggregate("headers", F.lit(0).cast("long"),
                                     lambda acc, h: acc + F.coalesce(F.length(h["key"]), F.lit(0))
                                     + F.coalesce(F.length(h["value"]), F.lit(0))), F.lit(0))
    return F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0)) + headers


def per_bucket(rows: DataFrame, bucket_ms: int = 60_000) -> DataFrame:
    """Records, payload bytes (keys + values + headers) and producers per topic, partition
    and time bucket (``bucket_ms`` wide, by record timestamp)."""
    return (rows.where("error IS NULL")
            .withColumn("bucket_ms", F.floor(F.col("timestamp") / bucket_ms) * bucket_ms)
            .groupBy("topic", "partition", "bucket_ms")
            .agg(F.count(F.lit(1)).alias("records"), F.sum(_payload()).alias("bytes"),
                 F.countDistinct("producer_id").alias("producers"),
                 F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"))
            .orderBy("topic", "partition", "bucket_ms"))


def producers(rows: DataFrame) -> DataFrame:
    return (rows.where("error IS NULL").groupBy("topic", "producer_id")
            .agg(F.count(F.lit(1)).alias("records"), F.min("timestamp").alias("first_ms"),
                 F.max("timestamp").alias("last_ms"))
            .orderBy("topic", F.desc("records")))


def key_skew(rows: DataFrame) -> DataFrame:
    """Per topic: records, distinct keys, the most frequent key and its share of records
    (1/distinct for a perfectly even spread)."""
    keyed = rows.where("error IS NULL").groupBy("topic", "key").agg(F.count(F.lit(1)).alias("n"))
    w = Window.partitionBy("topic").orderBy(F.desc("n"))
    top = keyed.withColumn("rank", F.row_number().over(w)).where("rank = 1").select(
        "topic", F.col("key").alias("top_key"), F.col("n").alias("top_key_records"))
    totals = keyed.groupBy("topic").agg(F.sum("n").alias("records"), F.count(F.lit(1)).alias("distinct_keys"))
    return (totals.join(top, "topic").withColumn("top_key_share", F.col("top_key_records") / F.col("records"))
            .withColumn("top_key", F.col("top_key").cast("string")).orderBy(F.desc("top_key_share")))


def disk_bytes(spark: SparkSession, directories: list[str]) -> DataFrame:
    """Bytes of ``.log`` segments per topic/partition (listed on the driver: sizes only)."""
    out = []
    for d in directories:
        for topic, partition, path in layout.partition_dirs(d):
            size = sum(os.path.getsize(os.path.join(path, f"{b:020d}.log")) for b in layout.segment_bases(path))
            out.append((topic, partition, size))
    return spark.createDataFrame(out, "topic string, partition int, disk_bytes long")


def compression(rows: DataFrame, disk: DataFrame) -> DataFrame:
    """Per topic/partition: codecs seen, payload bytes and bytes on disk; ``ratio`` is
    payload / disk (above 1 when compression saves space; batch overhead pulls it down)."""
    payload = (rows.where("error IS NULL").groupBy("topic", "partition")
               .agg(F.array_sort(F.collect_set("compression")).alias("codecs"), F.sum(_payload()).alias("payload_bytes"),
                    F.count(F.lit(1)).alias("records")))
    return (payload.join(disk, ["topic", "partition"], "left")
            .withColumn("ratio", F.col("payload_bytes") / F.col("disk_bytes")).orderBy("topic", "partition"))
