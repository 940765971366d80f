"""AlterReplicaLogDirs' replica move between two log dirs of one broker (Kafka's
ReplicaAlterLogDirsManager): a future log is filled while appends go on, then swapped in one
step; the bytes on disk are the same afterwards; a stop mid-move leaves the current log and
removes the copy; Kafka's error codes for what cannot move."""

from __future__ import annotations

import glob
import os
import uuid

from kraft.broker.log_dir_states import LogDirStates
from kraft.broker.partition_logs import PartitionLogs
from kraft.broker.replica_moves import ReplicaMoves
from kraft.errors import ErrorCode as E
from kraft.log import LogConfig
from kraft.log.log_reads import read_bytes
from kraft.records import build_batch

FOO = uuid.UUID(int=0xF00)
D1, D2 = uuid.UUID(int=0xD1D1 << 64), uuid.UUID(int=0xD2D2 << 64)


class Steps:
    """A scheduler run by hand: the test decides when the mover's next step runs."""

    def __init__(self):
        self.queue = []

    def __call__(self, delay, fn):
        self.queue.append(fn)

    def run(self, n=None):
        done = 0
        while self.queue and (n is None or done < n):
            self.queue.pop(0)()
            done += 1
        return done


def _setup(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    logs = PartitionLogs([a, b], LogConfig(append_linger_ms=0.0, segment_bytes=4096),
                         dir_states=LogDirStates([a, b], {a: D1, b: D2}))
    logs.open_all()
    steps = Steps()
    moved = []
    logs.moves = ReplicaMoves(logs, steps, on_moved=moved.append)
    return logs, a, b, steps, moved


def _append(plog, i, n=5, epoch=0):
    plog.log.append(bytearray(build_batch([b"record-%d-%d" % (i, k) * 8 for k in range(n)], timestamp=1000 + i)),
                    leader_epoch=epoch)


def _disk_bytes(directory):
    return b"".join(open(p, "rb").read() for p in sorted(glob.glob(os.path.join(directory, "*.log"))))


def _all(log):
    out, offset = [], log.start_offset
    while offset < log.end_offset:
        chunk = bytes(read_bytes(log, offset, 1 << 20))
        out.append(chunk)
        offset = log.end_offset if not chunk else _next_offset(chunk)
    return b"".join(out)


def _next_offset(chunk):
    from kraft.records import iter_batches
    last = list(iter_batches(chunk))[-1]
    return last.base_offset + last.last_offset_delta + 1


def test_a_move_copies_while_appends_go_on_then_swaps_with_equal_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr("kraft.broker.replica_moves.CHUNK_BYTES", 2048)  # many steps
    logs, a, b, steps, moved = _setup(tmp_path)
    plog = logs.create("foo", 0, FOO)
    old_dir = plog.directory
    assert plog.log_dir == a
    for i in range(60):  # several segments
        _append(plog, i)
    assert len(plog.log.segments) > 3
    assert logs.moves.request("foo", 0, b) == E.NONE
    future = logs.moves.moves[("foo", 0)].future
    for i in range(60, 70):  # appends between copy steps, a new leader epoch among them
        steps.run(1)
        _append(plog, i, epoch=0 if i < 65 else 3)
    assert not moved and future.end_offset > 0  # copying, not done
    assert plog.log_dir == a
    plog.log.assign_epoch_start(4)  # a new leader's epoch with no batch yet
    plog.log.flush()
    expected = _all(plog.log)
    steps.run()
    assert moved == [plog] and plog.log_dir == b and plog.directory == os.path.join(b, "foo-0")
    assert logs.get("foo", 0) is plog and future.closed
    assert _all(plog.log) == expected == _disk_bytes(plog.directory)
    assert plog.log.end_offset == 70 * 5 and plog.log.latest_epoch == 4
    assert plog.log.end_offset_for_epoch(0).offset == 65 * 5
    assert not os.path.exists(old_dir)
    _append(plog, 70, epoch=4)  # the moved log takes appends
    logs.wait_for_deletions()
    assert not [n for n in os.listdir(a) if n.startswith("foo-0")]
    logs.close()
    again = PartitionLogs([a, b], LogConfig(append_linger_ms=0.0, segment_bytes=4096),
                          dir_states=LogDirStates([a, b], {a: D1, b: D2}))
    again.open_all()  # the restart finds it in b only
    assert again.get("foo", 0).log_dir == b and again.get("foo", 0).log.end_offset == 71 * 5
    again.close()


def test_a_move_follows_truncation_of_the_current_log(tmp_path, monkeypatch):
    monkeypatch.setattr("kraft.broker.replica_moves.CHUNK_BYTES", 2048)
    logs, a, b, steps, moved = _setup(tmp_path)
    plog = logs.create("foo", 0, FOO)
    for i in range(40):
        _append(plog, i)
    logs.moves.request("foo", 0, b)
    steps.run(1)
    plog.log.truncate_to(100)  # a follower's divergence under the copy
    for i in range(40, 45):
        _append(plog, i, epoch=2)
    steps.run()
    assert moved == [plog] and plog.log_dir == b
    assert plog.log.end_offset == 125 and plog.log.epoch_for_offset(110) == 2
    logs.close()


def test_a_move_cut_short_by_a_stop_is_resumed_at_the_next_start(tmp_path, monkeypatch):
    monkeypatch.setattr("kraft.broker.replica_moves.CHUNK_BYTES", 2048)
    logs, a, b, steps, moved = _setup(tmp_path)
    plog = logs.create("foo", 0, FOO)
    other = logs.create("foo", 1, FOO)
    for i in range(40):
        _append(plog, i)
    logs.moves.request("foo", 0, b)
    steps.run(2)
    assert not moved and [n for n in os.listdir(b) if n.endswith("-future")]
    # A copy of a partition this broker no longer has, left by an older stop.
    os.makedirs(os.path.join(a, "gone-3.0123456789abcdef0123456789abcdef-future"))
    logs.close()  # a stop without finishing the move (the future log's files stay)
    expected = _disk_bytes(os.path.join(a, "foo-0"))
    again = PartitionLogs([a, b], LogConfig(append_linger_ms=0.0, segment_bytes=4096),
                          dir_states=LogDirStates([a, b], {a: D1, b: D2}))
    again.open_all()
    steps = Steps()
    again.moves = ReplicaMoves(again, steps, on_moved=moved.append)
    assert again.moves.resume() == 1
    assert again.get("foo", 0).log_dir == a and again.get("foo", 0).log.end_offset == 200  # serving meanwhile
    steps.run()
    again.wait_for_deletions()
    plog = again.get("foo", 0)
    assert moved == [plog] and plog.log_dir == b and _disk_bytes(plog.directory) == expected
    assert not [n for n in os.listdir(a) if n.startswith(("foo-0", "gone-3"))]
    assert again.get("foo", 1).log_dir == other.log_dir
    again.close()


def test_what_cannot_move_gets_kafkas_error_codes(tmp_path):
    logs, a, b, steps, moved = _setup(tmp_path)
    logs.create("foo", 0, FOO)
    assert logs.moves.request("foo", 0, str(tmp_path / "elsewhere")) == E.LOG_DIR_NOT_FOUND
    assert logs.moves.request("foo", 1, b) == E.REPLICA_NOT_AVAILABLE
    assert logs.moves.request("foo", 0, a) == E.NONE and not logs.moves.moves  # already there
    logs.fail_dir(b, "EIO")
    assert logs.moves.request("foo", 0, b) == E.KAFKA_STORAGE_ERROR
    logs.close()
