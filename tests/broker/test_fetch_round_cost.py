"""A replication round costs what changed, not what a follower's fetch session holds: a parked
follower fetch woken by one partition reads that one again, and a caught-up partition of an
idle session skips the full read while everything it depends on is unchanged (the same image,
log end, fetch position, leader state). Each test counts the reads a broken shortcut would
make, or shows the effect a wrong shortcut would lose (leader-epoch fencing, ISR expansion,
the follower staying caught up)."""

from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace

import pytest

from kraft.broker.broker_state import BrokerLimits, BrokerState
from kraft.broker.handlers import BrokerHandlers
from kraft.broker.image_publisher import publish_image
from kraft.broker.partition_logs import PartitionLogs
from kraft.errors import ErrorCode
from kraft.log import LogConfig
from kraft.metadata import MetadataDelta, PartitionChangeRecord, PartitionRecord, TopicRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.protocol import FetchRequest
from kraft.records import build_batch

from tests.broker.test_broker_handlers import _broker, decoded, produce, values

F = FetchRequest
MANY = uuid.UUID(int=77)
N = 200  # partitions led here, each shared with follower 3


def _image(isr=(1, 3)):
    d = MetadataDelta(EMPTY_IMAGE)
    for b in (1, 2, 3):
        d.replay(_broker(b))
    d.replay(TopicRecord(name="many", topic_id=MANY))
    for p in range(N):
        d.replay(PartitionRecord(partition_id=p, topic_id=MANY, replicas=[1, 3], isr=list(isr), leader=1,
                                 leader_epoch=0, partition_epoch=0))
    return d.apply()


class Leader:
    def __init__(self, tmp_path, isr=(1, 3)):
        self.logs = PartitionLogs([str(tmp_path)], LogConfig(append_linger_ms=0.0))
        self.state = BrokerState(1, self.logs, cluster_id="cid", limits=BrokerLimits())
        self.now = int(time.time() * 1000)  # records are stamped with the wall clock
        self.handlers = BrokerHandlers(self.state, clock_ms=lambda: self.now)
        self.state.replication.clock_ms = lambda: self.now
        image = _image(isr)
        publish_image(self.logs, EMPTY_IMAGE, image, 1)
        self.state.image = image
        self.logs.on_flushed = None
        self.reads = {"all": 0, "slow": 0}
        fh = self.handlers.fetch
        entry, slow = fh._read_entry, fh._read_slow

        def counted_entry(*a, **kw):
            self.reads["all"] += 1
            return entry(*a, **kw)

        def counted_slow(*a, **kw):
            self.reads["slow"] += 1
            return slow(*a, **kw)
        fh._read_entry, fh._read_slow = counted_entry, counted_slow

    def set_image(self, image):
        publish_image(self.logs, self.state.image, image, 1)
        self.state.image = image
        self.handlers.fetch.wake_all()

    def call(self, request, version=13):
        ctx = SimpleNamespace(header=SimpleNamespace(api_version=version), listener="PLAINTEXT")
        return self.handlers.handle(ctx, request)

    def fetch(self, offsets=None, *, session_id=0, epoch=0, max_wait_ms=0, min_bytes=0, leader_epoch=-1):
        """A follower 3 Fetch (v13); ``offsets``: {partition: fetch offset} to send."""
        parts = [F.Topic.Partition(partition=p, current_leader_epoch=leader_epoch, fetch_offset=o,
                                   last_fetched_epoch=0 if o else -1, partition_max_bytes=1 << 20)
                 for p, o in sorted((offsets or {}).items())]
        return F(replica_id=3, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0,
                 session_id=session_id, session_epoch=epoch,
                 topics=[F.Topic(topic_id=MANY, partitions=parts)] if parts else [], forgotten_topics_data=[])

    def close(self):
        self.handlers.close()
        self.logs.close()


@pytest.fixture
def leader(tmp_path):
    b = Leader(tmp_path)
    yield b
    b.close()


