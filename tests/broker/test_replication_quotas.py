"""Replication quotas (kraft.broker.replication_quotas), as Kafka's ReplicationQuotaManager: the
throttled-replica lists of the topic configs name the partitions, the broker's dynamic
``leader/follower.replication.throttled.rate`` the bound; a leader answers a throttled
partition of an out-of-sync follower without records while its rate is over the bound, a
follower leaves such a partition out of its fetch; in-sync replicas are never held back. Two
real brokers' logs in one process, fetching over the encoded wire form."""

from __future__ import annotations

from kraft.broker.replica_fetcher import THROTTLE_RECHECK_MS, ReplicaFetcher
from kraft.broker.replication_quotas import FOLLOWER, LEADER, ReplicationQuota, throttled_partitions
from kraft.metadata import ConfigRecord, MetadataDelta
from kraft.metadata.configs import BROKER, TOPIC

from test_replication_follower import TID, TP, Broker, FakeLocal, _image, _round, answer

RATE = 1000  # bytes/s: the first ~10 windows' worth pass, as Kafka's Rate counts them


def _configs(image, *, topic: dict | None = None, broker: dict | None = None, default: dict | None = None):
    d = MetadataDelta(image)
    for rtype, name, values in ((TOPIC, "t", topic), (BROKER, "1", broker), (BROKER, "", default)):
        for k, v in (values or {}).items():
            d.replay(ConfigRecord(resource_type=rtype, resource_name=name, name=k, value=v))
    return d.apply()


def test_the_lists_name_partitions_of_this_broker_and_star_names_all():
    assert throttled_partitions("0:1, 1:2 ,2:1", 1) == {0, 2}
    assert throttled_partitions("*", 7) is None
    assert throttled_partitions("", 1) == set()


def test_the_rate_is_the_brokers_own_else_the_cluster_default_and_the_lists_come_from_topics():
    q = ReplicationQuota(LEADER, 1)
    q.update(_configs(_image(), topic={"leader.replication.throttled.replicas": "0:1"},
                      default={"leader.replication.throttled.rate": "500"}))
    assert q.bound == 500 and q.throttled("t", 0) and not q.throttled("t", 1) and not q.throttled("u", 0)
    q.update(_configs(_image(), topic={"leader.replication.throttled.replicas": "*"},
                      broker={"leader.replication.throttled.rate": "700"}, default={"leader.replication.throttled.rate": "500"}))
    assert q.bound == 700 and q.throttled("t", 5)
    f = ReplicationQuota(FOLLOWER, 1)
    f.update(_configs(_image(), topic={"leader.replication.throttled.replicas": "*"}))
    assert f.bound is None and not f.throttled("t", 0)  # the leader's list says nothing of followers


def _leader_round(tmp_path, isr):
    image = _configs(_image(isr=isr, replicas=(1, 2)), topic={"leader.replication.throttled.replicas": "0:1"},
                     broker={"leader.replication.throttled.rate": str(RATE)})
    a, b = Broker(tmp_path, 1, image), Broker(tmp_path, 2, image)
    a.state.leader_quota.update(image)
    b.fetchers.on_image(image)
    return a, b


def test_a_leader_holds_back_an_out_of_sync_followers_throttled_partition_once_over_its_rate(tmp_path):
    a, b = _leader_round(tmp_path, isr=(1,))
    try:
        for i in range(100):
            a.append(10, 1)  # ~17 kB, over the 10 s x 1000 B/s Kafka's Rate counts at first
        _round(b, {1: a})
        first = b.plog.log.end_offset
        assert first == 1000  # under the bound when asked: all of it (the bytes are counted after)
        assert a.state.leader_quota.rate.measure(a.state.leader_quota.rate.ring[0][0]) > RATE
        a.append(10, 1)
        _round(b, {1: a})
        assert b.plog.log.end_offset == first  # over the bound: answered without records
        assert a.state.leader_quota.throttled_total >= 1
    finally:
        a.close()
        b.close()


def test_an_in_sync_follower_is_never_held_back(tmp_path):
    a, b = _leader_round(tmp_path, isr=(1, 2))
    try:
        for i in range(100):
            a.append(10, 1)
        _round(b, {1: a})
        assert a.state.leader_quota.rate.measure(a.state.leader_quota.rate.ring[0][0]) > RATE  # over, yet:
        a.append(10, 1)
        _round(b, {1: a})
        assert b.plog.log.end_offset == 1010 and a.state.leader_quota.throttled_total == 0
    finally:
        a.close()
        b.close()


def test_a_follower_leaves_a_throttled_partition_out_while_over_its_rate_unless_in_sync():
    quota = ReplicationQuota(FOLLOWER, 2)
    quota.update(_configs(_image(isr=(1,), replicas=(1, 2)), topic={"follower.replication.throttled.replicas": "0:2"},
                          default={"follower.replication.throttled.rate": str(RATE)}))
    f = ReplicaFetcher(2, 1, 0, FakeLocal(), backoff_ms=1000, quota=quota)
    f.add_or_update(TP, TID, 5, in_sync=False)
    now = 1_000_000
    assert f.poll(now) is not None
    f.on_response(answer(hw=100, records=b"x" * 50_000), now)  # counted: 50 kB in the first 10 s
    assert f.poll(now + 1) is None  # held back, and looked at again a little later, not in a loop
    assert f.partitions[TP].backoff_until_ms == now + 1 + THROTTLE_RECHECK_MS
    f.add_or_update(TP, TID, 5, in_sync=True)
    f.partitions[TP].backoff_until_ms = 0
    assert f.poll(now + 2) is not None  # in the ISR: fetched whatever the rate
