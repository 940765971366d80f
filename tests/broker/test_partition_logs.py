"""Partition logs on disk in Kafka's layout (LogManager / UnifiedLog / PartitionMetadataFile /
OffsetCheckpointFile), recovery, deletion, retention, and the image publisher that decides
which logs exist."""

from __future__ import annotations

import os
import uuid

import pytest

from kraft.broker import partition_dir as names
from kraft.broker.image_publisher import publish_image
from kraft.broker.partition_logs import PartitionLogs
from kraft.errors import StateFileError
from kraft.log import LogConfig
from kraft.log.log_reads import max_timestamp_offset, offset_for_timestamp, read_bytes, read_view
from kraft.metadata import MetadataDelta, PartitionRecord, RegisterBrokerRecord, RemoveTopicRecord, TopicRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.records import build_batch, iter_batches

FOO = uuid.UUID(int=0xF00)
BAR = uuid.UUID(int=0xBA2)


def _cfg(**kw):
    return LogConfig(**{"append_linger_ms": 0.0, **kw})


def _batch(values, ts=1000):
    return bytearray(build_batch([v.encode() for v in values], timestamp=ts))


def _image(topics, previous=EMPTY_IMAGE, replicas=(1,), remove=()):
    delta = MetadataDelta(previous)
    if previous.cluster.brokers == {}:
        delta.replay(RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.UUID(int=1), broker_epoch=1, end_points=[
            RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=1)], rack=None, fenced=False))
    for name, tid, n in topics:
        delta.replay(TopicRecord(name=name, topic_id=tid))
        for p in range(n):
            delta.replay(PartitionRecord(partition_id=p, topic_id=tid, replicas=list(replicas), isr=list(replicas),
                                         leader=replicas[0], leader_epoch=0, partition_epoch=0))
    for tid in remove:
        delta.replay(RemoveTopicRecord(topic_id=tid))
    return delta.apply()


def test_layout_is_kafkas_topic_dash_partition_with_partition_metadata(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg())
    plog = logs.create("foo", 3, FOO)
    plog.log.append(_batch(["a", "b"]), leader_epoch=0)
    logs.close()
    d = tmp_path / "foo-3"
    assert sorted(os.listdir(d)) == ["00000000000000000000.index", "00000000000000000000.log",
                                     "00000000000000000000.timeindex", "leader-epoch-checkpoint",
                                     "partition.metadata"]
    # Kafka's PartitionMetadataFile: "version: 0\ntopic_id: <base64 uuid>\n".
    assert (d / "partition.metadata").read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAPAA\n"
    # The three offset checkpoints: version 0, count, "topic partition offset".
    for name, offset in (("recovery-point-offset-checkpoint", 2), ("replication-offset-checkpoint", 0),
                         ("log-start-offset-checkpoint", 0)):
        assert (tmp_path / name).read_text() == f"0\n1\nfoo 3 {offset}\n", name


def test_reopen_recovers_records_and_offsets(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg())
    plog = logs.create("foo", 0, FOO)
    for i in range(5):
        plog.log.append(_batch([f"r{i}"]), leader_epoch=2)
    plog.high_watermark = 5
    logs.close()
    again = PartitionLogs([str(tmp_path)], _cfg())
    [plog] = again.open_all()
    assert (plog.topic, plog.partition, plog.topic_id) == ("foo", 0, FOO)
    assert (plog.log.end_offset, plog.high_watermark, plog.log.latest_epoch) == (5, 5, 2)
    data = bytes(read_view(plog.log, 0, 1 << 20))
    assert [r.value for b in iter_batches(data) for r in b] == [b"r0", b"r1", b"r2", b"r3", b"r4"]
    again.close()


def test_torn_tail_after_the_recovery_point_is_cut(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg())
    plog = logs.create("foo", 0, FOO)
    plog.log.append(_batch(["a"]), leader_epoch=0)
    plog.log.append(_batch(["b"]), leader_epoch=0)
    logs.close()
    seg = tmp_path / "foo-0" / "00000000000000000000.log"
    with open(seg, "r+b") as f:
        f.truncate(os.path.getsize(seg) - 3)  # the second batch is torn
    again = PartitionLogs([str(tmp_path)], _cfg())
    [plog] = again.open_all()
    assert plog.log.end_offset == 1
    again.close()


