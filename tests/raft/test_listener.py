"""ListenerCursor delivers commits as the listener contract says: whole batches, in order,
gap-free, only below the high watermark; snapshot first when the log prefix is gone; our
own leadership announced only after catching up to the epoch start."""

from kraft.raft import Commit, LeaderAndEpoch, LeaderChange, ListenerCursor, OffsetAndEpoch
from kraft.raft.listener import MIN_READ_BYTES
from kraft.raft.snapshot import SnapshotWriter
from kraft.records import build_batch
from kraft.testing import InMemoryLog


class Recorder:
    def __init__(self):
        self.batches, self.snapshots, self.leaders = [], [], []

    def handle_commit(self, batches):
        self.batches.extend((b.base_offset, b.last_offset) for b in batches)

    def handle_load_snapshot(self, reader):
        self.snapshots.append((reader.snapshot_id, reader.values()))

    def handle_leader_change(self, lae):
        self.leaders.append(lae)


def make_log(*counts):
    log = InMemoryLog()
    for c in counts:
        log.append_as_leader(build_batch([b"v"] * c, timestamp=0), 1)
    log.flush(log.end_offset())
    return log


def test_commits_arrive_whole_in_order_and_only_below_the_high_watermark():
    log = make_log(2, 3, 1)
    rec = Recorder()
    cur = ListenerCursor(rec, log, local_id=1)
    cur.execute(Commit(4))  # the second batch (2-4) ends past 4: not yet
    assert rec.batches == [(0, 1)]
    cur.execute(Commit(6))
    assert rec.batches == [(0, 1), (2, 4), (5, 5)] and cur.next_offset == 6


def test_a_new_listener_starts_from_the_latest_snapshot():
    log = make_log(2, 2, 2)
    log.update_high_watermark(6)
    w = SnapshotWriter(log.create_snapshot(OffsetAndEpoch(4, 1)), 0, 0, lambda sid: log.delete_before_snapshot(sid))
    w.append([b"state"])
    w.freeze()
    assert log.start_offset() == 4
    rec = Recorder()
    cur = ListenerCursor(rec, log, local_id=1)
    cur.execute(Commit(6))
    assert rec.snapshots == [(OffsetAndEpoch(4, 1), [b"state"])]
    assert rec.batches == [(4, 5)]


def test_own_leadership_is_announced_after_catching_up_to_the_epoch_start():
    log = make_log(2, 1)
    rec = Recorder()
    cur = ListenerCursor(rec, log, local_id=1)
    cur.execute(LeaderChange(LeaderAndEpoch(1, 2), epoch_start_offset=3))
    assert rec.leaders == []
    cur.execute(Commit(2))
    assert rec.leaders == []
    cur.execute(Commit(3))
    assert rec.leaders == [LeaderAndEpoch(1, 2)]


def test_other_leaders_are_announced_at_once_and_only_on_change():
    rec = Recorder()
    cur = ListenerCursor(rec, make_log(1), local_id=1)
    cur.execute(LeaderChange(LeaderAndEpoch(2, 1)))
    cur.execute(LeaderChange(LeaderAndEpoch(2, 1)))
    assert rec.leaders == [LeaderAndEpoch(2, 1)]


class ReadSizes:
    """A log port that records the size of every read and what each returned."""

    def __init__(self, log):
        self.log, self.asked, self.returned = log, [], []

    def __getattr__(self, name):
        return getattr(self.log, name)

    def read(self, offset, max_bytes):
        data = self.log.read(offset, max_bytes)
        self.asked.append(max_bytes)
        self.returned.append(len(data))
        return data


def test_reads_are_sized_to_what_committed_not_to_the_tail_in_flight():
    """Past the high watermark the log holds every write in flight (megabytes under load); a
    read of the tail copies what it returns. Once the cursor knows the bytes per offset, it
    asks for about what committed: one 300-byte record per commit reads about 300 bytes plus
    the floor, never the 4 MB behind it, and every commit still arrives whole."""
    value = b"v" * 300
    log = InMemoryLog()
    for _ in range(14_000):  # ~4.5 MB
        log.append_as_leader(build_batch([value], timestamp=0), 1)
    log.flush(log.end_offset())
    sizes = ReadSizes(log)
    rec = Recorder()
    cur = ListenerCursor(rec, sizes, local_id=1)
    for up_to in range(1, 400):
        cur.execute(Commit(up_to))
    assert rec.batches == [(i, i) for i in range(399)]
    # the first read knows nothing yet; every later one asks for the floor
    assert max(sizes.asked[1:]) == MIN_READ_BYTES
    assert max(sizes.returned[1:]) <= 64 * 1024 and len(sizes.asked) == 399
    cur.execute(Commit(10_399))  # a burst of 10,000 commits: sized to them, not to 8 MB
    assert rec.batches[-1] == (10_398, 10_398)
    per_record = len(build_batch([value], timestamp=0))
    assert sum(sizes.returned[399:]) < 10_000 * per_record * 1.3 + 64 * 1024


def test_a_batch_larger_than_the_sized_read_still_arrives_whole():
    """Reads sized from small records ask for less than a large batch: the log returns the
    whole first batch anyway, so the large one is delivered, not stalled on."""
    log = InMemoryLog()
    for _ in range(50):
        log.append_as_leader(build_batch([b"s" * 100], timestamp=0), 1)
    log.append_as_leader(build_batch([b"L" * 300_000], timestamp=0), 1)  # offset 50
    log.append_as_leader(build_batch([b"s" * 100] * 3, timestamp=0), 1)  # 51-53
    log.flush(log.end_offset())
    rec = Recorder()
    cur = ListenerCursor(rec, log, local_id=1)
    for up_to in range(1, 51):
        cur.execute(Commit(up_to))
    cur.execute(Commit(54))
    assert rec.batches[-2:] == [(50, 50), (51, 53)] and cur.next_offset == 54
