"""Fetch sessions (KIP-227) without logs or sockets: the broker's session cache and fetch
contexts (Kafka's FetchSession.scala: FetchManager.newContext, CachedPartition,
FetchSessionCache.tryEvict) and the fetcher's side (Kafka's FetchSessionHandler). Each test
names the rule it checks."""

from __future__ import annotations

import random
import uuid

import pytest

from kraft.broker.fetch_session_client import ClientFetchSession, PartitionParams
from kraft.broker.fetch_sessions import (FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionCache,
                                         FetchSessions, next_epoch)
from kraft.errors import ErrorCode
from kraft.protocol import FetchRequest

E = ErrorCode
F = FetchRequest
FOO, BAR = uuid.UUID(int=0xF00), uuid.UUID(int=0xBA2)
NAMES = {FOO: type("T", (), {"name": "foo"})(), BAR: type("T", (), {"name": "bar"})()}
MIN_AGE = 120_000


def request(parts=(), *, session_id=0, epoch=FINAL_EPOCH, forget=(), version=13):
    """``parts``: (topic, partition, fetch_offset); ``forget``: (topic, partition)."""
    ids = {"foo": FOO, "bar": BAR}
    topics: dict = {}
    for topic, p, offset in parts:
        topics.setdefault(topic, []).append(F.Topic.Partition(partition=p, current_leader_epoch=-1,
                                                              fetch_offset=offset, partition_max_bytes=1000))
    forgotten: dict = {}
    for topic, p in forget:
        forgotten.setdefault(topic, []).append(p)
    named = version < 13
    return F(replica_id=-1, max_wait_ms=0, min_bytes=0, session_id=session_id, session_epoch=epoch,
             topics=[F.Topic(topic=t if named else None, topic_id=None if named else ids.get(t, uuid.UUID(int=1)),
                             partitions=ps) for t, ps in topics.items()],
             forgotten_topics_data=[F.ForgottenTopic(topic=t if named else None, topic_id=None if named else ids[t],
                                                     partitions=ps) for t, ps in forgotten.items()])


class Read:
    """What the handler's read gives the session layer for one partition."""

    def __init__(self, hw=10, log_start=0, records=b"", code=0, diverging=None, preferred=-1):
        self.hw, self.log_start, self.records, self.code, self.diverging = hw, log_start, records, code, diverging
        self.preferred = preferred  # KIP-392's preferred read replica (-1: none)


def reads_for(ctx, **by_partition):
    """One Read per wanted partition; ``by_partition`` maps "topic_partition" to a Read."""
    return [by_partition.get(f"{name}_{p.partition}", Read()) for name, _, p in ctx.wanted]


def keys(ctx):
    return [(name, p.partition) for name, _, p in ctx.wanted]


def sessions(slots=1000):
    return FetchSessions(FetchSessionCache(slots, MIN_AGE, rng=random.Random(1)))


def start(s, parts=(("foo", 0, 5), ("foo", 1, 7), ("bar", 0, 0)), *, follower=False, now=0, version=13):
    """A full fetch with epoch 0 and its answer: the new session id."""
    ctx = s.context(request(parts, epoch=INITIAL_EPOCH, version=version), version, NAMES, follower=follower,
                    now_ms=now)
    code, session_id, _ = ctx.respond(reads_for(ctx), now)
    assert code == 0
    return session_id


def incremental(s, session_id, epoch, parts=(), forget=(), *, version=13, now=1):
    return s.context(request(parts, session_id=session_id, epoch=epoch, forget=forget, version=version), version,
                     NAMES, follower=False, now_ms=now)


# --- contexts -----------------------------------------------------------------------------------