def answered(resp) -> dict:
    return {p.partition_index: p for t in decoded(resp, version=13).responses for p in t.partitions}


def run(coro):
    return asyncio.new_event_loop().run_until_complete(coro)


def _session(leader) -> int:
    """A follower session over all N partitions, every one caught up at 0."""
    resp = decoded(leader.call(leader.fetch({p: 0 for p in range(N)})), version=13)
    assert resp.error_code == 0 and resp.session_id > 0
    return resp.session_id


def _woken_by_one_append(leader, sid: int, epoch: int, partition: int):
    """A follower fetch parked on session ``sid``, then one append to ``partition``: what the
    fetch answered, and the partition reads that cost from the append on."""
    async def go():
        parked = leader.call(leader.fetch(session_id=sid, epoch=epoch, max_wait_ms=10_000, min_bytes=1))
        assert asyncio.isfuture(parked) and not parked.done()
        before = leader.reads["all"]
        leader.call(produce(build_batch([b"hot"]), topic="many", partition=partition), 9)
        got = answered(await parked)
        return got, leader.reads["all"] - before
    return run(go())


def test_a_parked_follower_fetch_woken_by_one_partition_reads_that_one_again(leader):
    sid = _session(leader)
    got, reads = _woken_by_one_append(leader, sid, 1, 7)
    assert list(got) == [7] and values(got[7].records) == [b"hot"]
    assert reads <= 2, f"the wake re-read {reads} partitions of {N} (only partition 7 changed)"


def test_a_parked_fetch_keeps_what_it_found_and_adds_what_wakes_it(leader):
    """min_bytes above one batch: the first append does not answer; the second does, with both
    partitions' records (the first partition's read is kept, not lost or read twice)."""
    sid = _session(leader)
    one = build_batch([b"x" * 200])
    need = 2 * len(one) - 10

    async def go():
        parked = leader.call(leader.fetch(session_id=sid, epoch=1, max_wait_ms=10_000, min_bytes=need))
        leader.call(produce(build_batch([b"x" * 200]), topic="many", partition=3), 9)
        await asyncio.sleep(0.01)
        assert not parked.done(), "answered below min_bytes"
        leader.call(produce(build_batch([b"y" * 200]), topic="many", partition=150), 9)
        return answered(await parked)
    got = run(go())
    assert sorted(got) == [3, 150]
    assert values(got[3].records) == [b"x" * 200] and values(got[150].records) == [b"y" * 200]


def test_an_idle_session_fetch_reads_nothing_and_keeps_the_follower_caught_up(leader):
    sid = _session(leader)
    assert leader.call(leader.fetch(session_id=sid, epoch=1)) is not None  # notes taken on a full read
    leader.now += 25_000
    reads = leader.reads["all"]
    resp = decoded(leader.call(leader.fetch(session_id=sid, epoch=2)), version=13)
    assert resp.error_code == 0 and resp.responses == []
    assert leader.reads["all"] == reads, "a quiet partition of an idle session was read"
    leader.now += 20_000  # 45 s after the first fetch, 20 s after the last: within the lag
    assert leader.state.replication.tick(leader.logs) == 0
    # An append wakes that partition only; the follower's last request (20 s ago) counts as
    # caught up at the log end of then, so the new log end does not make it lag at once.
    leader.call(produce(build_batch([b"new"]), topic="many", partition=42), 9)
    st = leader.state.replication.states[("many", 42)]
    assert st.followers[3].last_caught_up_ms == leader.now - 20_000
    assert leader.state.replication.tick(leader.logs) == 0, "a quiet follower was dropped from the ISR"
    reads = leader.reads["all"]
    got = answered(leader.call(leader.fetch(session_id=sid, epoch=3)))
    assert list(got) == [42] and values(got[42].records) == [b"new"]
    assert leader.reads["all"] - reads == 1


