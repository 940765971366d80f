"""Client quota arithmetic (``kraft.broker.quotas``) against Kafka's ClientQuotaManager,
Rate/SampledStat and QuotaUtils, and the throttling wrapper (``kraft.server.quota_throttle``):
the answer carries throttle_time_ms and the connection is muted."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kraft.broker.quotas import FETCH, PRODUCE, REQUEST, ClientQuotas, Rate, resolve, throttle_ms
from kraft.protocol import EncodedParts, ProduceRequest, ProduceResponse
from kraft.server.quota_throttle import QuotaThrottledHandlers, with_throttle

U, C = "alice", "app"


def key(user=..., client=...):
    pairs = []
    if client is not ...:
        pairs.append(("client-id", client))
    if user is not ...:
        pairs.append(("user", user))
    return tuple(pairs)


# Kafka's precedence, most specific first, with the sensor key (metric tags) each yields.
PRECEDENCE = [
    (key(U, C), (U, C)), (key(U, None), (U, C)), (key(U), (U, "")), (key(None, C), (U, C)),
    (key(None, None), (U, C)), (key(None), (U, "")), (key(client=C), ("", C)), (key(client=None), ("", C)),
]


@pytest.mark.parametrize("level", range(len(PRECEDENCE)))
def test_the_most_specific_entity_with_the_key_wins(level):
    """Entities from ``level`` down are set; the one at ``level`` applies."""
    entities = {k: {PRODUCE: float(i + 1)} for i, (k, _) in enumerate(PRECEDENCE) if i >= level}
    entities[key("bob", C)] = {PRODUCE: 99.0}  # another user's quota never applies
    assert resolve(entities, PRODUCE, U, C) == (PRECEDENCE[level][1], float(level + 1))


def test_a_quota_of_another_kind_does_not_count_and_none_means_unthrottled():
    entities = {key(U, C): {FETCH: 5.0}, key(client=None): {PRODUCE: 7.0}}
    assert resolve(entities, PRODUCE, U, C) == (("", C), 7.0)
    assert resolve({}, PRODUCE, U, C) == (("", C), None)


def test_rate_counts_at_least_samples_minus_one_windows():
    r = Rate(samples=11, window_ms=1000)
    r.record(10_000, 0)
    # one event in the first window: 10 windows of time assumed (Kafka's windowSize)
    assert r.window_ms_at(0) == 10_000 and r.measure(0) == 1000.0
    for t in range(1, 31):
        r.record(1000, t * 1000)
    # 11 live samples of 1000 bytes (the first expired long ago) over 10 s + the current window
    assert r.window_ms_at(30_500) == 10_500
    assert r.measure(30_500) == pytest.approx(11_000 / 10.5)


def test_samples_older_than_the_window_are_purged():
    r = Rate(samples=3, window_ms=1000)
    r.record(9000, 0)
    assert r.measure(2999) == pytest.approx(9000 / 2.999)
    assert r.measure(3000) == 0.0


def test_throttle_time_is_kafkas_quota_utils_formula():
    assert throttle_ms(1000.0, 1000.0, 10_000) == 0
    assert throttle_ms(1500.0, 1000.0, 10_000) == 5000  # (1500-1000)/1000 * 10 s
    assert throttle_ms(2 * 1024 * 1024, 1024 * 1024, 10_500) == 10_500


def test_record_throttles_a_client_over_its_quota_and_shares_the_sensor():
    q = ClientQuotas(samples=11, window_ms=1000)
    entities = {key(client=C): {PRODUCE: 1000.0}}
    assert q.record(entities, PRODUCE, "x", C, 5000, 0) == 0  # 5000 B over 10 s assumed: 500 B/s
    # a second connection (another principal) of the same client id adds to the same sensor
    ms = q.record(entities, PRODUCE, "y", C, 10_000, 100)
    # the byte-rate token bucket: 11 s of quota (11,000 B) at first, 5,000 taken, 100 refilled
    # in 0.1 s, 10,000 taken: 3,900 B short, 3.9 s at 1000 B/s
    assert ms == 3900
    assert list(q.sensors) == [(PRODUCE, ("", C))]
    assert q.record(entities, PRODUCE, "x", "other", 10 ** 9, 100) == 0  # no quota: not recorded
    # a default quota gives each client id its own sensor
    entities = {key(client=None): {PRODUCE: 1000.0}}
    q.record(entities, PRODUCE, "x", "a", 1, 200)
    q.record(entities, PRODUCE, "x", "b", 1, 200)
    assert {(PRODUCE, ("", "a")), (PRODUCE, ("", "b"))} <= set(q.sensors)


def test_request_percentage_throttle_is_capped_at_one_window():
    q = ClientQuotas(samples=11, window_ms=1000)
    assert q.record({key(client=C): {REQUEST: 1.0}}, REQUEST, U, C, 1e6, 0) == 1000


def test_sustained_flood_is_held_at_the_quota():
    """A client that sends again as soon as its throttle ends averages the quota, once the
    start (measured as if over 10 windows, so a first burst passes, as in Kafka) is behind."""
    q = ClientQuotas()
    entities = {key(client=C): {PRODUCE: 1_048_576.0}}
    now, sent, start = 0, 0, None
    while now < 80_000:
        if start is None and now >= 20_000:
            start, sent = now, 0
        sent += 262_144
        now += max(1, q.record(entities, PRODUCE, U, C, 262_144, now))
    assert sent / ((now - start) / 1000) == pytest.approx(1_048_576, rel=0.1)


class Inner:
    def __init__(self, response):
        self.response = response
        self.state = SimpleNamespace(image=SimpleNamespace(client_quotas=SimpleNamespace(entities={})))

    def handle(self, ctx, request):
        return self.response


def _ctx(client_id, muted, version=9):
    return SimpleNamespace(header=SimpleNamespace(client_id=client_id, api_version=version), principal="User:ANONYMOUS",
                           mute_for=muted.append)


def _produce(n):
    P = ProduceRequest
    return P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[P.Topic(name="t", partition_data=[
        P.Topic.Partition(index=0, records=b"x" * n)])])


def test_the_wrapper_answers_with_throttle_time_and_mutes_only_the_quota_client():
    inner = Inner(ProduceResponse(responses=[]))
    inner.state.image.client_quotas.entities = {key(client="flood"): {PRODUCE: 1000.0}}
    now = [0]
    h = QuotaThrottledHandlers(inner, inner.state, clock_ms=lambda: now[0])
    muted = []
    assert h.handle(_ctx("flood", muted), _produce(5000)).throttle_time_ms == 0
    resp = h.handle(_ctx("flood", muted), _produce(50_000))
    assert resp.throttle_time_ms > 0 and muted == [resp.throttle_time_ms]
    other = []
    inner.response = ProduceResponse(responses=[])
    assert h.handle(_ctx("calm", other), _produce(10 ** 7)).throttle_time_ms == 0 and other == []


def test_encoded_fetch_answers_get_the_throttle_time_patched_in():
    parts = EncodedParts([b"\x00\x00\x00\x00rest", memoryview(b"records")])
    out = with_throttle(parts, 1234, 12)
    assert bytes(out[0]) == b"\x00\x00\x04\xd2rest" and bytes(out[1]) == b"records"


# --- controller_mutation_rate (KIP-599) ---------------------------------------------------------

from kraft.broker.quotas import MUTATION  # noqa: E402


def test_mutation_bucket_starts_full_refuses_strictly_below_zero_and_refills():
    q = ClientQuotas(samples=11, window_ms=1000)
    entities = {key(client=C): {MUTATION: 2.0}}  # burst: 11 s * 2 = 22 partitions
    assert q.mutate(entities, U, C, [20, 5, 1], True, 0) == ([True, True, False], 1500)  # 22-25 = -3
    assert q.mutate(entities, U, C, [1], True, 1000) == ([False], 500)  # -3 + 2 = -1
    assert q.mutate(entities, U, C, [4], True, 1500) == ([True], 2000)  # 0, then -4
    # older versions are permissive: recorded, only throttled
    assert q.mutate(entities, U, C, [10], False, 1500) == ([True], 7000)
    assert q.mutate(entities, U, "free", [1000], True, 1500) == ([True], 0)  # no quota


def test_strictly_refused_topics_are_answered_here_and_the_rest_forwarded_in_order():
    import asyncio
    from kraft.protocol import CreateTopicsRequest, CreateTopicsResponse
    T = CreateTopicsRequest.Topic
    forwarded = []

    class Admin(Inner):
        static_configs = {"num.partitions": 3}

        def handle(self, ctx, request):
            forwarded.append([t.name for t in request.topics])

            async def answer():
                return CreateTopicsResponse(topics=[CreateTopicsResponse.Topic(name=t.name, error_code=0)
                                                    for t in request.topics])
            return answer()

    inner = Admin(None)
    inner.state.image = SimpleNamespace(client_quotas=SimpleNamespace(entities={key(client=C): {MUTATION: 1.0}}),
                                        topics=SimpleNamespace(by_name={}))
    h = QuotaThrottledHandlers(inner, inner.state, clock_ms=lambda: 0)
    muted = []
    req = CreateTopicsRequest(topics=[T(name="a", num_partitions=10, replication_factor=1),
                                      T(name="b", num_partitions=-1, replication_factor=1),  # 3: 11 - 13 < 0
                                      T(name="c", num_partitions=1, replication_factor=1)], timeout_ms=1000)
    async def main():
        return await h.handle(_ctx(C, muted, version=7), req)
    resp = asyncio.run(main())
    assert forwarded == [["a", "b"]]
    assert [(t.name, t.error_code) for t in resp.topics] == [("a", 0), ("b", 0), ("c", 89)]
    assert resp.topics[2].error_message == "The throttling quota has been exceeded."
    # muted when the throttle is known (nothing more dispatched) and again from the answer
    assert resp.throttle_time_ms == 2000 and muted == [2000, 2000]


def test_consumer_fetches_count_their_answer_bytes_and_replica_fetches_do_not():
    from kraft.protocol import FetchRequest
    inner = Inner(None)
    inner.state.image.client_quotas.entities = {key(client=None): {FETCH: 1000.0}}
    h = QuotaThrottledHandlers(inner, inner.state, clock_ms=lambda: 0)

    def fetch(replica_id, size, version=12):
        inner.response = EncodedParts([b"\x00\x00\x00\x00head", b"r" * size])
        F = FetchRequest
        muted = []
        out = h.handle(_ctx(C, muted, version), F(replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1,
                                                  isolation_level=0, session_id=0, session_epoch=-1, topics=[],
                                                  forgotten_topics_data=[]))
        return int.from_bytes(bytes(out[0][:4]), "big"), muted

    assert fetch(1, 10 ** 6) == (0, [])  # a follower: replication is not a client's quota
    assert fetch(-1, 5000) == (0, [])  # 5008 B over 10 s assumed: within 1000 B/s
    ms, muted = fetch(-1, 50_000)
    assert ms > 0 and muted == [ms]


def test_a_flood_of_quota_sized_requests_is_held_within_ten_percent_over_any_30_s():
    """1 MiB requests against a 1 MiB/s quota, sent whenever the connection is unmuted: after
    the first burst, every 30 s span carries the quota within 10%. (Kafka's Rate purges the
    samples of a client held down for ~10 s together and lets the next ~10 MiB through at
    once: spans of 30 s then ranged from +1% to +16%.)"""
    q = ClientQuotas()
    quota = 1_048_576.0
    entities = {key(client=C): {PRODUCE: quota}}
    now, sends = 0, []
    while now < 200_000:
        sends.append(now)
        now += max(1, q.record(entities, PRODUCE, U, C, quota, now))
    for start in range(20_000, 170_000, 1_000):
        carried = sum(1 for t in sends if start <= t < start + 30_000) * quota
        assert carried / 30 == pytest.approx(quota, rel=0.1), start
