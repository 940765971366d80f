"""JBOD: several ``log.dirs`` on one broker (Kafka's LogManager placement, KIP-858 directory
failure). Placement follows the controller's assignment when it names a directory of this
broker, else the directory holding the fewest partitions; a restart finds each partition where
it is; one partition in two directories stops the start; an I/O error takes one directory
offline while the others keep serving."""

from __future__ import annotations

import os
import uuid

import pytest

from kraft.broker.image_publisher import publish_image
from kraft.broker.log_dir_states import DuplicateLogError, LogDirStates
from kraft.broker.partition_logs import PartitionLogs
from kraft.errors import FatalLogError
from kraft.log import LogConfig
from kraft.metadata import MetadataDelta, PartitionRecord, RegisterBrokerRecord, TopicRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.records import build_batch

FOO = uuid.UUID(int=0xF00)
D1, D2 = uuid.UUID(int=0xD1D1 << 64), uuid.UUID(int=0xD2D2 << 64)


def _cfg():
    return LogConfig(append_linger_ms=0.0)


def _logs(tmp_path, open_all=True):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    logs = PartitionLogs([a, b], _cfg(), dir_states=LogDirStates([a, b], {a: D1, b: D2}))
    if open_all:
        logs.open_all()
    return logs, a, b


def _image(n, directories=None):
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay(RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.UUID(int=1), broker_epoch=1, end_points=[
        RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=1)], rack=None, fenced=False,
        log_dirs=[D1, D2]))
    delta.replay(TopicRecord(name="foo", topic_id=FOO))
    for p in range(n):
        delta.replay(PartitionRecord(partition_id=p, topic_id=FOO, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                                     partition_epoch=0, directories=[directories[p]] if directories else []))
    return delta.apply()


def test_unassigned_partitions_go_to_the_directory_with_the_fewest(tmp_path):
    logs, a, b = _logs(tmp_path)
    publish_image(logs, EMPTY_IMAGE, _image(6), 1, first=True)
    where = [logs.get("foo", p).log_dir for p in range(6)]
    assert where.count(a) == 3 and where.count(b) == 3
    logs.close()


def test_a_controller_assignment_wins_over_the_count(tmp_path):
    logs, a, b = _logs(tmp_path)
    publish_image(logs, EMPTY_IMAGE, _image(4, [D2] * 4), 1, first=True)
    assert {logs.get("foo", p).log_dir for p in range(4)} == {b}
    logs.close()


def test_an_assignment_to_an_unknown_directory_falls_back_to_the_count(tmp_path):
    logs, a, b = _logs(tmp_path)
    publish_image(logs, EMPTY_IMAGE, _image(2, [uuid.UUID(int=77 << 64)] * 2), 1, first=True)
    assert sorted(logs.get("foo", p).log_dir for p in range(2)) == [a, b]
    logs.close()


def test_a_restart_finds_each_partition_in_its_directory(tmp_path):
    logs, a, b = _logs(tmp_path)
    publish_image(logs, EMPTY_IMAGE, _image(4), 1, first=True)
    before = {p: logs.get("foo", p).log_dir for p in range(4)}
    logs.get("foo", 1).log.append(bytearray(build_batch([b"x"], timestamp=1)), leader_epoch=0)
    logs.close()
    again, _, _ = _logs(tmp_path)
    assert {p: again.get("foo", p).log_dir for p in range(4)} == before
    assert again.get("foo", 1).log.end_offset == 1
    again.close()


def test_one_partition_in_two_directories_stops_the_start_in_one_line(tmp_path):
    logs, a, b = _logs(tmp_path)
    logs.create("foo", 0, FOO)
    logs.close()
    os.makedirs(os.path.join(b, "foo-0"))
    with open(os.path.join(b, "foo-0", "partition.metadata"), "w") as f:
        f.write(open(os.path.join(a, "foo-0", "partition.metadata")).read())
    again, _, _ = _logs(tmp_path, open_all=False)
    with pytest.raises(DuplicateLogError) as e:
        again.open_all()
    again.close()
    assert "\n" not in str(e.value) and "foo-0" in str(e.value)


def test_a_failed_directory_goes_offline_and_the_other_keeps_serving(tmp_path):
    errors = []
    logs, a, b = _logs(tmp_path)
    logs.on_dir_error = lambda d, exc: errors.append(d)
    publish_image(logs, EMPTY_IMAGE, image := _image(4), 1, first=True)
    in_a = [p for p in range(4) if logs.get("foo", p).log_dir == a]
    in_b = [p for p in range(4) if logs.get("foo", p).log_dir == b]
    # An I/O error on one log of ``a`` (a flush or append failing) reports the directory.
    logs.get("foo", in_a[0]).log._set_fatal(FatalLogError("EIO"))
    assert errors == [a]
    gone = logs.fail_dir(a, "EIO")
    assert sorted(p for _, p in gone) == in_a
    assert logs.dirs.offline_ids() == [D1]
    for p in in_a:
        assert logs.get("foo", p) is None and logs.is_offline("foo", p)
    for p in in_b:  # the healthy directory still appends
        logs.get("foo", p).log.append(bytearray(build_batch([b"y"], timestamp=1)), leader_epoch=0)
    # The next image does not re-create the failed partitions in the healthy directory.
    changes = publish_image(logs, image, _image(4), 1)
    assert changes.created == [] or all(tp[1] in in_b for tp in changes.created)
    assert all(logs.get("foo", p) is None for p in in_a)
    # New partitions go only to the online directory.
    plog = logs.create("foo", 9, FOO)
    assert plog.log_dir == b
    assert logs.fail_dir(a, "again") == []
    logs.close()
    assert not os.path.exists(os.path.join(a, ".kafka_cleanshutdown"))
    assert os.path.exists(os.path.join(b, ".kafka_cleanshutdown"))


