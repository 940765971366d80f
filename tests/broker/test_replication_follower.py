"""The follower half of replication (replication design V3 section G, Kafka's
ReplicaFetcherThread): the fetcher state machine on its own (requests, DivergingEpoch
truncation offsets from the local epoch checkpoint, error back-off, leader changes from the
image), then two and three real brokers' logs in one process — leader FetchHandler, follower
ReplicaFetcher, effects applied to real segment files — including seed 003's "multiple
leaders in transition" cases."""

from __future__ import annotations

import uuid

from kraft.broker.broker_state import BrokerState
from kraft.broker.fetch_handler import FetchHandler
from kraft.broker.follower_log import LocalReplicas, apply_fetch_effects
from kraft.broker.image_publisher import publish_image
from kraft.broker.partition_logs import PartitionLogs
from kraft.broker.replica_fetcher import (AppendAsFollower, ReplicaFetcher, ReplicaFetchers, Truncate,
                                          UpdateHighWatermark, fetcher_id, java_string_hash)
from kraft.errors import ErrorCode
from kraft.log.config import LogConfig
from kraft.metadata import MetadataDelta, PartitionRecord, TopicRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.metadata.records import PartitionChangeRecord
from kraft.protocol import EncodedParts, FetchResponse, encode_request
from kraft.records import build_batch, iter_batches

E = ErrorCode
TID = uuid.UUID(int=42)
TP = ("t", 0)
R = FetchResponse


# --- the fetcher on its own ---------------------------------------------------------------------------
class FakeLocal:
    def __init__(self, end=0, epochs=((0, 0),), hw=0, start=0):
        self.end, self.epochs, self.hw, self.start = end, list(epochs), hw, start  # epochs: (epoch, start offset)

    def has(self, tp) -> bool:
        return True

    def end_offset(self, tp):
        return self.end

    def start_offset(self, tp):
        return self.start

    def latest_epoch(self, tp):
        return self.epochs[-1][0] if self.epochs else None

    def position(self, tp):
        return self.end_offset(tp), self.start_offset(tp), self.latest_epoch(tp)

    def high_watermark(self, tp):
        return self.hw

    def end_offset_for_epoch(self, tp, epoch):  # Kafka's endOffsetFor
        below = [(e, s) for e, s in self.epochs if e <= epoch]
        if not below:
            return -1, -1
        e = below[-1][0]
        later = [s for e2, s in self.epochs if e2 > e]
        return (later[0] if later else self.end), e


def answer(code=0, hw=0, records=None, diverging=None, log_start=0, topic_id=TID, partition=0):
    part = R.Topic.Partition(partition_index=partition, error_code=code, high_watermark=hw, last_stable_offset=hw,
                             log_start_offset=log_start, aborted_transactions=None, preferred_read_replica=-1,
                             records=records)
    if diverging is not None:
        part.diverging_epoch = R.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])
    return R(throttle_time_ms=0, error_code=0, session_id=0, responses=[R.Topic(topic_id=topic_id, partitions=[part])])


def fetcher(local, **kw):
    f = ReplicaFetcher(2, 1, 0, local, backoff_ms=1000, **kw)
    f.add_or_update(TP, TID, 5)
    return f


def test_the_fetch_names_offset_last_epoch_leader_epoch_and_replica_and_one_is_in_flight():
    f = fetcher(FakeLocal(end=30, epochs=[(3, 0), (4, 20)]))
    req = f.poll(0)
    (t,) = req.topics
    (p,) = t.partitions
    assert req.replica_id == 2
    assert (t.topic_id, p.fetch_offset, p.last_fetched_epoch, p.current_leader_epoch) == (TID, 30, 4, 5)
    assert f.poll(1) is None
    encode_request(req, f.version, 1, "t")  # sendable as built (the codec refuses fields a version lacks)


def test_from_fetch_v15_the_replica_is_named_by_replica_state():
    f = fetcher(FakeLocal(end=30, epochs=[(3, 0), (4, 20)]), version=15)
    req = f.poll(0)
    assert req.replica_state.replica_id == 2
    encode_request(req, 15, 1, "t")


def test_data_becomes_an_append_then_the_leaders_hw():
    f = fetcher(FakeLocal(end=0))
    f.poll(0)
    recs = build_batch([b"a"])
    effects = f.on_response(answer(hw=7, records=recs), 1)
    assert effects == [AppendAsFollower(TP, recs), UpdateHighWatermark(TP, 7)]


def test_diverging_epoch_truncates_to_the_leaders_end_of_an_epoch_both_have():
    """KIP-101/KIP-320: follower holds epoch 4 up to 30; the leader's epoch 4 ended at 25."""
    f = fetcher(FakeLocal(end=30, epochs=[(3, 0), (4, 20)]))
    f.poll(0)
    assert f.on_response(answer(diverging=(4, 25)), 1) == [Truncate(TP, 25)]


