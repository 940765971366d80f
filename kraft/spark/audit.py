"""The audit tables of ``kraft pipeline audit``: cluster history read back from one or more
nodes' metadata logs (``kraft-metadata`` rows with ``history=true``), as Spark DataFrames.

Every table is a function of the rows DataFrame, so the same code runs on ``local[*]`` and
on a cluster. Lifecycle tables use each offset once (all nodes' copies of an offset are the
same record; :func:`consistency` checks exactly that). Times are the metadata batches'
append timestamps (ms). Writes nothing itself: the CLI writes the tables and the report.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

BROKER_EVENTS = {
    "RegisterBrokerRecord": "registered", "FenceBrokerRecord": "fenced", "UnfenceBrokerRecord": "unfenced",
    "BrokerRegistrationChangeRecord": "changed", "UnregisterBrokerRecord": "unregistered",
}
#: ConfigRecord.resourceType of a topic (Kafka's ConfigResource.Type.TOPIC).
TOPIC_RESOURCE = 2


def _data(path: str):
    return F.get_json_object(F.col("json"), f"$.data.{path}")


def records_once(rows: DataFrame) -> DataFrame:
    """The decoded log records, one row per offset whichever nodes hold it.

    A node's log is contiguous, so the copy kept is the node with the most records for its
    whole range, plus the other nodes' rows only for offsets it lacks (outside its range, or
    unreadable in it). Only those few rows are shuffled to drop duplicates: a
    ``dropDuplicates`` over every node's rows shuffled each record's JSON (the audit's
    slowest step at 100,000 partitions). Runs one small aggregate (a row per node) first."""
    good = rows.where("error IS NULL AND source = 'log'")
    spans = (good.groupBy("node").agg(F.count(F.lit(1)).alias("n"), F.min("offset").alias("lo"),
                                      F.max("offset").alias("hi")).collect())
    if len(spans) <= 1:
        return good
    best = max(spans, key=lambda r: (r["n"], r["hi"], str(r["node"])))
    mine = F.col("node") == F.lit(best["node"])
    holes = F.broadcast(rows.where(mine & F.col("error").isNotNull()).select("offset").distinct())
    outside = (F.col("offset") < best["lo"]) | (F.col("offset") > best["hi"])
    others = good.where(~mine)
    rest = others.where(outside).unionByName(others.join(holes, "offset", "left_semi"))
    return good.where(mine).unionByName(rest.dropDuplicates(["offset"]))


def topic_names(records: DataFrame) -> DataFrame:
    return (records.where("record_type = 'TopicRecord'")
            .groupBy("topic_id").agg(F.last("topic_name").alias("topic_name")))


def topic_lifecycle(records: DataFrame) -> DataFrame:
    """One row per topic id: created/deleted (offset, time), partition count, config changes."""
    created = (records.where("record_type = 'TopicRecord'").groupBy("topic_id")
               .agg(F.first("topic_name").alias("topic_name"), F.min("offset").alias("created_offset"),
                    F.min("timestamp").alias("created_ms")))
    deleted = (records.where("record_type = 'RemoveTopicRecord'").groupBy("topic_id")
               .agg(F.min("offset").alias("deleted_offset"), F.min("timestamp").alias("deleted_ms")))
    parts = (records.where("record_type = 'PartitionRecord'").groupBy("topic_id")
             .agg(F.countDistinct("partition_id").alias("partitions")))
    configs = (topic_configs(records).groupBy("topic_name")
               .agg(F.count(F.lit(1)).alias("config_changes")))
    return (created.join(deleted, "topic_id", "left").join(parts, "topic_id", "left")
            .join(configs, "topic_name", "left").fillna(0, ["partitions", "config_changes"])
            .orderBy("created_offset"))


def topic_configs(records: DataFrame) -> DataFrame:
    """Every topic config set or removed (``value`` null), in log order."""
    return (records.where("record_type = 'ConfigRecord'")
            .where(_data("resourceType").cast("int") == TOPIC_RESOURCE)
            .select("offset", "timestamp", _data("resourceName").alias("topic_name"),
                    _data("name").alias("name"), _data("value").alias("value")))


def partition_history(records: DataFrame) -> DataFrame:
    """Every PartitionRecord/PartitionChangeRecord with the partition's state after it:
    ``leader_now``/``isr_now`` carry forward what a change record leaves unchanged."""
    changes = records.where("record_type IN ('PartitionRecord', 'PartitionChangeRecord')")
    w = Window.partitionBy("topic_id", "partition_id").orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
    out = (changes.select("offset", "timestamp", "leader_epoch", "record_type", "topic_id", "partition_id", "leader",
                          "isr", "replicas")
           .withColumn("leader_now", F.last("leader", ignorenulls=True).over(w))
           .withColumn("isr_now", F.last("isr", ignorenulls=True).over(w))
           .withColumn("isr_size", F.size("isr_now"))
           .withColumn("leader_changed", F.col("leader_now") != F.lag("leader_now").over(
               Window.partitionBy("topic_id", "partition_id").orderBy("offset"))))
    return out.join(F.broadcast(topic_names(records)), "topic_id", "left")


def broker_events(records: DataFrame) -> DataFrame:
    """Registrations, fencing, unfencing, controlled shutdown and unregistration of brokers."""
    event = F.coalesce(*[F.when(F.col("record_type") == k, F.lit(v)) for k, v in BROKER_EVENTS.items()])
    epoch = F.coalesce(_data("brokerEpoch"), _data("epoch")).cast("long")
    raw = _data("fenced")  # a boolean in RegisterBrokerRecord, an int8 change (1/0/-1) elsewhere
    fenced = F.when(raw == "true", 1).when(raw == "false", 0).otherwise(raw.try_cast("int"))
    shutdown = _data("inControlledShutdown").try_cast("int")
    return (records.where(F.col("record_type").isin(list(BROKER_EVENTS)))
            .select("offset", "timestamp", "broker_id", epoch.alias("broker_epoch"), event.alias("event"),
                    fenced.alias("fenced"), shutdown.alias("in_controlled_shutdown"))
            # a registration change that only fences/unfences or starts a shutdown says which
            .withColumn("event", F.when((F.col("event") == "changed") & (F.col("in_controlled_shutdown") == 1),
                                        "shutting_down")
                        .when((F.col("event") == "changed") & (F.col("fenced") == 1), "fenced")
                        .when((F.col("event") == "changed") & (F.col("fenced") == -1), "unfenced")
                        .otherwise(F.col("event"))))


def broker_sessions(events: DataFrame) -> DataFrame:
    """One row per broker registration (broker id, epoch): when it started, was first
    unfenced, how often it was fenced, how it ended (last event)."""
    return (events.where("broker_epoch IS NOT NULL").groupBy("broker_id", "broker_epoch")
            .agg(F.min(F.when(F.col("event") == "registered", F.col("timestamp"))).alias("registered_ms"),
                 F.min(F.when(F.col("event") == "unfenced", F.col("timestamp"))).alias("first_unfenced_ms"),
                 F.sum(F.when(F.col("event") == "fenced", 1).otherwise(0)).alias("times_fenced"),
                 F.max_by("event", "offset").alias("last_event"), F.max("timestamp").alias("last_event_ms"))
            .orderBy("broker_id", "broker_epoch"))


def quorum_history(rows: DataFrame) -> DataFrame:
    """One row per Raft epoch seen in any node's log: its leader (from the LeaderChange
    record), voters, when it began, and the election gap: from the last record of the
    previous epoch to the new leader's LeaderChange (an upper bound of the election time)."""
    good = rows.where("error IS NULL AND source = 'log'")
    spans = good.groupBy("leader_epoch").agg(F.min("timestamp").alias("first_ms"), F.max("timestamp").alias("last_ms"),
                                            F.min("offset").alias("first_offset"),
                                            F.max("offset").alias("last_offset"))
    changes = (good.where("record_type = 'LeaderChange'").groupBy("leader_epoch")
               .agg(F.min("timestamp").alias("leader_change_ms"),
                    F.first(F.get_json_object("json", "$.leader_id").cast("int")).alias("leader"),
                    F.first(F.get_json_object("json", "$.voters")).alias("voters"),
                    F.first(F.get_json_object("json", "$.granting_voters")).alias("granting_voters")))
    w = Window.orderBy("leader_epoch")
    return (spans.join(changes, "leader_epoch", "left")
            .withColumn("previous_epoch_last_ms", F.lag("last_ms").over(w))
            .withColumn("election_gap_ms", F.col("leader_change_ms") - F.col("previous_epoch_last_ms"))
            .orderBy("leader_epoch"))