def test_epoch_minus_1_is_a_sessionless_full_fetch_answering_every_partition_and_session_0():
    s = sessions()
    ctx = s.context(request([("foo", 0, 5), ("foo", 1, 7)]), 13, NAMES, follower=False, now_ms=0)
    assert ctx.kind == "sessionless" and keys(ctx) == [("foo", 0), ("foo", 1)]
    assert ctx.respond(reads_for(ctx))[1] == INVALID_SESSION_ID
    assert len(s.cache) == 0


def test_versions_before_7_have_no_session_fields_and_are_sessionless():
    s = sessions()
    req = request([("foo", 0, 5)], version=6, epoch=INITIAL_EPOCH)
    ctx = s.context(req, 6, NAMES, follower=False, now_ms=0)
    assert ctx.kind == "sessionless" and ctx.respond(reads_for(ctx))[1] == 0


def test_a_full_fetch_with_epoch_0_creates_a_session_and_answers_every_partition_with_its_id():
    s = sessions()
    ctx = s.context(request([("foo", 0, 5), ("bar", 0, 0)], epoch=INITIAL_EPOCH), 13, NAMES, follower=False,
                    now_ms=0)
    code, session_id, out = ctx.respond(reads_for(ctx), 0)
    assert code == 0 and session_id > 0 and len(out) == 2
    session = s.cache.get(session_id)
    assert session.epoch == 1 and sorted(session.partitions) == sorted([(FOO, 0), (BAR, 0)])


def test_a_full_fetch_closes_the_session_it_names():
    s = sessions()
    old = start(s)
    ctx = s.context(request([("foo", 0, 5)], session_id=old, epoch=FINAL_EPOCH), 13, NAMES, follower=False,
                    now_ms=1)
    assert s.cache.get(old) is None and ctx.respond(reads_for(ctx))[1] == 0
    old = start(s)
    ctx = s.context(request([("foo", 0, 5)], session_id=old, epoch=INITIAL_EPOCH), 13, NAMES, follower=False,
                    now_ms=1)
    new = ctx.respond(reads_for(ctx), 1)[1]
    assert s.cache.get(old) is None and new not in (0, old) and s.cache.get(new) is not None


def test_an_incremental_fetch_on_an_unknown_session_is_fetch_session_id_not_found():
    ctx = incremental(sessions(), 12345, 1)
    assert ctx.error == E.FETCH_SESSION_ID_NOT_FOUND and ctx.wanted == []
    assert ctx.respond([]) == (E.FETCH_SESSION_ID_NOT_FOUND, 0, [])


def test_an_incremental_fetch_with_the_wrong_epoch_is_invalid_fetch_session_epoch_and_changes_nothing():
    s = sessions()
    sid = start(s)
    for wrong in (0 + 2, 7):
        ctx = incremental(s, sid, wrong, parts=[("foo", 2, 0)])
        assert ctx.error == E.INVALID_FETCH_SESSION_EPOCH
    session = s.cache.get(sid)
    assert session.epoch == 1 and (FOO, 2) not in session.partitions
    assert incremental(s, sid, 1).error == 0 and session.epoch == 2


def test_a_session_made_with_topic_names_refuses_v13_and_the_reverse():
    s = sessions()
    by_name = start(s, [("foo", 0, 0)], version=12)
    assert incremental(s, by_name, 1, version=13).error == E.FETCH_SESSION_TOPIC_ID_ERROR
    by_id = start(s, [("foo", 0, 0)], version=13)
    assert incremental(s, by_id, 1, version=12).error == E.FETCH_SESSION_TOPIC_ID_ERROR
    assert incremental(s, by_name, 1, version=12).error == 0


def test_an_incremental_fetch_reads_every_session_partition_with_added_updated_and_forgotten_ones():
    s = sessions()
    sid = start(s)
    ctx = incremental(s, sid, 1, parts=[("foo", 1, 9), ("foo", 2, 3)], forget=[("bar", 0)])
    assert ctx.kind == "incremental"
    assert keys(ctx) == [("foo", 0), ("foo", 1), ("foo", 2)]
    offsets = {p.partition: p.fetch_offset for _, _, p in ctx.wanted}
    assert offsets == {0: 5, 1: 9, 2: 3}  # foo-0 from the cache, foo-1 updated, foo-2 added
    assert [tid for _, tid, _ in ctx.wanted] == [FOO] * 3


