"""Streaming readers: offsets are log offsets; records appended after a query started are
picked up; a restart from the checkpoint writes no record twice and loses none."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from spark_builders import metadata_batches, open_log, write_metadata_log

from kraft import records
from kraft.metadata import TopicRecord, encode_record
from kraft.spark.log_tail import LogTail


def append(directory, batches_of_values, *, segment_bytes=1500, epoch=3):
    """Append one batch per list of values to the log in ``directory``; returns its end offset."""
    log = open_log(directory, segment_bytes)
    try:
        for values in batches_of_values:
            log.append(records.build_batch(values, keys=[v[:4] for v in values], timestamp=7), leader_epoch=epoch)
        log.request_flush()
        return log.end_offset
    finally:
        log.close()


def values(first, n, tag="v"):
    return [f"{tag}-{first + i:05d}-".encode() * 3 for i in range(n)]


def test_log_tail_counts_only_whole_valid_batches_and_follows_rolls(tmp_path):
    d = tmp_path / "t-0"
    tail = LogTail()
    assert tail.end_offset(str(d)) is None
    assert append(d, [values(0, 4)]) == 4
    assert tail.end_offset(str(d)) == 4 and tail.start_offset(str(d)) == 0
    whole = records.build_batch(values(4, 3))
    last = max(n for n in os.listdir(d) if n.endswith(".log"))
    with open(d / last, "ab") as f:
        f.write(whole[: len(whole) // 2])  # a batch the node is still writing
    assert tail.end_offset(str(d)) == 4
    with open(d / last, "r+b") as f:  # the writer finishes nothing; recovery truncates it
        f.truncate(os.path.getsize(d / last) - len(whole) // 2)
    end = append(d, [values(4 + 5 * i, 5) for i in range(20)])  # rolls several segments
    assert len([n for n in os.listdir(d) if n.endswith(".log")]) >= 3
    assert tail.end_offset(str(d)) == end == 104
    assert LogTail().end_offset(str(d)) == 104  # a fresh tail (from the .index hint) agrees


def _query(spark, fmt, source, out, checkpoint, **options):
    reader = spark.readStream.format(fmt)
    for k, v in options.items():
        reader = reader.option(k, v)
    return (reader.load(str(source)).writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint)).trigger(processingTime="100 milliseconds").start())


def test_kraft_log_stream_picks_up_appends_and_restarts_exactly_once(spark, tmp_path):
    root = tmp_path / "node1"
    for p in (0, 1):
        append(root / f"orders-{p}", [values(0, 5, f"p{p}"), values(5, 5, f"p{p}")])
    append(root / "other-0", [values(0, 2)])
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    query = _query(spark, "kraft-log", root, out, checkpoint, topic="orders")
    try:
        query.processAllAvailable()
        assert spark.read.parquet(str(out)).count() == 20
        for p in (0, 1):  # appended after the query started, across segment rolls
            append(root / f"orders-{p}", [values(10 + 5 * i, 5, f"p{p}") for i in range(8)])
        query.processAllAvailable()
        assert spark.read.parquet(str(out)).count() == 2 * 50
        progress = query.lastProgress["sources"][0]["endOffset"]
    finally:
        query.stop()
    assert {os.path.basename(k): v for k, v in json.loads(progress).items()} == {
        "orders-0": 50, "orders-1": 50}

    append(root / "orders-1", [values(50, 5, "p1")])  # while no query runs
    append(root / "orders-2", [values(0, 3, "p2")])  # a partition created meanwhile
    query = _query(spark, "kraft-log", root, out, checkpoint, topic="orders")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.read.parquet(str(out)).select("topic", "partition", "offset", "value", "error").collect()
    keys = [(r["partition"], r["offset"]) for r in rows]
    assert len(keys) == len(set(keys))  # nothing written twice
    assert sorted(keys) == sorted([(0, o) for o in range(50)] + [(1, o) for o in range(55)] + [(2, o) for o in range(3)])
    assert all(r["topic"] == "orders" and r["error"] is None for r in rows)
    by_key = {(r["partition"], r["offset"]): bytes(r["value"]) for r in rows}
    assert by_key[(1, 52)] == values(52, 1, "p1")[0] and by_key[(2, 0)] == values(0, 1, "p2")[0]


def test_kraft_metadata_stream_tails_a_node_log_from_latest(spark, tmp_path):
    directory = write_metadata_log(tmp_path / "n1", metadata_batches())  # offsets 0..13
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = _query(spark, "kraft-metadata", tmp_path / "n1", out, checkpoint, startingOffsets="latest")
    try:
        query.processAllAvailable()
        log = open_log(directory)
        try:
            for i in range(3):
                log.append(records.build_batch([encode_record(TopicRecord(name=f"late-{i}", topic_id=uuid.UUID(int=50 + i)))]),
                           leader_epoch=2)
            log.request_flush()
        finally:
            log.close()
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r["offset"], r["topic_name"], r["leader_epoch"], r["node"]) for r in rows) == [
        (14 + i, f"late-{i}", 2, "n1") for i in range(3)]


@pytest.mark.parametrize("starting", ["earliest", "nonsense"])
def test_starting_offsets_option_is_checked(tmp_path, starting):
    from kraft.spark.stream_source import LogStreamReader

    append(tmp_path / "t-0", [values(0, 2)])
    if starting == "nonsense":
        with pytest.raises(ValueError, match="startingOffsets"):
            LogStreamReader({"path": str(tmp_path), "startingOffsets": starting})
        return
    reader = LogStreamReader({"path": str(tmp_path), "startingOffsets": starting})
    start = reader.initialOffset()
    assert list(start.values()) == [0]
    end = reader.latestOffset(start, None)
    assert list(end.values()) == [2]
    assert reader.partitions(end, end) == []