def test_diverging_epoch_the_follower_never_had_truncates_to_its_own_end_of_the_epoch_before():
    f = fetcher(FakeLocal(end=30, epochs=[(2, 0), (4, 20)]))
    f.poll(0)
    # the leader's answer names epoch 3 (ending at 27); we have no epoch 3: cut to the end of our
    # epoch 2 (20) and ask again with epoch 2
    assert f.on_response(answer(diverging=(3, 27)), 1) == [Truncate(TP, 20)]


def test_fenced_leader_epoch_parks_the_partition_until_the_image_brings_a_newer_epoch():
    f = fetcher(FakeLocal())
    f.poll(0)
    assert f.on_response(answer(code=E.FENCED_LEADER_EPOCH), 1) == []
    assert f.poll(10**9) is None
    f.add_or_update(TP, TID, 6)
    assert f.poll(2).topics[0].partitions[0].current_leader_epoch == 6


def test_errors_back_off_the_partition_and_a_lost_request_backs_off_all():
    f = fetcher(FakeLocal())
    f.poll(0)
    f.on_response(answer(code=E.NOT_LEADER_OR_FOLLOWER), 100)
    assert f.poll(1099) is None and f.poll(1100) is not None
    f.on_failure(2000)
    assert f.poll(2999) is None and f.next_ready_ms() == 3000 and f.poll(3000) is not None


def test_an_answer_from_before_a_leader_change_is_not_appended():
    f = fetcher(FakeLocal())
    f.poll(0)
    f.add_or_update(TP, TID, 6)  # the image moved on while the request was out
    assert f.on_response(answer(records=build_batch([b"old leader"])), 1) == []


def test_fetcher_ids_follow_kafkas_hash():
    assert java_string_hash("test") == 3556498  # Java's "test".hashCode()
    assert fetcher_id("test", 0, 3) == (31 * 3556498) % 3
    assert {fetcher_id("t", p, 4) for p in range(8)} == {0, 1, 2, 3}


def _image(leader=1, isr=(1, 2, 3), replicas=(1, 2, 3), changes=()):
    d = MetadataDelta(EMPTY_IMAGE)
    d.replay(TopicRecord(name="t", topic_id=TID))
    d.replay(PartitionRecord(partition_id=0, topic_id=TID, replicas=list(replicas), isr=list(isr),
                             removing_replicas=[], adding_replicas=[], leader=leader, leader_epoch=1,
                             partition_epoch=1))
    for c in changes:
        d.replay(c)
    return d.apply()


def test_fetchers_follow_leader_changes_and_a_new_leader_stops_fetching():
    fs = ReplicaFetchers(2, FakeLocal(), num_fetchers=2)
    fs.on_image(_image(leader=1))
    (key,) = fs.fetchers
    assert key[0] == 1 and TP in fs.fetchers[key].partitions
    moved = _image(leader=1, changes=[PartitionChangeRecord(partition_id=0, topic_id=TID, leader=3)])
    fs.on_image(moved)
    assert [k[0] for k in fs.fetchers] == [3] and fs.fetchers[fs.assigned[TP]].partitions[TP].leader_epoch == 2
    led = _image(leader=1, changes=[PartitionChangeRecord(partition_id=0, topic_id=TID, leader=2)])
    assert fs.on_image(led) == [TP] and fs.fetchers == {} and fs.assigned == {}


# --- real logs, in one process ------------------------------------------------------------------------
class Broker:
    def __init__(self, tmp_path, broker_id, image):
        self.logs = PartitionLogs([str(tmp_path / f"b{broker_id}")], LogConfig())
        self.state = BrokerState(broker_id, self.logs)
        self.state.replication.clock_ms = lambda: self.now
        self.now = 0
        self.publish(image)
        self.fetch = FetchHandler(self.state)
        self.fetchers = ReplicaFetchers(broker_id, LocalReplicas(self.logs), max_wait_ms=0)

    def publish(self, image):
        publish_image(self.logs, self.state.image, image, self.state.broker_id)
        self.state.image = image

    @property
    def plog(self):
        return self.logs.get(*TP)

    def append(self, n, epoch):
        self.plog.log.append(bytearray(build_batch([b"e%d-%d" % (epoch, i) for i in range(n)])),
                             assign_offsets=True, leader_epoch=epoch)

    def values(self):
        data = bytes(self.plog.log.read(self.plog.log.start_offset, 1 << 20)) if self.plog.log.end_offset else b""
        return [(r.offset, r.value) for b in iter_batches(data) for r in b]

    def close(self):
        self.logs.close()


def _round(follower, leaders: dict, now: int = 0) -> list:
    """One fetch from ``follower`` to each leader it follows, over the encoded wire form."""
    effects_all = []
    for (leader_id, _), f in list(follower.fetchers.fetchers.items()):
        if leader_id not in leaders:
            continue  # not reachable in this scenario
        req = f.poll(now)
        if req is None:
            continue
        out = leaders[leader_id].fetch.handle(req, 13)
        body = b"".join(bytes(p) for p in out) if isinstance(out, EncodedParts) else out.encode(13)
        effects = f.on_response(FetchResponse.decode(body, 13), now)
        apply_fetch_effects(follower.logs, effects, follower.state.producer_states)
        effects_all += effects
    return effects_all