def test_delete_renames_to_kafkas_delete_name_then_removes_it(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg())
    logs.create("foo", 0, FOO).log.append(_batch(["a"]), leader_epoch=0)
    renamed = logs.delete("foo", 0)
    name = os.path.basename(renamed)
    assert name.startswith("foo-0.") and name.endswith("-delete") and len(name) == len("foo-0.") + 32 + 7
    assert not (tmp_path / "foo-0").exists()
    logs.wait_for_deletions(10)
    assert not os.path.exists(renamed)
    assert logs.get("foo", 0) is None
    logs.close()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n0\n"


def test_leftover_delete_dirs_are_removed_at_open(tmp_path):
    left = tmp_path / f"foo-0.{uuid.uuid4().hex}-delete"
    left.mkdir()
    (left / "00000000000000000000.log").write_bytes(b"x")
    logs = PartitionLogs([str(tmp_path)], _cfg())
    assert logs.open_all() == []
    logs.wait_for_deletions(10)
    assert not left.exists()
    logs.close()


def test_bad_partition_metadata_is_refused(tmp_path):
    d = tmp_path / "foo-0"
    d.mkdir()
    (d / "partition.metadata").write_text("version: 7\ntopic_id: AAAAAAAAAAAAAAAAAAAPAA\n")
    with pytest.raises(StateFileError):
        PartitionLogs([str(tmp_path)], _cfg()).open_all()


def test_partition_dir_names_parse_only_live_partitions():
    assert names.parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert names.parse_partition_dir(f"foo-0.{uuid.uuid4().hex}-delete") is None
    assert names.parse_partition_dir(f"foo-0.{uuid.uuid4().hex}-stray") is None
    assert names.parse_partition_dir("__cluster_metadata") is None
    long = names.renamed_dir_name("t" * 300, 5, "-delete")
    assert len(long) == 255 and long.endswith("-delete")


def test_retention_by_size_deletes_oldest_whole_segments_below_the_high_watermark(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg(segment_bytes=200), retention_bytes=250)
    plog = logs.create("foo", 0, FOO)
    for i in range(10):
        plog.log.append(_batch([f"value-{i:03d}" * 5]), leader_epoch=0)  # one batch per segment
    assert len(plog.log.segments) == 10
    plog.high_watermark = 3
    logs.apply_retention(now_ms=10_000)
    assert plog.log.start_offset == 3  # only segments wholly below the HW go
    plog.high_watermark = plog.log.end_offset
    logs.apply_retention(now_ms=10_000)
    assert plog.log.size_bytes <= 250 + plog.log.segments[0].size
    assert plog.log.size_bytes - plog.log.segments[0].size < 250
    logs.close()


def test_retention_by_time_uses_the_largest_timestamp_of_each_segment(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg(segment_bytes=100), retention_ms=1000)
    plog = logs.create("foo", 0, FOO)
    for ts in (1000, 2000, 3000, 9000):
        plog.log.append(_batch(["x" * 40], ts=ts), leader_epoch=0)
    plog.high_watermark = plog.log.end_offset
    logs.apply_retention(now_ms=4500)  # older than 3500: the 1000, 2000 and 3000 segments
    assert plog.log.start_offset == 3
    logs.apply_retention(now_ms=9500)  # 9000 is within retention: the last segment stays
    assert plog.log.start_offset == 3
    logs.close()


def test_timestamp_lookups_use_record_timestamps(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg(segment_bytes=150, index_interval_bytes=1))
    plog = logs.create("foo", 0, FOO)
    for i in range(6):
        plog.log.append(bytearray(build_batch([b"a", b"b"], timestamps=[i * 100, i * 100 + 50])), leader_epoch=0)
    log = plog.log
    assert offset_for_timestamp(log, 0) == (0, 0)
    assert offset_for_timestamp(log, 120) == (150, 3)
    assert offset_for_timestamp(log, 450) == (450, 9)
    assert offset_for_timestamp(log, 551) is None
    assert offset_for_timestamp(log, 300, upper_offset=6) is None
    assert max_timestamp_offset(log) == (550, 11)
    logs.close()


