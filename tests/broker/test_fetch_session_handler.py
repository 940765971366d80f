"""Fetch sessions (KIP-227) through the broker's Fetch handler over real partition logs:
consumers and followers, immediate and parked (long-poll) fetches, every Fetch version that
has session fields (7+). The answers are decoded as a client would decode them."""

from __future__ import annotations

import asyncio

import pytest

from kraft.errors import ErrorCode
from kraft.metadata import MetadataDelta, PartitionChangeRecord
from kraft.protocol import FetchRequest
from kraft.records import build_batch

from tests.broker.test_broker_handlers import BAR, FOO, Broker, decoded, produce, run, values

E = ErrorCode
F = FetchRequest
IDS = {"foo": FOO, "bar": BAR}


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def fetch(parts=(), *, version=13, session_id=0, epoch=0, forget=(), replica=-1, max_wait_ms=0, min_bytes=0):
    """``parts``: (topic, partition, fetch offset); ``forget``: (topic, partition)."""
    named = version < 13
    topics: dict = {}
    for topic, p, offset in parts:
        topics.setdefault(topic, []).append(F.Topic.Partition(partition=p, current_leader_epoch=-1,
                                                              fetch_offset=offset, partition_max_bytes=1 << 20))
    forgotten: dict = {}
    for topic, p in forget:
        forgotten.setdefault(topic, []).append(p)
    return F(replica_id=replica, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=0,
             session_id=session_id, session_epoch=epoch,
             topics=[F.Topic(topic=t if named else None, topic_id=None if named else IDS[t], partitions=ps)
                     for t, ps in topics.items()],
             forgotten_topics_data=[F.ForgottenTopic(topic=t if named else None, topic_id=None if named else IDS[t],
                                                     partitions=ps) for t, ps in forgotten.items()])


def ask(broker, req, version=13):
    return decoded(broker.call(req, version), version=version)


def answered(resp, version=13):
    """{(topic, partition): partition answer}."""
    names = {FOO: "foo", BAR: "bar"}
    return {((t.topic if version < 13 else names[t.topic_id]), p.partition_index): p
            for t in resp.responses for p in t.partitions}


@pytest.mark.parametrize("version", [7, 11, 12, 13])
def test_a_consumer_session_answers_only_partitions_with_news_in_every_session_version(broker, version):
    broker.call(produce(build_batch([b"a"])), 9)
    full = ask(broker, fetch([("foo", 0, 1), ("bar", 0, 0)], version=version), version)
    sid = full.session_id
    assert sid > 0 and full.error_code == 0
    assert sorted(answered(full, version)) == [("bar", 0), ("foo", 0)]  # a full answer: everything
    idle = ask(broker, fetch(version=version, session_id=sid, epoch=1), version)
    assert (idle.error_code, idle.session_id, idle.responses) == (0, sid, [])
    broker.call(produce(build_batch([b"b"])), 9)
    news = ask(broker, fetch(version=version, session_id=sid, epoch=2), version)
    p = answered(news, version)
    assert list(p) == [("foo", 0)] and values(p["foo", 0].records) == [b"b"] and p["foo", 0].high_watermark == 2
    # The consumer moves its offset (an updated partition); nothing new: an empty answer.
    again = ask(broker, fetch([("foo", 0, 2)], version=version, session_id=sid, epoch=3), version)
    assert again.responses == [] and again.session_id == sid


def test_epoch_minus_1_keeps_todays_sessionless_answer(broker):
    broker.call(produce(build_batch([b"a"])), 9)
    for _ in range(2):
        resp = ask(broker, fetch([("foo", 0, 1), ("bar", 0, 0)], epoch=-1))
        assert resp.session_id == 0 and sorted(answered(resp)) == [("bar", 0), ("foo", 0)]
    assert len(broker.handlers.fetch.sessions.cache) == 0


