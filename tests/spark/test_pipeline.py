"""``kraft pipeline audit`` and ``traffic``: the tables hold exactly the history that was
written; the consistency check flags divergent copies and tells committed ones apart."""

from __future__ import annotations

import os
import re

import pyarrow.parquet as pq
import pytest
from spark_builders import open_log

from kraft import records
from kraft.records import Compression
from kraft.spark import jobs
from kraft.testing.metadata_history import cluster_history, tail_for, write_history


def table(out, name):
    return pq.read_table(os.path.join(out, name)).to_pylist()


@pytest.fixture(scope="module")
def history():
    return cluster_history(brokers=3, topics=3, partitions=2, delete_topics=1)


def test_audit_tables_hold_the_history_that_was_written(spark, tmp_path, history):
    for n in (1, 2, 3):
        write_history(str(tmp_path / f"node{n}"), history, segment_bytes=1200)
    out = str(tmp_path / "audit")
    lines = []
    result = jobs.run_audit(spark, str(tmp_path / "node*"), out, lines.append)
    assert any(line.startswith("[9/9]") for line in lines)  # progress, step by step

    rows = spark.read.format("kraft-metadata").option("history", "true").load(str(tmp_path / "node1"))
    assert {r["record_type"]: r["count"] for r in rows.groupBy("record_type").count().collect()} == history.counts

    topics = {t["topic_name"]: t for t in table(out, "topics")}
    assert set(topics) == {"topic-00000", "topic-00001", "topic-00002"}
    assert [t["partitions"] for t in topics.values()] == [2, 2, 2]
    assert [name for name, t in topics.items() if t["deleted_offset"] is not None] == ["topic-00000"]
    assert {c["topic_name"]: c["value"] for c in table(out, "topic_configs")} == {
        "topic-00000": "1000", "topic-00001": "2000", "topic-00002": "3000"}

    parts = table(out, "partition_history")
    assert len(parts) == history.counts["PartitionRecord"] + history.counts["PartitionChangeRecord"]
    assert sum(1 for p in parts if p["leader_changed"]) == history.leaders_changed == 2
    assert sorted({p["isr_size"] for p in parts}) == [2, 3]  # shrunk while broker 3 was fenced
    assert all(p["leader_now"] is not None and p["topic_name"] for p in parts)

    sessions = {(s["broker_id"], s["broker_epoch"]): s for s in table(out, "broker_sessions")}
    assert set(sessions) == {(1, 1), (2, 2), (3, 3), (3, 103)}
    assert sessions[(3, 3)]["times_fenced"] == 1 and sessions[(3, 3)]["last_event"] == "fenced"
    assert sessions[(1, 1)]["last_event"] == "shutting_down"

    quorum = table(out, "quorum_history")
    assert [(q["leader_epoch"], q["leader"]) for q in quorum] == sorted(history.epochs.items())
    assert [q["election_gap_ms"] for q in quorum] == [None, 1505, 805]  # the gaps the history left

    assert (result.divergent, result.divergent_at_or_below_hw, result.hw) == (0, 0, sum(history.counts.values()) - 1)
    assert [n[0] for n in result.nodes] == ["node1", "node2", "node3"]
    with open(os.path.join(out, "report.html")) as f:
        report = f.read()
    assert report.count("<img") == 3 and "<script" not in report and "http" not in report.split("source:")[0]
    for heading in ("Quorum history (epochs)", "Voter set and kraft.version records", "Topic config changes"):
        assert f"<h2>{heading}</h2>" in report
    assert "<th>voter change</th>" in report and "topic-00002</td><td>retention.ms" in report.replace("\n", "")
    assert re.search(r"<td>20\d\d-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC</td>", report)  # times, not epoch ms