def test_read_view_stops_at_the_upper_offset_and_at_max_bytes(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg())
    plog = logs.create("foo", 0, FOO)
    sizes = []
    for i in range(4):
        b = _batch([f"v{i}"])
        sizes.append(len(b))
        plog.log.append(b, leader_epoch=0)
    v = read_view(plog.log, 0, 1 << 20, upper_offset=2)
    assert isinstance(v, memoryview) and len(v) == sizes[0] + sizes[1]
    assert len(read_view(plog.log, 1, sizes[1] + 1)) == sizes[1]
    assert len(read_view(plog.log, 0, 1)) == sizes[0]  # the first batch even if larger
    assert len(read_view(plog.log, 0, 1, min_one=False)) == 0
    assert len(read_view(plog.log, 4, 100)) == 0
    logs.close()


def test_publisher_creates_hosted_partitions_and_deletes_removed_topics(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg())
    one = _image([("foo", FOO, 2), ("bar", BAR, 1)])
    changes = publish_image(logs, EMPTY_IMAGE, one, broker_id=1)
    assert sorted(changes.created) == [("bar", 0), ("foo", 0), ("foo", 1)]
    assert (tmp_path / "foo-1").is_dir()
    two = _image([], previous=one, remove=[FOO])
    changes = publish_image(logs, one, two, broker_id=1)
    assert sorted(changes.deleted) == [("foo", 0), ("foo", 1)] and changes.created == []
    logs.wait_for_deletions(10)
    assert sorted(os.listdir(tmp_path)) == ["bar-0"]
    logs.close()


def test_publisher_ignores_partitions_of_other_brokers(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg())
    image = _image([("foo", FOO, 2)], replicas=(2, 3))
    assert publish_image(logs, EMPTY_IMAGE, image, broker_id=1).created == []
    logs.close()


def test_first_image_renames_unknown_local_logs_stray(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg())
    logs.create("gone", 0, uuid.UUID(int=7))
    logs.close()
    again = PartitionLogs([str(tmp_path)], _cfg())
    again.open_all()
    changes = publish_image(again, EMPTY_IMAGE, _image([("foo", FOO, 1)]), broker_id=1, first=True)
    assert changes.strays == [("gone", 0)] and changes.created == [("foo", 0)]
    assert any(n.startswith("gone-0.") and n.endswith("-stray") for n in os.listdir(tmp_path))
    again.close()


def test_first_image_judges_strays_by_topic_id_partition_and_replicas(tmp_path):
    """Kafka's isStrayKraftReplica: a local log is a stray only if the image has no partition
    of its topic id and number, or does not list this broker; a local log whose topic id
    the image holds is kept with its data, whatever else the image lacks."""
    logs = PartitionLogs([str(tmp_path)], _cfg())
    for p in range(3):
        logs.create("foo", p, FOO).log.append(_batch([f"foo{p}"]), leader_epoch=0)
    logs.create("bar", 0, BAR).log.append(_batch(["bar"]), leader_epoch=0)
    logs.create("old", 0, uuid.UUID(int=99)).log.append(_batch(["x"]), leader_epoch=0)
    logs.close()
    again = PartitionLogs([str(tmp_path)], _cfg())
    again.open_all()
    # foo now has 2 partitions (foo-2 is not in the image); bar lists brokers 2 and 3 only;
    # foo-0 and foo-1 are this broker's.
    image = _image([("bar", BAR, 1)], replicas=(2, 3), previous=_image([("foo", FOO, 2)]))
    changes = publish_image(again, EMPTY_IMAGE, image, broker_id=1, first=True)
    assert sorted(changes.strays) == [("bar", 0), ("foo", 2), ("old", 0)]
    assert changes.created == [] and changes.deleted == []
    for p in (0, 1):  # kept, data and all
        assert again.get("foo", p).log.end_offset == 1
    strays = sorted(n for n in os.listdir(tmp_path) if n.endswith("-stray"))
    assert [n.split(".")[0] for n in strays] == ["bar-0", "foo-2", "old-0"]
    again.close()