def test_a_woken_quiet_partition_joins_a_parked_fetch_that_did_not_read_it(leader):
    """The parked request read nothing (every partition quiet): an append to one answers it
    with that partition's records, having read only that one."""
    sid = _session(leader)
    leader.call(leader.fetch(session_id=sid, epoch=1))  # the full read that takes the notes
    got, reads = _woken_by_one_append(leader, sid, 2, 77)
    assert list(got) == [77] and values(got[77].records) == [b"hot"]
    assert reads == 1


def test_a_partition_woken_between_two_requests_is_read_by_the_next_one(leader):
    """The first append answers the parked fetch; the second wakes a quiet partition while no
    request is parked: the next request must bring its records."""
    sid = _session(leader)
    leader.call(leader.fetch(session_id=sid, epoch=1))

    async def go():
        parked = leader.call(leader.fetch({5: 0}, session_id=sid, epoch=2, max_wait_ms=10_000, min_bytes=1))
        leader.call(produce(build_batch([b"a"]), topic="many", partition=5), 9)
        first = answered(await parked)
        leader.call(produce(build_batch([b"b"]), topic="many", partition=6), 9)  # woken, nobody parked
        second = answered(leader.call(leader.fetch({5: 1}, session_id=sid, epoch=3)))
        return first, second
    first, second = run(go())
    assert list(first) == [5]
    assert 6 in second and values(second[6].records) == [b"b"]


def test_retention_or_a_new_log_moves_the_generation_and_every_partition_is_looked_at(leader):
    """Retention moves a log start without waking anyone: PartitionLogs.changes tells the
    handler its quiet notes are not to be trusted, and each partition is checked again."""
    sid = _session(leader)
    leader.call(leader.fetch(session_id=sid, epoch=1))
    fh = leader.handlers.fetch
    looked, still_idle = [0], fh._still_idle

    def counted(*a):
        looked[0] += 1
        return still_idle(*a)
    fh._still_idle = counted
    leader.call(leader.fetch(session_id=sid, epoch=2))
    assert looked[0] == 0
    leader.logs.changes += 1  # what PartitionLogs does when retention cuts a log
    leader.call(leader.fetch(session_id=sid, epoch=3))
    assert looked[0] == N
    leader.call(leader.fetch(session_id=sid, epoch=4))
    assert looked[0] == N  # quiet again


def test_a_new_image_ends_the_shortcut_so_a_stale_leader_epoch_is_fenced(leader):
    resp = decoded(leader.call(leader.fetch({p: 0 for p in range(N)}, leader_epoch=0)), version=13)
    sid = resp.session_id
    assert decoded(leader.call(leader.fetch(session_id=sid, epoch=1)), version=13).responses == []
    d = MetadataDelta(leader.state.image)
    d.replay(PartitionChangeRecord(partition_id=9, topic_id=MANY, leader=1, isr=[1, 3], leader_recovery_state=0))
    leader.set_image(d.apply())
    assert leader.state.image.topics.by_id[MANY].partitions[9].leader_epoch == 1
    got = answered(leader.call(leader.fetch(session_id=sid, epoch=2)))
    assert got[9].error_code == ErrorCode.FENCED_LEADER_EPOCH


def test_a_follower_out_of_the_isr_is_read_in_full_so_it_can_rejoin(tmp_path):
    b = Leader(tmp_path, isr=(1,))
    try:
        sid = _session(b)
        states = [b.state.replication.states[("many", p)] for p in range(N)]
        assert all(st.pending is not None for st in states)  # proposed back on the first fetch
        for st in states:  # the controller refuses (as it may); the next fetch must propose again
            st.on_alter_partition_result(int(ErrorCode.INELIGIBLE_REPLICA))
        b.state.replication._queued.clear()
        slow = b.reads["slow"]
        b.call(b.fetch(session_id=sid, epoch=1))
        assert b.reads["slow"] - slow == N  # no shortcut outside the ISR
        assert len(b.state.replication._queued) == N and all(st.pending is not None for st in states)
    finally:
        b.close()