def test_version_12_sessions_key_partitions_by_topic_name():
    s = sessions()
    sid = start(s, [("foo", 0, 5), ("bar", 0, 0)], version=12)
    ctx = incremental(s, sid, 1, parts=[("foo", 0, 8)], forget=[("bar", 0)], version=12)
    assert [(name, tid, p.fetch_offset) for name, tid, p in ctx.wanted] == [("foo", None, 8)]


def test_forgetting_every_partition_closes_the_session_and_answers_sessionless():
    s = sessions()
    sid = start(s, [("foo", 0, 5)])
    ctx = incremental(s, sid, 1, forget=[("foo", 0)])
    assert ctx.kind == "sessionless" and s.cache.get(sid) is None
    assert ctx.respond([]) == (0, 0, [])


def test_an_incremental_answer_carries_only_partitions_with_news():
    """Kafka's CachedPartition.maybeUpdateResponseData: records, a new HW or log start offset,
    an error (and the first answer after it clears), a diverging epoch, a preferred read replica."""
    s = sessions()
    sid = start(s)  # the full answer told the fetcher hw 10, log start 0 for every partition
    epoch = 1

    def answer(**reads):
        nonlocal epoch
        ctx = incremental(s, sid, epoch)
        epoch += 1
        code, got_sid, out = ctx.respond(reads_for(ctx, **reads))
        assert (code, got_sid) == (0, sid)
        return sorted((name, p.partition) for (name, _, p), r in zip(ctx.wanted, reads_for(ctx, **reads))
                      if any(r is o for o in out))

    assert answer() == []
    assert answer(foo_0=Read(records=b"xyz")) == [("foo", 0)]
    assert answer(foo_1=Read(hw=11)) == [("foo", 1)]
    assert answer(foo_1=Read(hw=11)) == []  # told once
    assert answer(bar_0=Read(log_start=4)) == [("bar", 0)]
    # (an error answer with the same HW: only the error rule can bring the partition back)
    assert answer(bar_0=Read(log_start=4, code=E.NOT_LEADER_OR_FOLLOWER, hw=10)) == [("bar", 0)]
    assert answer(bar_0=Read(log_start=4)) == [("bar", 0)]  # the error is gone: the HW again
    assert answer(bar_0=Read(log_start=4)) == []
    assert answer(foo_0=Read(diverging=(3, 40))) == [("foo", 0)]
    # The follower truncates on a diverging epoch and ignores the HW beside it: sent again after.
    assert answer(foo_0=Read()) == [("foo", 0)]
    assert answer(foo_0=Read()) == []
    assert answer(foo_1=Read(hw=11, preferred=2)) == [("foo", 1)]  # a KIP-392 redirect, every time
    assert answer(foo_1=Read(hw=11, preferred=2)) == [("foo", 1)]


def test_a_partition_that_diverged_in_the_full_answer_brings_its_hw_in_the_next_one():
    """A follower acts on the diverging epoch of the full answer and ignores the HW beside it:
    the first incremental answer after must carry that partition's HW (found by the replication
    simulator's convergence check, seed 200754: the follower's HW stayed one write behind)."""
    s = sessions()
    ctx = s.context(request((("foo", 0, 9), ("foo", 1, 7)), epoch=INITIAL_EPOCH), 13, NAMES, follower=True, now_ms=0)
    code, sid, _ = ctx.respond(reads_for(ctx, foo_0=Read(diverging=(2, 5)), foo_1=Read(code=E.NOT_LEADER_OR_FOLLOWER)))
    assert code == 0
    ctx = incremental(s, sid, 1, (("foo", 0, 5),))
    _, _, out = ctx.respond(reads_for(ctx))
    assert len(out) == 2  # foo-0 (its HW) and foo-1 (the error is gone)


