"""``kraft-metadata``: rows of metadata logs and snapshots with known contents."""

from __future__ import annotations

import os

import pytest
from spark_builders import TOPIC_IDS, metadata_batches, write_metadata_log

from kraft import records
from kraft.metadata import TopicRecord, encode_record
from kraft.spark.metadata_rows import uuid_text


def _counts(df):
    return {r["record_type"]: r["count"] for r in df.groupBy("record_type").count().collect()}


def test_every_record_is_one_row_named_as_kafka_names_it(spark, tmp_path):
    write_metadata_log(tmp_path / "n1", metadata_batches())
    df = spark.read.format("kraft-metadata").load(str(tmp_path / "n1"))
    assert _counts(df) == {"LeaderChange": 1, "RegisterBrokerRecord": 3, "TopicRecord": 3,
                           "PartitionRecord": 6, "FenceBrokerRecord": 1}
    rows = sorted(df.collect(), key=lambda r: r["offset"])
    assert [r["offset"] for r in rows] == list(range(14))
    assert rows[0]["is_control"] and not rows[1]["is_control"] and rows[0]["leader_epoch"] == 1
    assert rows[0]["json"].startswith('{"leader_id": 1') and rows[0]["error"] is None
    assert {r["node"] for r in rows} == {"n1"}


def test_typed_columns_hold_the_record_fields(spark, tmp_path):
    write_metadata_log(tmp_path / "n1", metadata_batches())
    df = spark.read.format("kraft-metadata").load(str(tmp_path / "n1" / "__cluster_metadata-0"))
    topics = {r["topic_id"]: r["topic_name"] for r in df.where("record_type = 'TopicRecord'").collect()}
    assert topics == {uuid_text(TOPIC_IDS[0]): "orders", uuid_text(TOPIC_IDS[1]): "payments",
                      uuid_text(TOPIC_IDS[2]): "audit"}
    parts = df.where("record_type = 'PartitionRecord'").collect()
    assert {(r["topic_id"], r["partition_id"], r["leader"]) for r in parts} == {
        (uuid_text(t), p, 1 + p) for t in TOPIC_IDS for p in range(2)}
    assert all(r["isr"] == [1, 2] and r["replicas"] == [1, 2, 3] and r["broker_id"] is None for r in parts)
    brokers = df.where("broker_id is not null").select("record_type", "broker_id").collect()
    assert sorted((r[0], r[1]) for r in brokers) == [("FenceBrokerRecord", 3), ("RegisterBrokerRecord", 1),
                                                    ("RegisterBrokerRecord", 2), ("RegisterBrokerRecord", 3)]
    control = df.where("is_control").first()
    assert control["topic_id"] is None and control["isr"] is None


def test_default_is_latest_snapshot_plus_log_suffix_and_history_is_every_segment(spark, tmp_path):
    snap = [records.build_batch([encode_record(TopicRecord(name="from-snapshot", topic_id=TOPIC_IDS[0]))])]
    write_metadata_log(tmp_path / "n1", metadata_batches(), snapshot_batches=snap, snapshot_offset=10,
                       segment_bytes=400)
    segments = [n for n in os.listdir(tmp_path / "n1" / "__cluster_metadata-0") if n.endswith(".log")]
    assert len(segments) >= 3
    df = spark.read.format("kraft-metadata").load(str(tmp_path / "n1"))
    rows = df.collect()
    snap_rows = sorted((r["offset"], r["record_type"]) for r in rows if r["source"] == "snapshot")
    assert snap_rows == [(0, "SnapshotHeader"), (1, "TopicRecord"), (2, "SnapshotFooter")]
    assert sorted(r["offset"] for r in rows if r["source"] == "log") == [10, 11, 12, 13]
    assert "from-snapshot" in {r["topic_name"] for r in rows}
    # segments ending at or below the snapshot offset are not even planned
    assert df.rdd.getNumPartitions() < 1 + len(segments)

    history = spark.read.format("kraft-metadata").option("history", "true").load(str(tmp_path / "n1"))
    assert sorted(r["offset"] for r in history.collect()) == list(range(14))
    assert history.where("source = 'snapshot'").count() == 0
    assert history.rdd.getNumPartitions() == len(segments)


def test_several_nodes_are_labelled_by_node(spark, tmp_path):
    write_metadata_log(tmp_path / "node1", metadata_batches())
    write_metadata_log(tmp_path / "node2", metadata_batches(topics=("x",), partitions=1))
    by_glob = spark.read.format("kraft-metadata").load(str(tmp_path / "node*"))
    counts = {r["node"]: r["count"] for r in by_glob.groupBy("node").count().collect()}
    assert counts == {"node1": 14, "node2": 1 + 3 + 2 + 1}
    listed = (spark.read.format("kraft-metadata").option("node", "a,b")
              .load(f"{tmp_path / 'node1'},{tmp_path / 'node2'}"))
    assert {r["node"]: r["count"] for r in listed.groupBy("node").count().collect()} == {"a": 14, "b": 7}


def _corrupt_second_batch(directory):
    """Flip a byte inside the second batch of the first segment (its CRC no longer matches)."""
    seg = sorted(n for n in os.listdir(directory) if n.endswith(".log"))[0]
    path = directory / seg
    data = bytearray(path.read_bytes())
    first = records.RecordBatch(bytes(data), 0)
    data[first.size + 70] ^= 0xFF
    path.write_bytes(bytes(data))


def test_corrupt_segment_is_an_error_row_or_a_failure(spark, tmp_path):
    directory = write_metadata_log(tmp_path / "n1", metadata_batches())
    _corrupt_second_batch(directory)
    rows = spark.read.format("kraft-metadata").load(str(tmp_path / "n1")).collect()
    good = [r for r in rows if r["error"] is None]
    bad = [r for r in rows if r["error"] is not None]
    assert [r["offset"] for r in good] == [0]  # the LeaderChange batch before the damage
    assert len(bad) == 1 and bad[0]["offset"] == 1 and "invalid batch" in bad[0]["error"]
    with pytest.raises(Exception, match="invalid batch"):
        spark.read.format("kraft-metadata").option("mode", "FAILFAST").load(str(tmp_path / "n1")).collect()


def test_undecodable_metadata_record_is_an_error_row_in_its_place():
    """A batch with a valid CRC whose record is not a metadata record (no Spark needed)."""
    from kraft.spark.metadata_rows import MetadataRows

    buf = records.build_batch([encode_record(TopicRecord(name="ok", topic_id=TOPIC_IDS[0])), b"\x01\x7f\x00garbage"])
    batch = records.RecordBatch(buf, 0)
    rows = MetadataRows("n1", "log", failfast=False)
    rows.add_batch(batch, batch.decode(), 0, 1 << 62)
    table = rows.take().to_pylist()
    assert [(r["offset"], r["record_type"], r["error"] is None) for r in table] == [(0, "TopicRecord", True),
                                                                                    (1, None, False)]
    assert "unknown metadata record type" in table[1]["error"]
    with pytest.raises(Exception, match="unknown metadata record type"):
        MetadataRows("n1", "log", failfast=True).add_batch(batch, batch.decode(), 0, 1 << 62)
