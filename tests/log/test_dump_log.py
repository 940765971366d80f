"""``kraft dump-log``: batches and records of segments and snapshots, index entries,
invalid data reported where it starts, and ``--json``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kraft import records
from kraft.cli import main
from kraft.log import LogConfig, SegmentedLog
from kraft.log.snapshot import SnapshotId, SnapshotFileWriter


@pytest.fixture
def log_dir(tmp_path):
    log = SegmentedLog.open(str(tmp_path), LogConfig(index_interval_bytes=10))
    log.append(records.build_control_record_batch(records.LeaderChangeMessage(1, (1, 2), (1,)), timestamp=5),
               leader_epoch=3)
    log.append(records.build_batch([b"\x01\x02\x00payload", b"plain"], keys=[b"k", None], timestamp=6),
               leader_epoch=3)
    log.close()
    with SnapshotFileWriter(str(tmp_path), SnapshotId(3, 3), 6, timestamp_ms=7) as w:
        w.append(records.build_batch([b"state"], timestamp=7))
        w.freeze()
    return tmp_path


def first_batch_size(log_dir):
    return records.RecordBatch((log_dir / "00000000000000000000.log").read_bytes()).size


def run(capsys, *argv):
    code = main(["dump-log", *map(str, argv)])
    return code, capsys.readouterr()


def test_text_output_of_a_segment(log_dir, capsys):
    code, out = run(capsys, log_dir / "00000000000000000000.log")
    lines = out.out.splitlines()
    assert code == 0 and lines[0].startswith("Dumping") and lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 ") and "partitionLeaderEpoch: 3" in lines[2]
    assert "isControl: true" in lines[2] and "isvalid: true" in lines[2] and "crc: " in lines[2]
    assert 'control: LEADER_CHANGE {"leader_id": 1, "voters": [1, 2], "granting_voters": [1]' in lines[3]
    assert lines[4].startswith("baseOffset: 1 lastOffset: 2 count: 2")
    assert "metadata: TopicRecord (apiKey 2, version 0)" in lines[5]
    assert lines[6].startswith("| offset: 2 CreateTime: 6 keySize: -1 valueSize: 5")


def test_json_output_of_a_snapshot(log_dir, capsys):
    code, out = run(capsys, "--json", log_dir / "00000000000000000003-0000000003.checkpoint")
    doc = json.loads(out.out)
    assert code == 0 and doc["kind"] == "snapshot" and doc["snapshotId"] == {"endOffset": 3, "epoch": 3}
    kinds = [b["records"][0].get("control", {}).get("type") for b in doc["batches"]]
    assert kinds == ["SNAPSHOT_HEADER", None, "SNAPSHOT_FOOTER"]
    assert doc["batches"][0]["records"][0]["control"]["message"]["last_contained_log_timestamp"] == 6
    assert doc["error"] is None and doc["validBytes"] == doc["sizeBytes"]


def test_index_files(log_dir, capsys):
    code, out = run(capsys, "--json", log_dir / "00000000000000000000.index")
    doc = json.loads(out.out)
    assert doc["entries"] == [{"offset": 2, "position": first_batch_size(log_dir)}]


def test_invalid_batch_is_reported_with_its_position(log_dir, capsys):
    seg = log_dir / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[-1] ^= 1
    seg.write_bytes(bytes(data))
    code, out = run(capsys, "--batches-only", seg)
    assert code == 1
    at = first_batch_size(log_dir)
    assert out.out.splitlines()[-1] == f"Found invalid data at position {at}: CRC mismatch"  # the position once
    assert "isvalid: false" in out.out.splitlines()[-2]


def test_unknown_file_is_an_error(tmp_path, capsys):
    (tmp_path / "x.txt").write_text("hi")
    code, out = run(capsys, tmp_path / "x.txt")
    assert code == 1 and "not a segment" in out.err


def test_runs_as_python_dash_m(log_dir):
    out = subprocess.run([sys.executable, "-m", "kraft", "dump-log", "--batches-only",
                          str(log_dir / "00000000000000000000.log")], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.count("baseOffset:") == 2


def test_kafka_spellings_files_and_print_data_log_are_accepted(log_dir, capsys):
    seg = log_dir / "00000000000000000000.log"
    code, ours = run(capsys, "--print-values", seg)
    code2, kafka = run(capsys, "--files", f"{seg}", "--print-data-log", "--deep-iteration")
    assert code == code2 == 0 and kafka.out == ours.out and "payload" in kafka.out


def test_files_takes_a_comma_separated_list(log_dir, capsys):
    seg, idx = log_dir / "00000000000000000000.log", log_dir / "00000000000000000000.index"
    code, out = run(capsys, "--files", f"{seg},{idx}")
    assert code == 0 and [line for line in out.out.splitlines() if line.startswith("Dumping")] == [
        f"Dumping {seg}", f"Dumping {idx}"]


def test_cluster_metadata_decoder_prints_each_record_as_kafka_does(tmp_path, capsys):
    import uuid

    from kraft.metadata.records import TopicRecord
    from kraft.metadata.serde import encode_record

    log = SegmentedLog.open(str(tmp_path), LogConfig())
    topic = TopicRecord(name="orders", topic_id=uuid.UUID(int=1))
    log.append(records.build_batch([encode_record(topic), b"\x01\x02\x00garbage"], timestamp=6), leader_epoch=1)
    log.close()
    code, out = run(capsys, "--cluster-metadata-decoder", tmp_path / "00000000000000000000.log")
    assert code == 0
    assert 'payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"orders","topicId":"AAAAAAAAAAAAAAAAAAAAAQ"}}' \
        in out.out
    code, out = run(capsys, "--json", "--cluster-metadata-decoder", tmp_path / "00000000000000000000.log")
    recs = json.loads(out.out)["batches"][0]["records"]
    assert recs[0]["payload"]["type"] == "TOPIC_RECORD" and "error" in recs[1]["payload"]


def test_no_files_is_a_usage_error(capsys):
    code, out = run(capsys)
    assert code == 2 and "--files" in out.err


def test_offsets_decoder_prints_kafkas_json_tombstones_and_errors(tmp_path, capsys):
    from kraft.coordinator.group_records import offset_commit_record, offset_tombstone
    commit = offset_commit_record("g", "t", 3, 42, 5, "meta", 1_000)
    gone = offset_tombstone("g", "t", 3)
    log = SegmentedLog.open(str(tmp_path), LogConfig())
    log.append(records.build_batch([commit.value, gone.value, b"\x00\x00", b"v"],
                                   keys=[commit.key, gone.key, b"\x00\x63junk", b"\x00"], timestamp=6), leader_epoch=1)
    log.close()
    code, out = run(capsys, "--offsets-decoder", tmp_path / "00000000000000000000.log")
    lines = [line for line in out.out.splitlines() if line.startswith("| offset")]
    assert lines[0].endswith('key: {"type":"1","data":{"group":"g","topic":"t","partition":3}} payload: '
                             '{"version":"3","data":{"offset":42,"leaderEpoch":5,"metadata":"meta",'
                             '"commitTimestamp":1000}}'), lines[0]
    assert lines[1].endswith('key: {"type":"1","data":{"group":"g","topic":"t","partition":3}} payload: <DELETE>')
    assert lines[2].endswith("key: Unknown record type 99 at offset 2, skipping."), lines[2]
    assert lines[3].split("key: ")[1].startswith("Error at offset 3, skipping."), lines[3]
    assert code == 0


def test_transaction_markers_print_as_kafka_dump_log_does(tmp_path, capsys):
    from kraft.broker.write_txn_markers_handler import end_txn_marker_batch

    log = SegmentedLog.open(str(tmp_path), LogConfig())
    log.append(records.build_batch([b"v"], producer_id=7, producer_epoch=2, base_sequence=0, transactional=True,
                                   timestamp=5), leader_epoch=1)
    log.append(end_txn_marker_batch(7, 2, True, 3, 6), leader_epoch=1)
    log.append(end_txn_marker_batch(8, 0, False, 4, 6), leader_epoch=1)
    log.close()
    code, out = run(capsys, tmp_path / "00000000000000000000.log")
    lines = out.out.splitlines()
    assert code == 0
    assert "producerId: 7 producerEpoch: 2" in lines[2] and "isTransactional: true isControl: false" in lines[2]
    assert "baseSequence: -1 producerId: 7 producerEpoch: 2" in lines[4]
    assert "isTransactional: true isControl: true" in lines[4]
    assert lines[5].endswith("keySize: 4 valueSize: 6 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert lines[7].endswith("endTxnMarker: ABORT coordinatorEpoch: 4")