def test_session_errors_are_top_level_with_no_partitions_and_session_0(broker):
    resp = ask(broker, fetch(session_id=999, epoch=1))
    assert (resp.error_code, resp.session_id, resp.responses) == (E.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    sid = ask(broker, fetch([("foo", 0, 0)])).session_id
    resp = ask(broker, fetch(session_id=sid, epoch=5))
    assert (resp.error_code, resp.session_id, resp.responses) == (E.INVALID_FETCH_SESSION_EPOCH, 0, [])
    resp = ask(broker, fetch(session_id=sid, epoch=1, version=12), 12)
    assert resp.error_code == E.FETCH_SESSION_TOPIC_ID_ERROR


def test_a_forgotten_partition_is_no_longer_read(broker):
    sid = ask(broker, fetch([("foo", 0, 0), ("bar", 0, 0)])).session_id
    ask(broker, fetch(session_id=sid, epoch=1, forget=[("foo", 0)]))
    broker.call(produce(build_batch([b"unseen"])), 9)
    assert ask(broker, fetch(session_id=sid, epoch=2)).responses == []


def test_a_parked_incremental_fetch_answers_the_partition_that_got_data(broker):
    sid = ask(broker, fetch([("foo", 0, 0), ("bar", 0, 0)])).session_id

    async def go():
        parked = broker.call(fetch(session_id=sid, epoch=1, max_wait_ms=10_000, min_bytes=1), 13)
        assert asyncio.isfuture(parked) and not parked.done()
        broker.call(produce(build_batch([b"late"])), 9)
        return decoded(await parked, version=13)
    resp = run(go())
    p = answered(resp)
    assert resp.session_id == sid and list(p) == [("foo", 0)] and values(p["foo", 0].records) == [b"late"]


def test_a_parked_incremental_fetch_answers_empty_at_max_wait_and_the_session_goes_on(broker):
    sid = ask(broker, fetch([("foo", 0, 0)])).session_id

    async def go():
        return decoded(await broker.call(fetch(session_id=sid, epoch=1, max_wait_ms=20, min_bytes=1), 13),
                       version=13)
    resp = run(go())
    assert (resp.error_code, resp.session_id, resp.responses) == (0, sid, [])
    assert ask(broker, fetch(session_id=sid, epoch=2)).error_code == 0


def test_a_followers_idle_session_still_reports_its_fetch_offset_so_the_hw_moves(broker):
    """bar-0 has replicas {1, 3}: the HW needs replica 3. Its fetch offset moves in one
    incremental request; the leader's HW follows and the answer carries the new HW."""
    sid = ask(broker, fetch([("bar", 0, 0)], replica=3)).session_id
    broker.call(produce(build_batch([b"x", b"y"]), topic="bar"), 9)
    got = answered(ask(broker, fetch(session_id=sid, epoch=1, replica=3)))
    assert values(got["bar", 0].records) == [b"x", b"y"] and got["bar", 0].high_watermark == 0
    got = answered(ask(broker, fetch([("bar", 0, 2)], session_id=sid, epoch=2, replica=3)))
    assert got["bar", 0].high_watermark == 2 and broker.logs.get("bar", 0).high_watermark == 2
    assert ask(broker, fetch(session_id=sid, epoch=3, replica=3)).responses == []


def test_an_error_appears_in_the_incremental_answer_once_the_leader_moves(broker):
    sid = ask(broker, fetch([("foo", 0, 0), ("bar", 0, 0)])).session_id
    d = MetadataDelta(broker.state.image)
    # (moved off this broker: a replica would answer a v11+ consumer itself, KIP-392)
    d.replay(PartitionChangeRecord(partition_id=0, topic_id=FOO, leader=2, replicas=[2], isr=[2]))
    broker.set_image(d.apply())
    p = answered(ask(broker, fetch(session_id=sid, epoch=1)))
    assert list(p) == [("foo", 0)] and p["foo", 0].error_code == E.NOT_LEADER_OR_FOLLOWER
    assert p["foo", 0].current_leader.leader_id == 2


def test_follower_sessions_are_privileged_over_consumer_sessions(tmp_path):
    b = Broker(tmp_path)
    try:
        b.handlers.fetch.sessions.cache.max_slots = 1
        consumer = ask(b, fetch([("foo", 0, 0)])).session_id
        assert consumer > 0 and ask(b, fetch([("foo", 0, 0)])).session_id == 0  # no slot, no eviction
        follower = ask(b, fetch([("bar", 0, 0)], replica=3)).session_id
        assert follower > 0
        assert ask(b, fetch(session_id=consumer, epoch=1)).error_code == E.FETCH_SESSION_ID_NOT_FOUND
    finally:
        b.close()
