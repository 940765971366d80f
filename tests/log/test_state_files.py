"""quorum-state and meta.properties: Kafka's formats byte for byte, durable atomic writes,
and a clear error naming the file for every kind of malformed content."""

from __future__ import annotations

import os

import pytest

from kraft.errors import StateFileError
from kraft.log import files
from kraft.log.state_files import MetaProperties, QuorumStateData, QuorumStateFile, parse_properties

# The examples in Kafka's FileQuorumStateStore javadoc.
KAFKA_V0 = '{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[],"data_version":0}'
KAFKA_V1 = '{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}'


def test_reads_kafkas_examples_and_writes_them_back_identically(tmp_path):
    store = QuorumStateFile.in_directory(str(tmp_path))
    for text, expect in [
        (KAFKA_V0, QuorumStateData(leader_id=1, leader_epoch=2, voted_id=-1, data_version=0, current_voters=())),
        (KAFKA_V1, QuorumStateData(leader_id=-1, leader_epoch=2, voted_id=1, data_version=1,
                                   voted_directory_id="J8aAPcfLQt2bqs1JT_rMgQ")),
    ]:
        (tmp_path / "quorum-state").write_text(text)
        state = store.read()
        assert state == expect
        store.write(state)
        assert (tmp_path / "quorum-state").read_text() == text


def test_round_trip_with_voters_and_missing_file(tmp_path):
    store = QuorumStateFile(str(tmp_path / "quorum-state"))
    assert store.read() is None
    state = QuorumStateData(leader_id=3, leader_epoch=9, voted_id=3, cluster_id="abc",
                            applied_offset=0, current_voters=(1, 2, 3))
    store.write(state)
    assert store.read() == state
    assert not os.path.exists(store.path + ".tmp")
    store.clear()
    assert store.read() is None


def test_write_is_temp_fsync_rename_fsync_dir(tmp_path, monkeypatch):
    events = []
    real_sync, real_dir, real_replace = files.fdatasync, files.fsync_dir, os.replace
    monkeypatch.setattr(files, "fdatasync", lambda fd, what: (events.append(("sync", what)), real_sync(fd, what)))
    monkeypatch.setattr(files, "fsync_dir", lambda p: (events.append(("dir", p)), real_dir(p)))
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("rename", a, b)), real_replace(a, b)))
    QuorumStateFile.in_directory(str(tmp_path)).write(QuorumStateData(leader_epoch=1))
    path = str(tmp_path / "quorum-state")
    assert events == [("sync", path + ".tmp"), ("rename", path + ".tmp", path), ("dir", str(tmp_path))]


@pytest.mark.parametrize("text, complaint", [
    ("", "empty"),
    ("not json", "not valid JSON"),
    ("[1,2]", "JSON object"),
    ('{"leaderId":1,"leaderEpoch":2,"votedId":-1}', "data_version"),
    ('{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":7}', "supported versions"),
    ('{"leaderEpoch":2,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}', "leaderId"),
    ('{"leaderId":"1","leaderEpoch":2,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}', "not an integer"),
    ('{"leaderId":1,"leaderEpoch":2,"votedId":-1,"votedDirectoryId":"short","data_version":1}', "uuid"),
    ('{"leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[],"data_version":0}', "clusterId"),
    ('{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"data_version":0}', "currentVoters"),
    ('{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[{"id":1}],"data_version":0}', "voterId"),
    ('{"leaderId":99999999999,"leaderEpoch":2,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}', "out of range"),
])
def test_malformed_quorum_state_fails_naming_the_file(tmp_path, text, complaint):
    (tmp_path / "quorum-state").write_text(text)
    with pytest.raises(StateFileError) as info:
        QuorumStateFile.in_directory(str(tmp_path)).read()
    assert str(tmp_path / "quorum-state") in str(info.value) and complaint in str(info.value)


def test_non_utf8_quorum_state_fails_clearly(tmp_path):
    (tmp_path / "quorum-state").write_bytes(b"\xff\xfe{")
    with pytest.raises(StateFileError, match="quorum-state"):
        QuorumStateFile.in_directory(str(tmp_path)).read()


# A meta.properties as Kafka's `kafka-storage format` writes it.
KAFKA_META = """#
#Tue Mar 05 10:11:12 UTC 2024
cluster.id=J8aAPcfLQt2bqs1JT_rMgQ
directory.id=AAAAAAAAAAAAAAAAAAAAAQ
node.id=1
version=1
"""


def test_reads_kafkas_meta_properties_and_writes_the_same_entries(tmp_path):
    path = str(tmp_path / "meta.properties")
    open(path, "w").write(KAFKA_META)
    meta = MetaProperties.read(path)
    assert meta == MetaProperties("J8aAPcfLQt2bqs1JT_rMgQ", 1, "AAAAAAAAAAAAAAAAAAAAAQ", 1)
    meta.write(path)
    written = open(path).read()
    assert [line for line in written.splitlines() if not line.startswith("#")] == KAFKA_META.splitlines()[2:]
    assert MetaProperties.read(path) == meta


def test_properties_parser_handles_java_syntax():
    text = "! comment\n  a = 1\nb:2\nc 3\nd=x\\\n   y\ne=\\u0041\\:\\=\nf\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "xy", "e": "A:=", "f": ""}


def test_version_0_is_read(tmp_path):
    meta = MetaProperties.parse("version=0\nbroker.id=5\ncluster.id=abc\n")
    assert (meta.version, meta.node_id, meta.cluster_id) == (0, 5, "abc")


@pytest.mark.parametrize("text, complaint", [
    ("version=1\ncluster.id=abc\n", "node.id was not found"),
    ("version=1\nnode.id=1\n", "cluster.id was not found"),
    ("version=1\nnode.id=one\ncluster.id=abc\n", "not an integer"),
    ("version=2\nnode.id=1\ncluster.id=abc\n", "unsupported version"),
    ("version=1\nnode.id=1\ncluster.id=abc\ndirectory.id=nope\n", "directory.id"),
    ("version=0\ncluster.id=abc\n", "broker.id was not found"),
])
def test_malformed_meta_properties_fails_naming_the_file(tmp_path, text, complaint):
    path = tmp_path / "meta.properties"
    path.write_text(text)
    with pytest.raises(StateFileError) as info:
        MetaProperties.read(str(path))
    assert str(path) in str(info.value) and complaint in str(info.value)


def test_missing_meta_properties_is_none(tmp_path):
    assert MetaProperties.read(str(tmp_path / "meta.properties")) is None