def test_answered_partitions_move_to_the_end_of_the_read_order():
    s = sessions()
    sid = start(s)
    ctx = incremental(s, sid, 1)
    ctx.respond(reads_for(ctx, foo_0=Read(records=b"x")))
    assert keys(incremental(s, sid, 2)) == [("foo", 1), ("bar", 0), ("foo", 0)]


def test_a_parked_fetch_overtaken_by_a_later_request_on_its_session_answers_invalid_epoch():
    s = sessions()
    sid = start(s)
    parked = incremental(s, sid, 1)
    later = incremental(s, sid, 2)
    assert parked.respond(reads_for(parked))[:2] == (E.INVALID_FETCH_SESSION_EPOCH, sid)
    assert later.respond(reads_for(later))[:2] == (0, sid)


def test_an_unknown_topic_id_is_kept_nameless_and_resolves_once_the_image_knows_it():
    s = sessions()
    new = uuid.UUID(int=0x9E3)
    ctx = s.context(request([("foo", 0, 0)], epoch=INITIAL_EPOCH), 13, NAMES, follower=False, now_ms=0)
    ctx.wanted.append((None, new, F.Topic.Partition(partition=0, fetch_offset=0, partition_max_bytes=1)))
    sid = ctx.respond(reads_for(ctx))[1]
    names = {**NAMES, new: type("T", (), {"name": "baz"})()}
    later = s.context(request(session_id=sid, epoch=1), 13, names, follower=False, now_ms=1)
    assert [(name, tid) for name, tid, _ in later.wanted] == [("foo", FOO), ("baz", new)]
    gone = s.context(request(session_id=sid, epoch=2), 13, {}, follower=False, now_ms=2)
    assert [name for name, _, _ in gone.wanted] == [None, None]  # deleted topics read as unknown ids


def test_session_epochs_wrap_to_1_and_final_stays_final():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch((1 << 31) - 1) == 1 and next_epoch(-1) == -1


# --- the cache and eviction ---------------------------------------------------------------------


def fill(cache, n, *, privileged=False, size=1, now=0):
    return [cache.create(now, privileged, {i: None for i in range(size)}, True) for _ in range(n)]


def test_with_no_free_slot_and_nothing_evictable_no_session_is_made():
    cache = FetchSessionCache(2, MIN_AGE, rng=random.Random(1))
    fill(cache, 2, size=5)
    assert cache.create(10, False, {0: None}, True) == INVALID_SESSION_ID
    assert len(cache) == 2 and cache.evictions == 0


def test_zero_slots_means_no_sessions_at_all():
    cache = FetchSessionCache(0, MIN_AGE)
    assert cache.create(0, True, {0: None}, True) == INVALID_SESSION_ID


def test_a_session_unused_past_the_minimum_age_is_evicted_by_anyone_least_recently_used_first():
    cache = FetchSessionCache(2, MIN_AGE, rng=random.Random(1))
    a, b = fill(cache, 2, privileged=True, size=100)
    cache.touch(cache.get(a), 50_000)  # b is now the least recently used
    new = cache.create(MIN_AGE + 1, False, {0: None}, True)
    assert new != 0 and cache.get(b) is None and cache.get(a) is not None


def test_a_consumer_cannot_evict_a_session_younger_than_the_minimum_age():
    cache = FetchSessionCache(1, MIN_AGE, rng=random.Random(1))
    fill(cache, 1, size=1)
    assert cache.create(1000, False, {i: None for i in range(50)}, True) == INVALID_SESSION_ID