def voter_changes(rows: DataFrame) -> DataFrame:
    return (rows.where("error IS NULL AND record_type IN ('Voters', 'KRaftVersion')")
            .dropDuplicates(["offset", "source"])
            .select("offset", "timestamp", "leader_epoch", "source", "record_type", "json"))


def consistency(rows: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``(nodes, divergent)``: per node its offset range; and every offset at which two
    nodes' copies differ (epoch, type or content), with ``at_or_below_hw`` set when the
    offset is at or below the high watermark estimate: the last offset every node holds.
    Raft's log matching makes any such divergence a bug; above it, a node may still hold
    an uncommitted tail that the leader will truncate."""
    good = rows.where("source = 'log'")
    nodes = good.groupBy("node").agg(F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
                                     F.count(F.lit(1)).alias("records"),
                                     F.sum(F.when(F.col("error").isNotNull(), 1).otherwise(0)).alias("errors"))
    hw = nodes.agg(F.min("last_offset").alias("hw"))
    content = F.concat_ws("|", F.col("leader_epoch").cast("string"), F.coalesce("record_type", F.lit("")),
                          F.coalesce("json", F.col("error"), F.lit("")))
    # Each copy is hashed where it was read; only (offset, hash) is shuffled, and min != max
    # says "two versions" without countDistinct's second aggregation. The copies of the few
    # divergent offsets are gathered afterwards.
    hashed = good.select("offset", "node", "leader_epoch", "record_type", F.xxhash64(content).alias("h"))
    per_offset = (hashed.groupBy("offset")
                  .agg(F.min("h").alias("h_min"), F.max("h").alias("h_max"), F.count(F.lit(1)).alias("copies"))
                  .where("h_min != h_max").select("offset", "copies"))
    seen = (hashed.join(F.broadcast(per_offset.select("offset")), "offset", "left_semi").groupBy("offset")
            .agg(F.countDistinct("h").alias("versions"),
                 F.collect_list(F.struct("node", "leader_epoch", "record_type")).alias("copies_seen")))
    divergent = (per_offset.join(seen, "offset").select("offset", "versions", "copies", "copies_seen")
                 .crossJoin(F.broadcast(hw))
                 .withColumn("at_or_below_hw", F.col("offset") <= F.col("hw")).orderBy("offset"))
    return nodes.crossJoin(F.broadcast(hw)).orderBy("node"), divergent