def test_a_follower_copies_the_leader_and_the_leaders_hw_follows_the_isr(tmp_path):
    image = _image(isr=(1, 2), replicas=(1, 2))
    a, b = Broker(tmp_path, 1, image), Broker(tmp_path, 2, image)
    try:
        a.append(10, 1)
        assert a.state.advance_high_watermark(a.plog, image.topics.by_name["t"].partitions[0]) == 0
        b.fetchers.on_image(image)
        _round(b, {1: a})  # gets 0..9
        assert b.plog.log.end_offset == 10 and a.plog.high_watermark == 0
        _round(b, {1: a})  # the fetch at 10 tells the leader: HW 10
        assert a.plog.high_watermark == 10
        _round(b, {1: a})
        assert b.plog.high_watermark == 10 and b.values() == a.values()
    finally:
        a.close()
        b.close()


def test_a_follower_truncates_its_divergent_suffix_by_the_leaders_diverging_epoch(tmp_path):
    """Broker 2 led epoch 1 and wrote 0..14 but only 0..9 reached broker 1, which now leads
    epoch 2 and wrote 10..12. Broker 2 must drop 10..14 and take the leader's 10..12."""
    image = _image(leader=1, isr=(1, 2), replicas=(1, 2),
                   changes=[PartitionChangeRecord(partition_id=0, topic_id=TID, leader=1)])  # epoch 2
    a, b = Broker(tmp_path, 1, image), Broker(tmp_path, 2, image)
    try:
        a.append(10, 1)
        a.append(3, 2)
        b.append(10, 1)
        b.append(5, 1)
        b.fetchers.on_image(image)
        effects = _round(b, {1: a})
        assert effects == [Truncate(TP, 10)]
        assert b.plog.log.end_offset == 10
        _round(b, {1: a})
        assert b.values() == a.values() and b.plog.log.latest_epoch == 2
    finally:
        a.close()
        b.close()


def test_seed003_a_deposed_leader_commits_nothing_the_new_leader_lacks(tmp_path):
    """Seed 003 section 3: A (1) led epoch 1 with ISR {1,2,3}; the controller made B (2) leader
    in epoch 2 with ISR {2,3}. A has not seen the change and takes a write; B and C never fetch
    it (B stopped fetching on becoming leader, C follows B), so A's HW stays; A's stale-epoch
    fetches to B are fenced; once A sees the image it truncates the write away."""
    old = _image(leader=1)
    new = _image(leader=1, changes=[PartitionChangeRecord(partition_id=0, topic_id=TID, leader=2, isr=[2, 3])])
    a, b, c = (Broker(tmp_path, i, old) for i in (1, 2, 3))
    try:
        a.append(5, 1)
        for f in (b, c):
            f.fetchers.on_image(old)
            _round(f, {1: a})
            _round(f, {1: a})
        assert a.plog.high_watermark == 5
        for f in (b, c):
            f.publish(new)
            f.fetchers.on_image(new)
        # the new leader fetches no partition (a fetcher may remain only to close its session)
        assert not any(f.partitions for f in b.fetchers.fetchers.values())
        b.append(2, 2)  # B's own write in epoch 2: offsets 5, 6
        a.append(3, 1)  # A still believes it leads: 7 offsets... 5..7 in epoch 1
        _round(c, {2: b})
        _round(c, {2: b})
        reg_a = old.topics.by_name["t"].partitions[0]
        assert a.state.advance_high_watermark(a.plog, reg_a) == 5  # nobody fetched A's 5..7
        assert b.state.advance_high_watermark(b.plog, new.topics.by_name["t"].partitions[0]) == 7
        # A's fetcher is still on the old epoch when it first asks B: fenced, nothing changes
        stale = ReplicaFetcher(1, 2, 0, LocalReplicas(a.logs), max_wait_ms=0)
        stale.add_or_update(TP, TID, 1)
        out = b.fetch.handle(stale.poll(0), 13)
        (p,) = FetchResponse.decode(out.encode(13), 13).responses[0].partitions
        assert p.error_code == E.FENCED_LEADER_EPOCH and b.plog.high_watermark == 7
        # A learns the image: follower of B in epoch 2; its epoch-1 suffix 5..7 diverges
        a.publish(new)
        a.fetchers.on_image(new)
        assert a.state.local_leader("t", 0)[0] == E.NOT_LEADER_OR_FOLLOWER  # no more writes on A
        assert _round(a, {2: b}) == [Truncate(TP, 5)]
        _round(a, {2: b})
        assert a.values() == b.values() == c.values()
        assert [v for _, v in a.values()][5:] == [b"e2-0", b"e2-1"]
    finally:
        for x in (a, b, c):
            x.close()