def test_a_follower_evicts_a_young_consumer_session_but_not_a_young_follower_session():
    cache = FetchSessionCache(1, MIN_AGE, rng=random.Random(1))
    (consumer,) = fill(cache, 1, size=500)
    follower = cache.create(1000, True, {0: None}, True)
    assert follower != 0 and cache.get(consumer) is None
    assert cache.create(2000, True, {i: None for i in range(900)}, True) == INVALID_SESSION_ID
    assert cache.get(follower) is not None


def test_past_the_minimum_age_a_larger_session_evicts_the_smallest_and_an_equal_one_does_not():
    cache = FetchSessionCache(2, MIN_AGE, rng=random.Random(1))
    small, big = fill(cache, 1, size=3) + fill(cache, 1, size=10)
    for sid in (small, big):  # recently used: not stale, but old enough to be evictable
        cache.touch(cache.get(sid), MIN_AGE + 5)
    now = MIN_AGE + 10
    assert cache.create(now, False, {i: None for i in range(3)}, True) == INVALID_SESSION_ID
    assert cache.create(now, False, {i: None for i in range(4)}, True) != 0
    assert cache.get(small) is None and cache.get(big) is not None


def test_a_consumer_never_evicts_an_old_follower_session_even_when_larger():
    cache = FetchSessionCache(1, MIN_AGE, rng=random.Random(1))
    (f,) = fill(cache, 1, privileged=True, size=1)
    cache.touch(cache.get(f), MIN_AGE + 5)
    assert cache.create(MIN_AGE + 10, False, {i: None for i in range(100)}, True) == INVALID_SESSION_ID


def test_session_ids_are_positive_and_unique():
    cache = FetchSessionCache(10_000, MIN_AGE, rng=random.Random(3))
    ids = fill(cache, 2000)
    assert len(set(ids)) == 2000 and min(ids) > 0


# --- the fetcher's side -------------------------------------------------------------------------


def params(offset, epoch=5, topic_id=FOO):
    return PartitionParams(topic_id, offset, 0, 1000, epoch, 4)


def test_the_fetcher_starts_full_then_sends_only_changed_added_and_forgotten_partitions():
    c = ClientFetchSession()
    first = c.build({("foo", 0): params(5), ("foo", 1): params(7)})
    assert first.full and (first.session_id, first.session_epoch) == (0, 0) and len(first.to_send) == 2
    assert c.on_response(0, 77)
    same = c.build({("foo", 0): params(5), ("foo", 1): params(7)})
    assert (same.session_id, same.session_epoch, same.to_send, same.to_forget) == (77, 1, {}, [])
    assert c.on_response(0, 77)
    moved = c.build({("foo", 0): params(9), ("foo", 2): params(0)})
    assert moved.session_epoch == 2
    assert moved.to_send == {("foo", 0): params(9), ("foo", 2): params(0)}
    assert moved.to_forget == [(("foo", 1), FOO)]


def test_a_recreated_topic_is_forgotten_under_its_old_id_and_sent_under_the_new():
    c = ClientFetchSession()
    c.build({("foo", 0): params(5)})
    c.on_response(0, 77)
    r = c.build({("foo", 0): params(0, topic_id=BAR)})
    assert r.to_forget == [(("foo", 0), FOO)] and r.to_send == {("foo", 0): params(0, topic_id=BAR)}


@pytest.mark.parametrize("error, keeps_id", [(E.FETCH_SESSION_ID_NOT_FOUND, False),
                                              (E.INVALID_FETCH_SESSION_EPOCH, True),
                                              (E.FETCH_SESSION_TOPIC_ID_ERROR, True)])
def test_after_a_session_error_the_next_request_is_full(error, keeps_id):
    c = ClientFetchSession()
    c.build({("foo", 0): params(5)})
    c.on_response(0, 77)
    c.build({("foo", 0): params(5)})
    assert not c.on_response(int(error), 0)
    r = c.build({("foo", 0): params(5)})
    assert r.full and r.session_epoch == 0 and r.to_send == {("foo", 0): params(5)}
    assert r.session_id == (77 if keeps_id else 0)  # a named session is closed by the leader