def test_consistency_check_flags_divergence_and_whether_it_is_committed(spark, tmp_path, history):
    last = max(history.epochs)
    write_history(str(tmp_path / "a" / "node1"), history)
    write_history(str(tmp_path / "a" / "node2"), history, tail=tail_for(history, last, 2))
    write_history(str(tmp_path / "a" / "node3"), history, tail=tail_for(history, last + 1, 3))
    result = jobs.run_audit(spark, str(tmp_path / "a" / "node*"), str(tmp_path / "out-a"), lambda _: None)
    end = sum(history.counts.values())
    assert (result.hw, result.divergent, result.divergent_at_or_below_hw) == (end - 1, 2, 0)  # tails only
    divergent = table(str(tmp_path / "out-a"), "consistency_divergent")
    assert [d["offset"] for d in divergent] == [end, end + 1]

    # node3 holds a different record at a committed offset: a bug the check must report
    changed = list(history.batches)
    fence = next(i for i, (_, b) in enumerate(changed) if records.RecordBatch(b, 0).records_count == 1
                 and not records.RecordBatch(b, 0).is_control)
    changed[fence] = tail_for(history, changed[fence][0], 1)[0]
    other = type(history)(batches=changed)
    for n, h in ((1, history), (2, history), (3, other)):
        write_history(str(tmp_path / "b" / f"node{n}"), h)
    said = []
    result = jobs.run_audit(spark, str(tmp_path / "b" / "node*"), str(tmp_path / "out-b"), said.append)
    assert result.divergent == result.divergent_at_or_below_hw == 1
    assert any("A BUG" in s for s in said) and any("node3=TopicRecord" in s for s in said)


def write_traffic(log_dir):
    """orders-0/1: 3 minutes x 4 batches of 10 records, key k0 hot; logs-0 gzip, one producer."""
    minute = 60_000
    t0 = 1_700_000_000_000 - 1_700_000_000_000 % minute
    expected = {}
    for topic, partition, codec, pid in (("orders", 0, Compression.NONE, -1), ("orders", 1, Compression.NONE, -1),
                                         ("logs", 0, Compression.GZIP, 77)):
        log = open_log(log_dir / f"{topic}-{partition}", 4096)
        try:
            for m in range(3):
                for b in range(4):
                    keys = [b"k0" if i % 2 == 0 else f"k{i}".encode() for i in range(10)]
                    vals = [b"payload " * 8 for _ in range(10)]
                    log.append(records.build_batch(vals, keys=keys, timestamp=t0 + m * minute + b * 1000,
                                                   compression=codec, producer_id=pid, producer_epoch=0 if pid >= 0
                                                   else -1, base_sequence=0 if pid >= 0 else -1), leader_epoch=1)
                    expected[(topic, partition, t0 + m * minute)] = expected.get((topic, partition, t0 + m * minute),
                                                                                  0) + 10
            log.request_flush()
        finally:
            log.close()
    return expected


def test_traffic_tables_count_records_and_bytes_per_minute(spark, tmp_path):
    expected = write_traffic(tmp_path / "node1")
    out = str(tmp_path / "traffic")
    jobs.run_traffic(spark, str(tmp_path / "node1"), out, lambda _: None)
    buckets = table(out, "traffic")
    assert {(b["topic"], b["partition"], b["bucket_ms"]): b["records"] for b in buckets} == expected
    record_bytes = 2 + 64  # most keys are two bytes (k0, k1, ... k9), values 64
    assert all(b["bytes"] == 40 * record_bytes for b in buckets)
    skew = {s["topic"]: s for s in table(out, "key_skew")}
    assert skew["orders"]["top_key"] == "k0" and skew["orders"]["top_key_share"] == 0.5
    assert skew["orders"]["distinct_keys"] == 6
    comp = {(c["topic"], c["partition"]): c for c in table(out, "compression")}
    assert comp[("logs", 0)]["codecs"] == ["gzip"] and comp[("logs", 0)]["ratio"] > 2
    assert comp[("orders", 0)]["codecs"] == ["none"] and comp[("orders", 0)]["ratio"] < 1
    producers = {(p["topic"], p["producer_id"]): p["records"] for p in table(out, "producers")}
    assert producers == {("logs", 77): 120, ("orders", -1): 240}
    with open(os.path.join(out, "report.html")) as f:
        assert "<img" in f.read()
