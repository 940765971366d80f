"""``kraft metadata-shell`` as a user runs it (a subprocess): one-shot commands and an
interactive session over a metadata directory holding a snapshot and a log after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from image_samples import replay, sample_records

from kraft import records
from kraft.log.snapshot import SnapshotFileWriter
from kraft.metadata import (ConfigRecord, PartitionChangeRecord, RemoveTopicRecord, TopicRecord, encode_record)
from kraft.metadata.snapshot_image import write_image_snapshot
from kraft.protocol.primitives import uuid_to_base64
from kraft.types import SnapshotId

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SID = SnapshotId(100, 3)
T0, T1 = uuid.UUID(int=0x7000), uuid.UUID(int=0x7001)
NEW = uuid.UUID(int=0xABC)


@pytest.fixture(scope="module")
def metadata_dir(tmp_path_factory):
    node_dir = tmp_path_factory.mktemp("node")
    d = node_dir / "__cluster_metadata-0"
    d.mkdir()
    with SnapshotFileWriter(str(d), SID, timestamp_ms=1) as w:
        write_image_snapshot(replay(sample_records(topics=3, partitions=4)), w.append_values)
        w.freeze()
    # The log: a batch the snapshot already holds, then changes after it.
    old = [encode_record(TopicRecord(name="old", topic_id=uuid.UUID(int=1)))] * 10
    after = [encode_record(r) for r in (
        PartitionChangeRecord(partition_id=2, topic_id=T0, leader=4, isr=[4]),
        RemoveTopicRecord(topic_id=T1),
        TopicRecord(name="fresh", topic_id=NEW),
        ConfigRecord(resource_type=2, resource_name="fresh", name="segment.bytes", value="1024"))]
    seg = records.build_batch(old, base_offset=90, partition_leader_epoch=3, timestamp=1)
    seg += records.build_batch(after, base_offset=100, partition_leader_epoch=4, timestamp=2)
    (d / "00000000000000000090.log").write_bytes(seg)
    return node_dir


def shell(directory, *words, stdin=None):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "kraft", "metadata-shell", "--directory", str(directory), *words],
                          input=stdin, capture_output=True, text=True, env=env, timeout=120)


def test_ls_topics_shows_the_snapshot_plus_the_log(metadata_dir):
    r = shell(metadata_dir, "ls", "/topics")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["fresh", "t0", "t2"]  # t1 removed and "fresh" created after the snapshot


def test_cat_partition_data_shows_the_change_from_the_log(metadata_dir):
    r = shell(metadata_dir / "__cluster_metadata-0", "cat", "/topics/t0/2/data")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["leader"] == 4 and data["isr"] == [4] and data["topicId"] == uuid_to_base64(T0)
    assert data["partitionEpoch"] == 4  # 3 in the snapshot, one change


def test_paths_for_every_part_of_the_image(metadata_dir):
    r = shell(metadata_dir, "cat", "/features/metadata.version", "/brokers/4/isFenced",
              "/configs/TOPIC/fresh/segment.bytes",
              "/configs/BROKER/<default>/log.retention.ms", "/producerIds/nextProducerId",
              "/clientQuotas/user/<default>/producer_byte_rate", f"/topicIds/{uuid_to_base64(NEW)}/name",
              "/local/snapshotId", "/local/nextOffset", "/scram/SCRAM-SHA-512/alice")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["21", "true", "1024", "5", "5000", "1024.0", "fresh",
                                     "00000000000000000100-0000000003", "104",
                                     "ScramCredentialData(salt=[hidden], storedKey=[hidden], serverKey=[hidden], "
                                     "iterations=8192)"]
    acls = shell(metadata_dir, "find", "/acls").stdout.splitlines()
    assert acls[:2] == ["/acls", "/acls/id"] and len(acls) == 3
    reg = json.loads(shell(metadata_dir, "cat", "/brokers/1/registration").stdout)
    assert reg["brokerId"] == 1 and reg["endPoints"][0]["port"] == 9093


def test_tree_and_globs(metadata_dir):
    r = shell(metadata_dir, "tree", "/topics/t2/[01]")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "0:" and lines[1].startswith("  data: {") and lines[2] == "1:"
    assert shell(metadata_dir, "ls", "/topics/t*").stdout.count(":\n") == 2


def test_an_interactive_session_reads_commands_from_stdin(metadata_dir):
    r = shell(metadata_dir, stdin="cd /topics/t0\npwd\nls\ncd ..\npwd\ncat nope\nexit\nls /\n")
    out = r.stdout.splitlines()
    assert out[0] == "/topics/t0"
    assert out[1:4] == ["id", "name", "0"]
    assert "/topics" in out and "bin" not in out
    assert "/brokers" not in r.stdout  # nothing after exit ran
    assert "cat: nope: no such file or directory" in r.stderr and r.returncode == 1


def test_a_missing_path_fails_and_a_missing_directory_is_one_error_line(metadata_dir, tmp_path):
    r = shell(metadata_dir, "ls", "/topics/nope")
    assert r.returncode == 1 and "no such file or directory" in r.stderr
    r = shell(tmp_path / "absent", "ls")
    assert r.returncode == 1 and r.stderr.startswith("error:") and len(r.stderr.splitlines()) == 1


def test_a_log_without_a_snapshot_and_a_snapshot_file_alone(metadata_dir, tmp_path):
    d = tmp_path / "__cluster_metadata-0"
    d.mkdir()
    vals = [encode_record(TopicRecord(name=n, topic_id=uuid.UUID(int=i + 1))) for i, n in enumerate("ab")]
    (d / "00000000000000000000.log").write_bytes(records.build_batch(vals, partition_leader_epoch=1) + b"\0" * 20)
    r = shell(tmp_path, "ls", "/topics")
    assert r.returncode == 0 and r.stdout.split() == ["a", "b"], r.stderr
    snap = metadata_dir / "__cluster_metadata-0" / "00000000000000000100-0000000003.checkpoint"
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "kraft", "metadata-shell", "--snapshot", str(snap), "ls", "/topics"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["t0", "t1", "t2"], r.stderr  # the log is not read


def test_values_written_with_kraft_produce_are_counted_and_skipped(tmp_path):
    """Issue 37 item 4. Before: one batch of ``kraft produce`` values in ``__cluster_metadata``
    made metadata-shell refuse the whole log ("unknown metadata record frame version 114")."""
    d = tmp_path / "__cluster_metadata-0"
    d.mkdir()
    topic = [encode_record(TopicRecord(name="a", topic_id=uuid.UUID(int=1)))]
    produced = [b"record-0-xxxx", b"record-1-xxxx", b"record-2-xxxx"]
    seg = records.build_batch(topic, base_offset=0, partition_leader_epoch=1, timestamp=1)
    seg += records.build_batch(produced, base_offset=1, partition_leader_epoch=1, timestamp=2)
    seg += records.build_batch([encode_record(TopicRecord(name="b", topic_id=uuid.UUID(int=2)))], base_offset=4,
                               partition_leader_epoch=1, timestamp=3)
    (d / "00000000000000000000.log").write_bytes(seg)
    r = shell(tmp_path, "ls", "/topics")
    assert r.returncode == 0 and r.stdout.split() == ["a", "b"], r.stderr
    assert r.stderr.strip().splitlines() == [
        "note: skipped 3 record(s) in 1 batch(es) that are not metadata records "
        "(values written into __cluster_metadata with `kraft produce`)"]