def test_a_checkpoint_write_failure_reports_the_directory(tmp_path):
    errors = []
    logs, a, b = _logs(tmp_path)
    logs.on_dir_error = lambda d, exc: errors.append(d)
    logs.create_many([(("foo", 0), FOO), (("foo", 1), FOO)])
    # The directory replaced by a file: every write below it fails (ENOTDIR), even as root.
    os.rename(a, a + ".gone")
    with open(a, "w") as f:
        f.write("not a directory")
    logs.write_checkpoints()
    assert errors == [a]
    logs.fail_dir(a, "ENOTDIR")
    logs.close()


def test_a_directory_that_cannot_be_opened_is_offline_from_the_start(tmp_path):
    logs, a, b = _logs(tmp_path)
    logs.create_many([(("foo", 0), FOO), (("foo", 1), FOO)])
    logs.close()
    with open(os.path.join(a, "recovery-point-offset-checkpoint"), "w") as f:
        f.write("garbage\n")
    again, _, _ = _logs(tmp_path, open_all=False)
    opened = again.open_all()
    assert [p.log_dir for p in opened] == [b]
    assert again.dirs.offline_ids() == [D1]
    again.close()


def test_the_assigner_reports_each_local_log_the_image_places_elsewhere(tmp_path):
    from kraft.server.directory_assigner import pending
    logs, a, b = _logs(tmp_path)
    publish_image(logs, EMPTY_IMAGE, _image(4), 1, first=True)
    todo = pending(_image(4), logs, 1)  # the image has no directories yet: all four to report
    assert sorted(p for d in todo.values() for ps in d.values() for p in ps) == [0, 1, 2, 3]
    assert set(todo) == {D1, D2}
    shown = [D1 if logs.get("foo", p).log_dir == a else D2 for p in range(4)]
    assert pending(_image(4, shown), logs, 1) == {}
    logs.close()


def test_a_log_that_cannot_be_made_reports_its_directory_and_goes_elsewhere_next(tmp_path):
    errors = []
    logs, a, b = _logs(tmp_path)
    logs.on_dir_error = lambda d, exc: errors.append(d)
    os.rename(a, a + ".gone")  # the disk is gone: making a log there fails
    with open(a, "w") as f:
        f.write("not a directory")
    made = logs.create_many([(("foo", 0), FOO), (("foo", 1), FOO)])
    assert errors == [a] and [p.log_dir for p in made if p is not None] == [b]
    logs.fail_dir(a, "ENOTDIR")
    publish_image(logs, EMPTY_IMAGE, _image(2), 1, first=True)  # the next image: the other log in b
    assert logs.get("foo", 0).log_dir == b and logs.get("foo", 1).log_dir == b
    logs.close()


def test_the_assigner_sends_only_unconfirmed_logs_once_until_the_image_shows_them(tmp_path):
    import asyncio
    from kraft.protocol.messages.assign_replicas_to_dirs import AssignReplicasToDirsResponse
    from kraft.server.directory_assigner import DirectoryAssigner
    logs, a, b = _logs(tmp_path)
    publish_image(logs, EMPTY_IMAGE, _image(4), 1, first=True)
    sent = []

    class Client:
        async def call(self, req, version, deadline_s):
            sent.append(req)
            return AssignReplicasToDirsResponse(throttle_time_ms=0, error_code=0, directories=[])
    image = {"now": _image(4)}
    assigner = DirectoryAssigner(1, logs, lambda: image["now"], lambda: 5, Client())

    async def main():
        assert await assigner._send_once() is False and not sent  # nothing noted yet: nothing looked at
        assigner.note(logs)
        assert await assigner._send_once() is True
        assert sorted(p for d in sent[0].directories for t in d.topics for p in t.partitions) == [0, 1, 2, 3]
        await assigner._send_once()  # not shown yet, sent just now: not sent again
        assert len(sent) == 1
        image["now"] = _image(4, [D1 if logs.get("foo", p).log_dir == a else D2 for p in range(4)])
        assert await assigner._send_once() is False and assigner.unconfirmed == set() and len(sent) == 1
    asyncio.run(main())
    logs.close()
