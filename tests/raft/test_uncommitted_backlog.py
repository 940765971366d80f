"""The leader's uncommitted tail and the bound drivers admit work under (``kraft.raft.backlog``,
issue 38): a leader that accepts proposals faster than a majority acknowledges them stops
accepting new work at ``max_uncommitted_records`` / ``max_uncommitted_bytes`` and accepts again
as commits drain the tail; proposals themselves are never refused (an atomic unit is never cut)."""

import dataclasses

from raft_harness import CONFIG, Replica

from kraft.raft import Commit, rpcs
from kraft.raft.backlog import UncommittedBacklog


def leader(**limits) -> Replica:
    r = Replica(voters=(1, 2, 3), config=dataclasses.replace(CONFIG, append_linger_ms=0, **limits))
    r.elect()
    acknowledge(r, r.log.end_offset())  # the epoch's LeaderChange record
    r.take(Commit)
    return r


def acknowledge(r: Replica, offset: int) -> None:
    """Followers 2 and 3 have flushed everything below ``offset``."""
    r.flush_all()
    for f in (2, 3):
        r.request(f, rpcs.fetch_request(f, r.core.epoch, offset, r.core.epoch, 0))


def test_records_appended_and_accumulated_count_until_committed():
    r = leader()
    assert r.core.uncommitted() == (0, 0) and r.core.accepting_proposals()
    r.core.propose([b"a", b"b"], r.now)
    records, nbytes = r.core.uncommitted()
    assert records == 2 and nbytes > 0  # waiting in the accumulator
    r.advance(1)  # drained into the log, not yet acknowledged
    assert r.core.uncommitted()[0] == 2 and r.core.uncommitted()[1] > 0
    acknowledge(r, r.log.end_offset())
    assert r.core.uncommitted() == (0, 0)


def test_the_leader_stops_accepting_at_the_record_bound_and_accepts_again_as_it_commits():
    r = leader(max_uncommitted_records=5)
    for i in range(4):
        r.core.propose([b"x%d" % i], r.now)
    assert r.core.accepting_proposals()  # 4 < 5
    r.core.propose([b"y", b"z"], r.now)  # a unit crossing the bound is taken whole
    assert r.core.uncommitted()[0] == 6 and not r.core.accepting_proposals()
    r.advance(1)
    acknowledge(r, r.log.end_offset() - 3)  # 3 of the 6 left
    assert r.core.uncommitted()[0] == 3 and r.core.accepting_proposals()


def test_the_leader_stops_accepting_at_the_byte_bound():
    r = leader(max_uncommitted_bytes=1000)
    r.core.propose([b"v" * 400], r.now)
    assert r.core.accepting_proposals()
    r.core.propose([b"w" * 700], r.now)
    r.advance(1)
    assert r.core.uncommitted()[1] >= 1000 and not r.core.accepting_proposals()
    acknowledge(r, r.log.end_offset())
    assert r.core.uncommitted()[1] == 0 and r.core.accepting_proposals()


def test_a_follower_or_a_resigning_leader_accepts_nothing():
    r = leader()
    r.core.resign(r.now)
    assert not r.core.accepting_proposals() and r.core.uncommitted() == (0, 0)
    follower = Replica(voters=(1, 2, 3))
    assert not follower.core.accepting_proposals()


def test_an_append_counts_whole_until_the_high_watermark_passes_its_end():
    b = UncommittedBacklog()
    b.appended(10, 100)
    b.appended(20, 50)
    b.committed(15)  # inside the second append: the first leaves
    assert b.appended_bytes == 50
    b.committed(20)
    assert b.appended_bytes == 0
    assert UncommittedBacklog.records(25, 20) == 5 and UncommittedBacklog.records(3, -1) == 3
