"""Snapshots: ``%020d-%010d.checkpoint`` written through ``.checkpoint.part`` and a rename,
header/footer control batches added by the writer, validated by the reader; list, latest,
delete older; raw (FetchSnapshot) writing."""

from __future__ import annotations

import os

import pytest

from kraft import records
from kraft.errors import CorruptRecordError, LogCorruptionError
from kraft.log import files
from kraft.log.snapshot import (
    SnapshotId,
    SnapshotFileReader,
    SnapshotFileWriter,
    delete_snapshots_before,
    latest_snapshot,
    list_snapshots,
    parse_snapshot_name,
    remove_incomplete_snapshots,
)


def write_snapshot(directory, sid, values_per_batch=((b"a", b"b"), (b"c",)), ts=42):
    with SnapshotFileWriter(str(directory), sid, ts, timestamp_ms=1000) as w:
        for values in values_per_batch:
            w.append(records.build_batch(list(values), base_offset=999, partition_leader_epoch=77))
        return w.freeze()


def test_file_name_and_contents(tmp_path):
    sid = SnapshotId(offset=1234, epoch=5)
    path = write_snapshot(tmp_path, sid)
    assert os.path.basename(path) == "00000000000000001234-0000000005.checkpoint"
    assert os.listdir(tmp_path) == [os.path.basename(path)]  # no .part left
    with SnapshotFileReader(str(tmp_path), sid) as r:
        assert r.last_contained_log_timestamp == 42
        everything = list(r.batches(include_control=True))
        assert [b.base_offset for b in everything] == [0, 1, 3, 4]
        assert {b.partition_leader_epoch for b in everything} == {5}
        assert everything[0].is_control and everything[-1].is_control
        assert [[x.value for x in b] for b in r.batches()] == [[b"a", b"b"], [b"c"]]
        footer = list(everything[-1])[0]
        assert records.decode_control_record(footer.key, footer.value) == records.SnapshotFooterRecord()
        assert r.read(0, 1 << 20) == open(path, "rb").read()


def test_writer_is_durable_then_renamed(tmp_path, monkeypatch):
    events = []
    real_sync, real_dir, real_replace = files.fdatasync, files.fsync_dir, os.replace
    monkeypatch.setattr(files, "fdatasync", lambda fd, what: (events.append(("sync", what)), real_sync(fd, what)))
    monkeypatch.setattr(files, "fsync_dir", lambda p: (events.append(("dir", p)), real_dir(p)))
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("rename", b)), real_replace(a, b)))
    path = write_snapshot(tmp_path, SnapshotId(10, 1))
    assert [e[0] for e in events] == ["sync", "rename", "dir"]
    assert events[0][1].endswith(".checkpoint.part") and events[1][1] == path


def test_abandoned_writer_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with SnapshotFileWriter(str(tmp_path), SnapshotId(10, 1)) as w:
            w.append(records.build_batch([b"x"]))
            raise RuntimeError("crash before freeze")
    assert os.listdir(tmp_path) == [] and list_snapshots(str(tmp_path)) == []


def test_corrupt_batches_are_rejected_by_the_writer(tmp_path):
    with SnapshotFileWriter(str(tmp_path), SnapshotId(10, 1)) as w:
        bad = bytearray(records.build_batch([b"x"]))
        bad[-1] ^= 1
        with pytest.raises(CorruptRecordError):
            w.append(bytes(bad))


def test_list_latest_and_delete_older(tmp_path):
    ids = [SnapshotId(100, 1), SnapshotId(50, 1), SnapshotId(200, 3), SnapshotId(200, 2)]
    for sid in ids:
        write_snapshot(tmp_path, sid)
    (tmp_path / "00000000000000000300-0000000003.checkpoint.part").write_bytes(b"partial")
    (tmp_path / "00000000000000000300-0000000003-123.checkpoint.part").write_bytes(b"kafka temp")
    (tmp_path / "00000000000000000010-0000000001.checkpoint.deleted").write_bytes(b"old")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    assert list_snapshots(str(tmp_path)) == sorted(ids)
    assert latest_snapshot(str(tmp_path)) == SnapshotId(200, 3)
    assert delete_snapshots_before(str(tmp_path), SnapshotId(200, 2)) == [SnapshotId(50, 1), SnapshotId(100, 1)]
    assert list_snapshots(str(tmp_path)) == [SnapshotId(200, 2), SnapshotId(200, 3)]
    assert len(remove_incomplete_snapshots(str(tmp_path))) == 3
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000000.log", "00000000000000000200-0000000002.checkpoint",
        "00000000000000000200-0000000003.checkpoint"]


def test_parse_names():
    assert parse_snapshot_name("00000000000000000007-0000000002.checkpoint") == (SnapshotId(7, 2), ".checkpoint")
    assert parse_snapshot_name("00000000000000000007-0000000002.checkpoint.part")[1] == ".checkpoint.part"
    assert parse_snapshot_name("00000000000000000007.log") is None
    assert parse_snapshot_name("leader-epoch-checkpoint") is None


@pytest.mark.parametrize("damage", ["bitflip", "truncate", "no-footer", "no-header", "empty"])
def test_reader_rejects_damaged_snapshots(tmp_path, damage):
    sid = SnapshotId(10, 1)
    path = write_snapshot(tmp_path, sid)
    data = bytearray(open(path, "rb").read())
    scan = records.scan_batches(bytes(data))
    if damage == "bitflip":
        data[int(scan.positions[1]) + 40] ^= 4
    elif damage == "truncate":
        data = data[:-10]
    elif damage == "no-footer":
        data = data[: int(scan.positions[-1])]
    elif damage == "no-header":
        data = data[int(scan.positions[1]):]
    else:
        data = bytearray()
    open(path, "wb").write(bytes(data))
    with pytest.raises(LogCorruptionError) as info:
        SnapshotFileReader(str(tmp_path), sid)
    assert os.path.basename(path) in str(info.value)


def test_raw_writer_copies_a_leaders_snapshot_in_chunks(tmp_path):
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    sid = SnapshotId(500, 7)
    path = write_snapshot(leader, sid, [[bytes([i]) * 50 for i in range(20)]])
    with SnapshotFileReader(str(leader), sid) as src, SnapshotFileWriter(str(follower), sid, raw=True) as dst:
        pos = 0
        while pos < src.size_bytes:
            chunk = src.read(pos, 333)  # unaligned with batches
            dst.write_raw(chunk, pos)
            pos += len(chunk)
        dst.freeze()
    assert (follower / os.path.basename(path)).read_bytes() == open(path, "rb").read()


def test_raw_writer_refuses_an_incomplete_copy(tmp_path):
    sid = SnapshotId(500, 7)
    path = write_snapshot(tmp_path / "leader", sid)
    data = open(path, "rb").read()
    with SnapshotFileWriter(str(tmp_path / "f"), sid, raw=True) as dst:
        dst.write_raw(data[:-20])
        with pytest.raises(LogCorruptionError):
            dst.freeze()
    assert os.listdir(tmp_path / "f") == []