def test_a_failed_request_or_a_closed_session_makes_the_next_request_full():
    c = ClientFetchSession()
    c.build({("foo", 0): params(5)})
    c.on_response(0, 77)
    c.on_error()
    assert c.build({("foo", 0): params(5)}).full
    c.on_response(0, 78)
    c.build({("foo", 0): params(5)})
    c.on_response(0, 0)  # the leader closed the session
    r = c.build({("foo", 0): params(5)})
    assert r.full and r.session_id == 0


def test_a_disabled_session_sends_sessionless_full_fetches():
    c = ClientFetchSession(enabled=False)
    for _ in range(3):
        r = c.build({("foo", 0): params(5)})
        assert (r.session_id, r.session_epoch, len(r.to_send)) == (0, -1, 1)
        c.on_response(0, 0)


# --- the replica fetcher with its session --------------------------------------------------------


def _fetcher_with_two_partitions():
    from kraft.broker.replica_fetcher import ReplicaFetcher
    from tests.broker.test_replication_follower import FakeLocal

    local = FakeLocal(end=10)
    f = ReplicaFetcher(2, 1, 0, local, backoff_ms=1000)
    f.add_or_update(("foo", 0), FOO, 5)
    f.add_or_update(("foo", 1), FOO, 5)
    return f, local


def _answer(session_id, code=0):
    from kraft.protocol import FetchResponse
    return FetchResponse(throttle_time_ms=0, error_code=code, session_id=session_id, responses=[])


def _sent(req):
    return sorted((t.topic_id, p.partition, p.fetch_offset) for t in req.topics for p in t.partitions)


def test_a_replica_fetcher_sends_a_full_fetch_then_only_what_changed():
    f, local = _fetcher_with_two_partitions()
    first = f.poll(0)
    assert (first.session_id, first.session_epoch, len(_sent(first))) == (0, 0, 2)
    f.on_response(_answer(77), 1)
    idle = f.poll(2)
    assert (idle.session_id, idle.session_epoch, idle.topics, idle.forgotten_topics_data) == (77, 1, [], [])
    f.on_response(_answer(77), 3)
    local.end = 12  # (the fake's end offset is every partition's) both moved
    moved = f.poll(4)
    assert moved.session_epoch == 2 and _sent(moved) == [(FOO, 0, 12), (FOO, 1, 12)]


def test_a_replica_fetcher_answers_a_session_error_with_an_immediate_full_fetch():
    f, _ = _fetcher_with_two_partitions()
    f.poll(0)
    f.on_response(_answer(77), 1)
    f.poll(2)
    assert f.on_response(_answer(0, E.FETCH_SESSION_ID_NOT_FOUND), 3) == []
    again = f.poll(3)  # no back-off
    assert again is not None and (again.session_id, again.session_epoch, len(_sent(again))) == (0, 0, 2)


def test_a_failed_request_makes_the_next_fetch_full_and_closes_the_old_session():
    f, _ = _fetcher_with_two_partitions()
    f.poll(0)
    f.on_response(_answer(77), 1)
    f.poll(2)
    f.on_failure(3)
    again = f.poll(10_000)
    assert (again.session_id, again.session_epoch, len(_sent(again))) == (77, 0, 2)


def test_a_fetcher_that_follows_nothing_more_closes_its_session_then_goes_idle():
    f, _ = _fetcher_with_two_partitions()
    f.poll(0)
    f.on_response(_answer(77), 1)
    f.remove(("foo", 0))
    f.remove(("foo", 1))
    assert not f.idle
    close = f.poll(2)
    assert (close.session_id, close.session_epoch, close.topics) == (77, 1, [])
    assert sorted(p for t in close.forgotten_topics_data for p in t.partitions) == [0, 1]
    f.on_response(_answer(0), 3)  # the leader closed the emptied session
    assert f.idle and f.poll(4) is None
