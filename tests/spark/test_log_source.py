"""``kraft-log``: partition logs read back exactly as written; pushdown plans only the
segments that can match; damaged segments in both modes."""

from __future__ import annotations

import itertools
import os

import pyarrow as pa
import pytest
from spark_builders import open_log

from kraft import records
from kraft.records import Compression
from kraft.spark import layout
from kraft.spark.log_source import KraftLogReader

PARTITIONS = [("orders", 0), ("orders", 1), ("payments", 0)]
BATCHES, PER_BATCH = 40, 5


def _record(topic, partition, offset):
    key = None if offset % 7 == 0 else f"{topic}-{partition}-k{offset}".encode()
    value = b"" if offset % 11 == 0 else f"value {offset} ".encode() * (1 + offset % 4)
    headers = () if offset % 3 else (("h", f"{offset}".encode()), ("n", None))
    return key, value, headers


def write_partition_logs(log_dir, segment_bytes=2048):
    """Each partition: BATCHES batches of PER_BATCH records (every fourth one gzip), epoch 2."""
    expected = {}
    for topic, partition in PARTITIONS:
        log = open_log(log_dir / f"{topic}-{partition}", segment_bytes)
        try:
            for b in range(BATCHES):
                recs = [_record(topic, partition, b * PER_BATCH + i) for i in range(PER_BATCH)]
                log.append(records.build_batch([r[1] for r in recs], keys=[r[0] for r in recs],
                                               headers=[r[2] for r in recs], timestamp=1000 + b,
                                               compression=Compression.GZIP if b % 4 == 0 else Compression.NONE),
                           leader_epoch=2)
            log.request_flush()
        finally:
            log.close()
        for offset in range(BATCHES * PER_BATCH):
            expected[(topic, partition, offset)] = _record(topic, partition, offset)
    return expected


def _as_written(row):
    headers = tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"])
    key = None if row["key"] is None else bytes(row["key"])
    return (row["topic"], row["partition"], row["offset"]), (key, bytes(row["value"]), headers)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("logdirs") / "node1"
    return log_dir, write_partition_logs(log_dir)


def test_rows_equal_what_was_written(spark, logs):
    log_dir, expected = logs
    rows = spark.read.format("kraft-log").load(str(log_dir)).collect()
    assert dict(_as_written(r) for r in rows) == expected and len(rows) == len(expected)
    first = min(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))
    assert (first["leader_epoch"], first["timestamp_type"], first["compression"], first["error"]) == (2, 0, "gzip", None)
    assert {r["compression"] for r in rows} == {"gzip", "none"}
    assert {r["timestamp"] for r in rows} == {1000 + b for b in range(BATCHES)}


def _segments(path):
    return layout.segment_bases(str(path))


def test_pushdown_plans_only_the_segments_that_can_match(spark, logs):
    log_dir, expected = logs
    bases = _segments(log_dir / "orders-1")
    assert len(bases) >= 4
    start = bases[-2] + 3  # inside the second to last segment
    # a slice per input partition (an open cost of maxPartitionBytes), so the count shows the pruning
    one_each = spark.read.format("kraft-log").option("openCostInBytes", str(256 << 20))
    df = one_each.load(str(log_dir)).where(
        f"topic = 'orders' AND partition = 1 AND offset >= {start}")
    assert df.rdd.getNumPartitions() == 2
    got = dict(_as_written(r) for r in df.collect())
    assert got == {k: v for k, v in expected.items() if k[:2] == ("orders", 1) and k[2] >= start}

    everything = one_each.load(str(log_dir))
    assert everything.rdd.getNumPartitions() == sum(len(_segments(log_dir / f"{t}-{p}")) for t, p in PARTITIONS)


def test_offset_range_options_prune_like_filters(spark, logs):
    log_dir, expected = logs
    bases = _segments(log_dir / "payments-0")
    df = (spark.read.format("kraft-log").option("topic", "payments").option("start_offset", bases[1])
          .option("end_offset", bases[2]).load(str(log_dir)))
    assert df.rdd.getNumPartitions() == 1
    assert sorted(r["offset"] for r in df.collect()) == list(range(bases[1], bases[2]))


def test_reader_starts_inside_a_segment_at_its_index_position_and_yields_arrow(logs):
    log_dir, expected = logs
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual

    bases = _segments(log_dir / "orders-0")
    start = bases[1] + 3 * PER_BATCH + 1  # several batches into the second segment
    reader = KraftLogReader({"path": str(log_dir)})
    filters = [EqualTo(("topic",), "orders"), EqualTo(("partition",), 0), GreaterThanOrEqual(("offset",), start)]
    assert list(reader.pushFilters(filters)) == filters  # all handed back: Spark re-checks them
    planned = reader.partitions()
    slices = [s for p in planned for s in p.value]
    assert [os.path.basename(s.path) for s in slices] == [f"{b:020d}.log" for b in bases[1:]]
    assert slices[0].position > 0  # the .index skipped the batches before `start`
    out = [b for p in planned for b in reader.read(p)]
    assert all(isinstance(b, pa.RecordBatch) for b in out)
    offsets = [o for b in out for o in b.column("offset").to_pylist()]
    assert offsets == list(range(start, BATCHES * PER_BATCH))