def test_a_later_image_never_renames_strays(tmp_path):
    """Only the first (caught-up) image judges strays; later ones delete what they remove."""
    logs = PartitionLogs([str(tmp_path)], _cfg())
    one = _image([("foo", FOO, 1), ("bar", BAR, 1)])
    publish_image(logs, EMPTY_IMAGE, one, 1, first=True)
    two = _image([], previous=one, remove=[BAR])
    changes = publish_image(logs, one, two, 1)
    assert changes.deleted == [("bar", 0)] and changes.strays == []
    logs.close()


def test_recreated_topic_with_a_new_id_gets_a_fresh_log(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg())
    one = _image([("foo", FOO, 1)])
    publish_image(logs, EMPTY_IMAGE, one, 1)
    logs.get("foo", 0).log.append(_batch(["old"]), leader_epoch=0)
    new_id = uuid.UUID(int=0xABC)
    two = _image([("foo", new_id, 1)], previous=_image([], previous=one, remove=[FOO]))
    changes = publish_image(logs, one, two, 1)
    assert changes.deleted == [("foo", 0)] and changes.created == [("foo", 0)]
    plog = logs.get("foo", 0)
    assert plog.topic_id == new_id and plog.log.end_offset == 0
    logs.close()


def test_the_metadata_log_sharing_a_log_dir_is_not_a_partition(tmp_path, caplog):
    """log.dirs[0] is also metadata.log.dir by default: __cluster_metadata-0 is left alone,
    without the 'no partition.metadata' warning every start."""
    (tmp_path / "__cluster_metadata-0").mkdir()
    logs = PartitionLogs([str(tmp_path)], _cfg())
    with caplog.at_level("WARNING"):
        assert logs.open_all() == []
    assert "partition.metadata" not in caplog.text
    assert (tmp_path / "__cluster_metadata-0").is_dir()
    logs.close()


def test_create_many_makes_every_log_balanced_over_log_dirs_and_keeps_existing_ones(tmp_path):
    """A topic's new logs are made together (on worker threads); each is a complete, usable
    log in the emptier log dir, and a log that already exists is returned, not remade."""
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    logs = PartitionLogs(dirs, _cfg())
    first = logs.create("foo", 0, FOO)
    first.log.append(_batch(["kept"]), leader_epoch=0)
    made = logs.create_many([(("foo", p), FOO) for p in range(41)])
    assert made[0] is first and first.log.end_offset == 1
    assert [(p.topic, p.partition) for p in made] == [("foo", p) for p in range(41)]
    assert len({p.log_dir for p in made}) == 2
    assert sorted(sum(p.log_dir == d for p in made) for d in dirs) == [20, 21]
    for plog in made[1:]:
        assert plog.log.end_offset == 0 and logs.get("foo", plog.partition) is plog
        assert names.read_partition_metadata(os.path.join(plog.directory, names.PARTITION_METADATA_FILE)) == FOO
        plog.log.append(_batch(["x"]), leader_epoch=0)
    logs.close()
    reopened = PartitionLogs(dirs, _cfg())
    assert len(reopened.open_all()) == 41
    assert all(p.log.end_offset == 1 for p in reopened)
    reopened.close()


def test_read_bytes_is_read_view_copied_out_of_the_map(tmp_path):
    logs = PartitionLogs([str(tmp_path)], _cfg())
    plog = logs.create("foo", 0, FOO)
    for i in range(5):
        plog.log.append(_batch([f"r{i}-{j}" for j in range(10)]), leader_epoch=0)
    cases = [(0, 1 << 20, None, True), (13, 200, None, True), (13, 1, None, True), (13, 1, None, False),
             (20, 1 << 20, 35, True), (50, 100, None, True)]
    for offset, max_bytes, upper, min_one in cases:
        view = read_view(plog.log, offset, max_bytes, upper_offset=upper, min_one=min_one)
        copy = read_bytes(plog.log, offset, max_bytes, upper_offset=upper, min_one=min_one)
        assert bytes(copy) == bytes(view), (offset, max_bytes, upper, min_one)
        assert not isinstance(copy.obj, type(view.obj)) or not len(copy)  # bytes of its own, not the map
    logs.close()
