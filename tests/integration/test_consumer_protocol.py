"""KIP-848 consumer groups against 3 combined ``kraft server start`` processes with confluent-kafka
(librdkafka) and ``group.protocol=consumer``: 1, then 2, then 3 consumers share a topic of 6
partitions through the server-side assignor, every record is consumed, commits land, a member
that leaves hands its partitions to the others; the admin client describes the group
(ConsumerGroupDescribe) and lists it by type; the coordinator's node is SIGKILLed and the group
goes on from its records on the new coordinator; a regex subscription; a static member that
restarts gets its partitions back; a live classic group upgrades to a consumer group when a
consumer-protocol member joins, and downgrades when it leaves. One cluster for the module."""

from __future__ import annotations

import time

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.coordinator.group_records import OFFSETS_TOPIC, partition_for

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .test_broker_cluster import QUIET, SETTINGS, all_see_all  # noqa: E402

pytestmark = pytest.mark.integration
TOPIC = "kip848"
PARTITIONS = 6
RECORDS = 60
VALUES = {b"v%d" % i for i in range(RECORDS)}
# A short heartbeat interval (Kafka's default is 5 s) so that the test's rebalances, which each
# take a few heartbeats (revoke, then assign), fit in seconds.
CLUSTER = {**SETTINGS, "group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "300"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(str(tmp_path_factory.mktemp("kip848")), 3, combined=True, overrides=CLUSTER).create()
    c.start()
    try:
        assert wait_for(lambda: all_see_all(c), 60, 0.2), f"brokers did not register: {c.unexpected_exits()}"
        admin = AdminClient({"bootstrap.servers": c.broker_bootstrap, **QUIET})
        for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)]).values():
            f.result()
        p = Producer({"bootstrap.servers": c.broker_bootstrap, "acks": "all", **QUIET})
        for i in range(RECORDS):
            p.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=i % PARTITIONS)
        assert p.flush(30) == 0
        yield c
    finally:
        c.close()


def consumer(cluster, group: str, **extra) -> Consumer:
    # No session.timeout.ms / heartbeat.interval.ms: with the consumer protocol the broker sets them.
    return Consumer({"bootstrap.servers": cluster.broker_bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "topic.metadata.refresh.interval.ms": 1000, **QUIET, **extra})


def partitions_of(c) -> set:
    return {tp.partition for tp in c.assignment()}


def split(consumers, each=None) -> bool:
    """The consumers' assignments are disjoint and cover every partition (``each`` apiece)."""
    sets = [partitions_of(c) for c in consumers]
    if each is not None and any(len(s) != each for s in sets):
        return False
    return sum(len(s) for s in sets) == PARTITIONS and set().union(*sets) == set(range(PARTITIONS))