def test_corrupt_segment_is_an_error_row_or_a_failure(spark, tmp_path):
    log_dir = tmp_path / "node1"
    expected = write_partition_logs(log_dir)
    bases = _segments(log_dir / "orders-0")
    path = log_dir / "orders-0" / f"{bases[1]:020d}.log"
    data = bytearray(path.read_bytes())
    size = records.RecordBatch(bytes(data), 0).size
    data[size + 40] ^= 0xFF  # inside the second batch of the second segment
    path.write_bytes(bytes(data))
    rows = spark.read.format("kraft-log").load(str(log_dir)).collect()
    bad = [r for r in rows if r["error"] is not None]
    assert len(bad) == 1 and bad[0]["topic"] == "orders" and bad[0]["partition"] == 0
    assert bad[0]["offset"] == bases[1] + PER_BATCH and "invalid batch" in bad[0]["error"]
    good = {k for k, _ in map(_as_written, (r for r in rows if r["error"] is None))}
    lost = {k for k in expected if k[:2] == ("orders", 0) and bases[1] + PER_BATCH <= k[2] < bases[2]}
    assert good == set(expected) - lost
    with pytest.raises(Exception, match="invalid batch"):
        spark.read.format("kraft-log").option("mode", "FAILFAST").load(str(log_dir)).collect()


def _read_all(reader):
    return [o for p in reader.partitions() for b in reader.read(p) for o in b.column("offset").to_pylist()]


def test_a_large_segment_is_split_at_index_positions_into_whole_batch_slices(logs):
    log_dir, _ = logs
    bases = _segments(log_dir / "orders-0")
    size = os.path.getsize(log_dir / "orders-0" / f"{bases[0]:020d}.log")
    whole = KraftLogReader({"path": str(log_dir), "topic": "orders", "partition": "0"})
    split = KraftLogReader({"path": str(log_dir), "topic": "orders", "partition": "0",
                            "maxPartitionBytes": str(size // 3)})
    assert len(split.partitions()) >= 2 * len(whole.partitions())
    slices = [s for p in split.partitions() for s in p.value if s.path.endswith(f"{bases[0]:020d}.log")]
    assert len(slices) >= 2 and slices[0].position == 0 and slices[-1].end_position == -1
    assert all(a.end_position == b.position for a, b in itertools.pairwise(slices))
    assert _read_all(split) == _read_all(whole) == list(range(BATCHES * PER_BATCH))


def test_a_stale_index_cannot_lose_or_repeat_records(tmp_path):
    log_dir = tmp_path / "node1"
    write_partition_logs(log_dir, segment_bytes=1 << 20)  # one segment per partition
    index = log_dir / "orders-0" / f"{0:020d}.index"
    raw = bytearray(index.read_bytes())
    assert len(raw) >= 16
    for i in range(0, len(raw) - 7, 8):  # every position now points 3 bytes into a batch
        pos = int.from_bytes(raw[i + 4:i + 8], "big")
        raw[i + 4:i + 8] = (pos + 3).to_bytes(4, "big")
    index.write_bytes(bytes(raw))
    reader = KraftLogReader({"path": str(log_dir), "topic": "orders", "partition": "0", "maxPartitionBytes": "1500"})
    assert len(reader.partitions()) >= 3
    assert _read_all(reader) == list(range(BATCHES * PER_BATCH))


def test_small_segments_are_packed_in_order_into_few_input_partitions(spark, logs):
    log_dir, expected = logs
    n_segments = sum(len(_segments(log_dir / f"{t}-{p}")) for t, p in PARTITIONS)
    packed = KraftLogReader({"path": str(log_dir), "minPartitions": "1"}).partitions()
    one_each = KraftLogReader({"path": str(log_dir), "openCostInBytes": str(1 << 30)}).partitions()
    assert len(one_each) == n_segments and len(packed) == 1  # a few KB in all: one task reads it
    assert [s for p in packed for s in p.value] == [p.value[0] for p in one_each]  # every slice, in order
    four = KraftLogReader({"path": str(log_dir), "minPartitions": "4"}).partitions()
    assert 4 <= len(four) < n_segments  # small input still spread over the cores it was asked to use
    assert [s for p in four for s in p.value] == [p.value[0] for p in one_each]
    df = spark.read.format("kraft-log").option("minPartitions", "1").load(str(log_dir))
    assert df.rdd.getNumPartitions() == 1
    assert dict(_as_written(r) for r in df.collect()) == expected


def test_pack_slices_bounds_each_partition_by_bytes_and_open_cost(tmp_path):
    paths = []
    for i, size in enumerate([60, 30, 30, 100, 10, 10]):
        paths.append(tmp_path / f"{i:020d}.log")
        paths[-1].write_bytes(b"x" * size)
    slices = [layout.FileSlice(str(p), "log") for p in paths]
    sizes = lambda groups: [[layout.slice_bytes(s) for s in g] for g in groups]  # noqa: E731
    assert sizes(layout.pack_slices(slices, 100, 0)) == [[60, 30], [30], [100], [10, 10]]
    assert sizes(layout.pack_slices(slices, 100, 10)) == [[60, 30], [30], [100], [10, 10]]  # 70 + 30 fits
    assert sizes(layout.pack_slices(slices, 100, 11)) == [[60], [30, 30], [100], [10, 10]]
    # the target shrinks so that 3 partitions get data (240 bytes / 3 = 80 each at most)
    assert sizes(layout.pack_slices(slices, 1000, 0, min_partitions=3)) == [[60], [30, 30], [100], [10, 10]]
    assert sizes(layout.pack_slices(slices, 1000, 0, min_partitions=1)) == [[60, 30, 30, 100, 10, 10]]
    cut = layout.FileSlice(str(paths[3]), "log", position=20, end_position=70)
    assert layout.slice_bytes(cut) == 50 and layout.pack_slices([], 100, 4) == []