def poll_until(consumers, done, seen: list, timeout=20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen.append(m.value())
        if done():
            return
    raise AssertionError(f"timed out; assignments {[sorted(partitions_of(c)) for c in consumers]}")


def test_one_two_three_consumers_share_the_partitions_and_a_leaver_hands_its_own_over(cluster):
    group = "kip848-rebalance"
    seen: list = []
    cs = [consumer(cluster, group)]
    try:
        cs[0].subscribe([TOPIC])
        began = time.monotonic()
        poll_until(cs, lambda: split(cs), seen)
        first_assignment_s = time.monotonic() - began
        for n in (2, 3):
            cs.append(consumer(cluster, group))
            cs[-1].subscribe([TOPIC])
            poll_until(cs, lambda: split(cs, PARTITIONS // n), seen)
        poll_until(cs, lambda: VALUES <= set(seen), seen)
        # Commits with the member epoch (OffsetCommit v9) land; the group's offsets are theirs.
        for c in cs:
            c.commit(asynchronous=False)
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
        got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
        assert {(tp.partition, tp.offset) for tp in got.topic_partitions} == \
            {(p, RECORDS // PARTITIONS) for p in range(PARTITIONS)}
        # A member leaving (epoch -1) hands its partitions to the other two.
        leaver = cs.pop()
        mine = partitions_of(leaver)
        leaver.close()
        poll_until(cs, lambda: split(cs, PARTITIONS // 2), seen)
        assert mine <= partitions_of(cs[0]) | partitions_of(cs[1])
        assert first_assignment_s < 5, first_assignment_s
    finally:
        for c in cs:
            c.close()


def test_the_admin_client_describes_and_lists_a_consumer_group(cluster):
    group = "kip848-admin"
    seen: list = []
    c = consumer(cluster, group)
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    try:
        c.subscribe([TOPIC])
        poll_until([c], lambda: split([c]), seen)
        d = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert (d.type, d.state, d.partition_assignor) == \
            (ck.ConsumerGroupType.CONSUMER, ck.ConsumerGroupState.STABLE, "uniform")
        [m] = d.members
        assert {tp.partition for tp in m.assignment.topic_partitions} == set(range(PARTITIONS))
        typed = admin.list_consumer_groups(types={ck.ConsumerGroupType.CONSUMER}).result(timeout=10).valid
        assert group in {g.group_id for g in typed}
        classic = admin.list_consumer_groups(types={ck.ConsumerGroupType.CLASSIC}).result(timeout=10).valid
        assert group not in {g.group_id for g in classic}
    finally:
        c.close()
    # Empty now (the member left): it can be deleted.
    assert wait_for(lambda: admin.describe_consumer_groups([group])[group].result(timeout=10).state ==
                    ck.ConsumerGroupState.EMPTY, 10, 0.2)
    admin.delete_consumer_groups([group])[group].result(timeout=10)


def test_a_regex_subscription_and_a_static_member_that_restarts(cluster):
    """librdkafka sends ``^``-regexes as SubscribedTopicRegex (v1); a static member closing sends
    epoch -2 and keeps its partitions until the same group.instance.id is back (no rebalance)."""
    seen: list = []
    r = consumer(cluster, "kip848-regex")
    try:
        r.subscribe(["^kip84.*"])
        poll_until([r], lambda: split([r]), seen)
    finally:
        r.close()
    group = "kip848-static"
    a = consumer(cluster, group, **{"group.instance.id": "a"})
    b = consumer(cluster, group, **{"group.instance.id": "b"})
    again = None
    try:
        a.subscribe([TOPIC])
        b.subscribe([TOPIC])
        poll_until([a, b], lambda: split([a, b], PARTITIONS // 2), seen)
        mine, theirs = partitions_of(b), partitions_of(a)
        b.close()
        for _ in range(20):  # a few of a's heartbeats (300 ms apart)
            a.poll(0.05)
        assert partitions_of(a) == theirs  # b's partitions wait for b
        again = consumer(cluster, group, **{"group.instance.id": "b"})
        again.subscribe([TOPIC])
        poll_until([a, again], lambda: partitions_of(again) == mine, seen, timeout=10)
        assert partitions_of(a) == theirs
    finally:
        for c in (a, again):
            if c is not None:
                c.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_live_classic_group_upgrades_to_a_consumer_group_and_back(cluster, strategy):
    """Kafka 4's online migration: a group.protocol=consumer member joins two classic consumers,
    the group becomes a consumer group in which the classic members keep consuming (the
    coordinator assigns them through JoinGroup/SyncGroup); when it leaves, the group is classic
    again."""
    group = f"kip848-mixed-{strategy}"
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    seen: list = []
    classic = [Consumer({"bootstrap.servers": cluster.broker_bootstrap, "group.id": group, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 300, "partition.assignment.strategy": strategy,
                         "auto.offset.reset": "earliest", **QUIET}) for _ in range(2)]
    modern = None
    try:
        for c in classic:
            c.subscribe([TOPIC])
        poll_until(classic, lambda: split(classic, 3), seen)
        modern = consumer(cluster, group)
        modern.subscribe([TOPIC])
        poll_until(classic + [modern], lambda: split(classic + [modern], 2), seen)
        assert admin.describe_consumer_groups([group])[group].result(timeout=10).type == ck.ConsumerGroupType.CONSUMER
        poll_until(classic + [modern], lambda: VALUES <= set(seen), seen)
        modern.close()
        modern = None
        poll_until(classic, lambda: split(classic, 3), seen)
        assert admin.describe_consumer_groups([group])[group].result(timeout=10).type == ck.ConsumerGroupType.CLASSIC
    finally:
        for c in classic + ([modern] if modern else []):
            c.close()


def test_the_group_goes_on_after_the_coordinator_is_killed(cluster):
    """The new coordinator replays the group's records: the member keeps its member id, epoch and
    partitions, its heartbeats and commits go on, and nothing is reassigned."""
    group = "kip848-failover"
    seen: list = []
    c = consumer(cluster, group)
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    md = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC]
    victim = md.partitions[partition_for(group, len(md.partitions))].leader
    try:
        c.subscribe([TOPIC])
        poll_until([c], lambda: split([c]), seen)
        before = admin.describe_consumer_groups([group])[group].result(timeout=10)
        cluster.kill(victim)

        def commit_again():
            try:
                return c.commit(offsets=[TopicPartition(TOPIC, 0, 7)], asynchronous=False)
            except ck.KafkaException:
                c.poll(0.1)
                return None
        assert wait_for(commit_again, 30, 0.2), "no commit after the coordinator was killed"
        after = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert [m.member_id for m in after.members] == [m.member_id for m in before.members]
        assert partitions_of(c) == set(range(PARTITIONS))
    finally:
        c.close()
        cluster.start(victim)
