"""Consumer groups against 3 combined ``kraft server start`` processes, with real clients:
confluent-kafka (librdkafka) subscribe with 1, 2 and 3 consumers rebalancing (eager ``range``
and ``cooperative-sticky``), commit sync/async and ``committed``; kafka-python and aiokafka
subscribe + commit; ``kcat -G``; AdminClient list/describe/delete groups and list/alter
offsets; lz4 and zstd batches from librdkafka land compressed on disk (librdkafka enables them
only when the group APIs are advertised); committed offsets survive a SIGKILL of the
coordinator's node and a restart of the whole cluster. One cluster for the module."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.coordinator.group_records import OFFSETS_TOPIC, partition_for

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import (Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, Producer,  # noqa: E402
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from .test_broker_cluster import QUIET, SETTINGS, all_see_all  # noqa: E402

pytestmark = pytest.mark.integration
TOPIC = "orders"
PARTITIONS = 6
RECORDS = 60
GROUP_SETTINGS = {**SETTINGS, "group.initial.rebalance.delay.ms": "0"}
FAST = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000, **QUIET}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(str(tmp_path_factory.mktemp("groups")), 3, combined=True, overrides=GROUP_SETTINGS).create()
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


def consumer(cluster, group, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.broker_bootstrap, "group.id": group, "enable.auto.commit": False,
                     **FAST, **extra})


def poll_until(consumers, done, timeout=30.0, seen=None):
    """Poll every consumer round-robin until ``done()``; returns the values each one read."""
    seen = seen if seen is not None else {id(c): [] for c in consumers}
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen.setdefault(id(c), []).append(m.value())
        if done():
            return seen
    raise AssertionError(f"timed out; assignments {[c.assignment() for c in consumers]}")


def partitions_of(c) -> set:
    return {tp.partition for tp in c.assignment()}


def split_covers(consumers) -> bool:
    sets = [partitions_of(c) for c in consumers]
    return all(sets) and sum(len(s) for s in sets) == PARTITIONS and set().union(*sets) == set(range(PARTITIONS))


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_one_two_three_consumers_rebalance_and_split_the_partitions(cluster, strategy):
    group = f"rebalance-{strategy}"
    cs = [consumer(cluster, group, **{"partition.assignment.strategy": strategy})]
    try:
        cs[0].subscribe([TOPIC])
        seen = poll_until(cs, lambda: split_covers(cs))
        for _ in range(2):
            cs.append(consumer(cluster, group, **{"partition.assignment.strategy": strategy}))
            cs[-1].subscribe([TOPIC])
            poll_until(cs, lambda: split_covers(cs), seen=seen)
        assert all(len(partitions_of(c)) == PARTITIONS // 3 for c in cs)
        cs.pop().close()  # LeaveGroup: the other two take its partitions over
        poll_until(cs, lambda: split_covers(cs), seen=seen)
    finally:
        for c in cs:
            c.close()


def test_a_static_member_that_restarts_gets_its_partitions_back_without_a_rebalance(cluster):
    """KIP-345: librdkafka's static members do not leave on close; the same group.instance.id
    rejoining takes its old place, and the other member is never revoked."""
    group = "static"
    revoked = []
    a = consumer(cluster, group, **{"group.instance.id": "i-a"})
    b = consumer(cluster, group, **{"group.instance.id": "i-b"})
    restarted = None
    try:
        # b leads (it joined first); a, a follower, restarts: librdkafka's JoinGroup is below
        # v9, so a restarting static *leader* would rebalance (Kafka's rule, unit-tested)
        b.subscribe([TOPIC], on_revoke=lambda c, parts: revoked.append(len(parts)))
        poll_until([b], lambda: len(partitions_of(b)) == PARTITIONS)
        a.subscribe([TOPIC])
        poll_until([a, b], lambda: split_covers([a, b]))
        mine, theirs = partitions_of(a), partitions_of(b)
        revoked.clear()
        a.close()
        restarted = consumer(cluster, group, **{"group.instance.id": "i-a"})
        restarted.subscribe([TOPIC])
        poll_until([restarted, b], lambda: partitions_of(restarted) == mine, timeout=5)
        for _ in range(10):
            b.poll(0.1)
        assert partitions_of(b) == theirs and revoked == []
    finally:
        for c in (b, restarted):
            if c is not None:
                c.close()


def test_commit_sync_and_async_and_committed(cluster):
    c = consumer(cluster, "committer")
    try:
        c.subscribe([TOPIC])
        got = poll_until([c], lambda: False if not c.assignment() else True)
        seen = poll_until([c], lambda: len(got[id(c)]) >= RECORDS, seen=got)
        assert sorted(seen[id(c)]) == sorted(b"v%d" % i for i in range(RECORDS))
        done = c.commit(asynchronous=False)
        assert {(tp.partition, tp.offset) for tp in done} == {(p, RECORDS // PARTITIONS) for p in range(PARTITIONS)}
        c.commit(offsets=[TopicPartition(TOPIC, 0, 3)], asynchronous=True)
        assert wait_for(lambda: c.committed([TopicPartition(TOPIC, 0)], timeout=5)[0].offset == 3, 10, 0.1)
        committed = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        assert [tp.offset for tp in committed] == [3] + [RECORDS // PARTITIONS] * (PARTITIONS - 1)
    finally:
        c.close()
    # A new member of the group starts where the group committed.
    c = consumer(cluster, "committer")
    try:
        c.subscribe([TOPIC])
        rest = sorted(b"v%d" % i for i in range(3 * PARTITIONS, RECORDS, PARTITIONS))  # partition 0 from 3
        box: dict = {}
        poll_until([c], lambda: len(box.get(id(c), [])) >= len(rest), seen=box)
        time.sleep(0.5)
        poll_until([c], lambda: True, seen=box)
        assert sorted(box[id(c)]) == rest
    finally:
        c.close()


def test_kafka_python_subscribe_and_commit(cluster):
    kafka = pytest.importorskip("kafka")
    c = kafka.KafkaConsumer(TOPIC, bootstrap_servers=cluster.broker_bootstrap, group_id="kafka-python",
                            auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=20000)
    try:
        values = []
        for m in c:
            values.append(m.value)
            if len(values) == RECORDS:
                break
        assert sorted(values) == sorted(b"v%d" % i for i in range(RECORDS))
        c.commit()
        assert c.committed(kafka.TopicPartition(TOPIC, 1)) == RECORDS // PARTITIONS
    finally:
        c.close()


def test_aiokafka_subscribe_and_commit(cluster):
    aiokafka = pytest.importorskip("aiokafka")

    async def run():
        c = aiokafka.AIOKafkaConsumer(TOPIC, bootstrap_servers=cluster.broker_bootstrap, group_id="aiokafka",
                                      auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            values = []
            while len(values) < RECORDS:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 20)
                values += [m.value for ms in batch.values() for m in ms]
            await c.commit()
            return sorted(values), await c.committed(aiokafka.TopicPartition(TOPIC, 2))
        finally:
            await c.stop()
    values, committed = asyncio.run(asyncio.wait_for(run(), 60))
    assert values == sorted(b"v%d" % i for i in range(RECORDS))
    assert committed == RECORDS // PARTITIONS


def test_kcat_balanced_consumer(cluster):
    if not any(os.access(os.path.join(d, "kcat"), os.X_OK) for d in os.environ.get("PATH", "").split(":")):
        pytest.skip("kcat is not installed")
    # -e: exit once every assigned partition is at its end (after the group assigned them).
    out = subprocess.run(["kcat", "-b", cluster.broker_bootstrap, "-G", "kcat-group", "-o", "beginning", "-e",
                          "-X", "session.timeout.ms=6000", "-f", "%s\n", TOPIC], capture_output=True,
                         timeout=60).stdout
    assert sorted(out.split()) == sorted(b"v%d" % i for i in range(RECORDS))
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("kcat-group")])["kcat-group"].result(
        timeout=10)
    assert {tp.offset for tp in got.topic_partitions} == {RECORDS // PARTITIONS}  # committed on leaving


def test_admin_lists_describes_deletes_groups_and_offsets(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    c = consumer(cluster, "admin-live")
    try:
        c.subscribe([TOPIC])
        poll_until([c], lambda: len(partitions_of(c)) == PARTITIONS)
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(timeout=10).valid}
        assert listed["admin-live"].state == ConsumerGroupState.STABLE
        d = admin.describe_consumer_groups(["admin-live"])["admin-live"].result(timeout=10)
        assert d.state == ConsumerGroupState.STABLE and d.partition_assignor == "range"
        [m] = d.members
        assert {tp.partition for tp in m.assignment.topic_partitions} == set(range(PARTITIONS))
        stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(timeout=10).valid
        assert "admin-live" in {g.group_id for g in stable}
        # A live group cannot be deleted.
        with pytest.raises(ck.KafkaException) as err:
            admin.delete_consumer_groups(["admin-live"])["admin-live"].result(timeout=10)
        assert err.value.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP
    finally:
        c.close()
    # Offsets of an empty group: altered, listed, deleted with the group.
    want = [TopicPartition(TOPIC, p, 5 + p) for p in range(PARTITIONS)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("admin-live", want)])["admin-live"].result(
        timeout=10)
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("admin-live")])["admin-live"].result(
        timeout=10)
    assert sorted((tp.partition, tp.offset) for tp in got.topic_partitions) == [(p, 5 + p) for p in range(PARTITIONS)]
    admin.delete_consumer_groups(["admin-live"])["admin-live"].result(timeout=10)
    assert "admin-live" not in {g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid}
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("admin-live")])["admin-live"].result(
        timeout=10)
    assert all(tp.offset < 0 for tp in got.topic_partitions)


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_librdkafka_compresses_with_lz4_and_zstd_on_disk(cluster, codec):
    topic = f"codec-{codec}"
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result()
    p = Producer({"bootstrap.servers": cluster.broker_bootstrap, "compression.type": codec, "linger.ms": 20, **QUIET})
    for i in range(200):
        p.produce(topic, value=b"compressible value %d " % i * 4)
    assert p.flush(30) == 0
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    seg = os.path.join(cluster.partition_dir(leader), f"{topic}-0", "00000000000000000000.log")
    out = subprocess.run([sys.executable, "-m", "kraft", "dump-log", "--batches-only", "--files", seg],
                         capture_output=True, text=True, timeout=60, env=cluster.environment()).stdout
    codecs = {line.split("compresscodec: ")[1].split()[0] for line in out.splitlines() if "compresscodec:" in line}
    assert codecs == {codec}, out[-500:]


def coordinator_of(admin, group: str) -> int:
    md = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC]
    return md.partitions[partition_for(group, len(md.partitions))].leader


def test_committed_offsets_survive_a_sigkill_of_the_coordinator_and_a_cluster_restart(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    group = "durable"
    acked = {}
    c = consumer(cluster, group)
    try:
        c.subscribe([TOPIC])
        poll_until([c], lambda: len(partitions_of(c)) == PARTITIONS)
        for p in range(PARTITIONS):
            acked.update({tp.partition: tp.offset for tp in c.commit(
                offsets=[TopicPartition(TOPIC, p, 100 + p)], asynchronous=False)})
        victim = coordinator_of(admin, group)
        cluster.kill(victim)
        # The live member goes on with the new coordinator (which loaded the group as Stable
        # with it as a member): its next commit succeeds in the same generation.
        def commit_again():
            try:
                return c.commit(offsets=[TopicPartition(TOPIC, 0, 200)], asynchronous=False)
            except ck.KafkaException:
                c.poll(0.1)
                return None
        assert wait_for(commit_again, 30, 0.2), "no commit after the coordinator was killed"
        acked[0] = 200
        assert partitions_of(c) == set(range(PARTITIONS))
    finally:
        c.close()

    def fetched():
        c2 = consumer(cluster, group)
        try:
            got = c2.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=5)
            return {tp.partition: tp.offset for tp in got}
        except ck.KafkaException:
            return None
        finally:
            c2.close()
    assert wait_for(lambda: fetched() == acked, 30, 0.5), "an acknowledged commit was lost after SIGKILL"
    assert coordinator_of(admin, group) != victim
    cluster.start(victim)
    cluster.stop()
    cluster.start()
    assert wait_for(lambda: all_see_all(cluster), 60, 0.2)
    assert wait_for(lambda: fetched() == acked, 30, 0.5), "an acknowledged commit was lost after a restart"


def test_hostile_group_requests_get_kafka_error_codes_and_features_are_reported(cluster):
    """Bad group ids, unknown members, oversized metadata, transaction keys: error codes, the
    connection stays usable; ApiVersions v3 reports the finalized metadata.version."""
    from kraft.client.node_client import NodeClient
    from kraft.errors import ErrorCode as E
    from kraft.protocol import (ApiVersionsRequest, FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest,
                                OffsetCommitRequest, SyncGroupRequest)
    from .quorum_helpers import run

    async def ask():
        first = NodeClient(*cluster.broker_address(cluster.ids[0]), client_id="hostile")
        try:
            for _ in range(100):  # the offsets topic may not exist yet: it is created meanwhile
                found = await first.request(FindCoordinatorRequest(key="hostile", key_type=0), 3)
                if found.error_code == 0:
                    break
                await asyncio.sleep(0.2)
            assert found.error_code == 0, found
        finally:
            await first.close()
        client = NodeClient(found.host, found.port, client_id="hostile")
        J = JoinGroupRequest
        try:
            out = {}
            for _ in range(100):  # COORDINATOR_LOAD_IN_PROGRESS while its shard loads
                hb = await client.request(HeartbeatRequest(group_id="hostile", generation_id=3, member_id="x"), 4)
                if hb.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR):
                    break
                await asyncio.sleep(0.1)
            resp = await client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]), 4)
            out["tx"] = resp.coordinators[0].error_code
            join = J(group_id="", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                     protocol_type="consumer", protocols=[J.Protocol(name="range", metadata=b"")])
            out["empty id"] = (await client.request(join, 5)).error_code
            join.group_id, join.member_id = "hostile", "who-am-i"
            out["unknown member"] = (await client.request(join, 5)).error_code
            join.member_id, join.session_timeout_ms = "", 1
            out["session"] = (await client.request(join, 5)).error_code
            join.session_timeout_ms, join.protocols = 10000, [J.Protocol(name="range", metadata=b"x" * (2 << 20))]
            out["huge metadata"] = (await client.request(join, 5)).error_code
            join.protocols, join.protocol_type = [], "consumer"
            out["no protocols"] = (await client.request(join, 5)).error_code
            out["heartbeat"] = (await client.request(HeartbeatRequest(group_id="hostile", generation_id=3,
                                                                      member_id="nobody"), 4)).error_code
            out["sync"] = (await client.request(SyncGroupRequest(group_id="hostile", generation_id=1,
                                                                 member_id="nobody", assignments=[]), 5)).error_code
            C = OffsetCommitRequest
            commit = C(group_id="", generation_id_or_member_epoch=-1, member_id="", topics=[C.Topic(
                name=TOPIC, partitions=[C.Topic.Partition(partition_index=0, committed_offset=1,
                                                          committed_metadata="m" * 5000)])])
            out["empty group id"] = (await client.request(commit, 8)).topics[0].partitions[0].error_code
            commit.group_id = "hostile"
            out["metadata too large"] = (await client.request(commit, 8)).topics[0].partitions[0].error_code
            versions = await client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                                            3)
            return out, {f.name: f.max_version_level for f in versions.finalized_features}, \
                versions.finalized_features_epoch
        finally:
            await client.close()
    out, finalized, epoch = run(ask())
    assert out == {"tx": E.COORDINATOR_NOT_AVAILABLE, "empty id": E.INVALID_GROUP_ID,
                   "unknown member": E.UNKNOWN_MEMBER_ID, "session": E.INVALID_SESSION_TIMEOUT,
                   "huge metadata": E.INCONSISTENT_GROUP_PROTOCOL, "no protocols": E.INCONSISTENT_GROUP_PROTOCOL,
                   "heartbeat": E.UNKNOWN_MEMBER_ID, "sync": E.UNKNOWN_MEMBER_ID,
                   "empty group id": E.INVALID_GROUP_ID, "metadata too large": E.OFFSET_METADATA_TOO_LARGE}
    assert finalized.get("metadata.version", 0) >= 7 and epoch >= 0
    assert not cluster.unexpected_exits()


def test_a_one_node_cluster_serves_groups(tmp_path):
    """LocalCluster lowers offsets.topic.replication.factor to its broker count (Kafka's
    quickstart does the same), so the offsets topic can be created on one node."""
    with LocalCluster(str(tmp_path), 1, combined=True, overrides=GROUP_SETTINGS).create() as one:
        one.start()
        assert wait_for(lambda: all_see_all(one), 60, 0.2)
        p = Producer({"bootstrap.servers": one.broker_bootstrap, **QUIET})
        p.produce("solo", value=b"x")  # auto-created
        p.flush(30)
        c = consumer(one, "solo-group")
        try:
            c.subscribe(["solo"])
            got = poll_until([c], lambda: False if not c.assignment() else True)
            poll_until([c], lambda: len(got.get(id(c), [])) >= 1, seen=got)
            [tp] = c.commit(asynchronous=False)
            assert tp.offset == 1
        finally:
            c.close()


def test_dump_log_decodes_the_offsets_topic_as_kafka_dump_log_does(cluster):
    """``kraft dump-log --offsets-decoder`` on the coordinator's ``__consumer_offsets`` segment:
    the commit as Kafka's OffsetCommitKey/Value JSON, the group's metadata with the members'
    consumer-protocol subscription decoded."""
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
    group = "dump-decoder"
    c = consumer(cluster, group)
    try:
        c.subscribe([TOPIC])
        poll_until([c], lambda: len(partitions_of(c)) == PARTITIONS)
        c.commit(offsets=[TopicPartition(TOPIC, 2, 17)], asynchronous=False)
    finally:
        c.close()
    md = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC]
    p = partition_for(group, len(md.partitions))
    seg = os.path.join(cluster.partition_dir(md.partitions[p].leader), f"{OFFSETS_TOPIC}-{p}",
                       "00000000000000000000.log")
    out = subprocess.run([sys.executable, "-m", "kraft", "dump-log", "--offsets-decoder", "--files", seg],
                         capture_output=True, text=True, timeout=60, env=cluster.environment()).stdout
    commit = f'key: {{"type":"1","data":{{"group":"{group}","topic":"{TOPIC}","partition":2}}}} ' \
             f'payload: {{"version":"3","data":{{"offset":17,"leaderEpoch":'
    assert commit in out, out[-2000:]
    metadata = [line for line in out.splitlines() if f'key: {{"type":"2","data":{{"group":"{group}"}}}}' in line]
    assert metadata, out[-2000:]
    # while the member was in the group (the last record, after close, has no members)
    assert any('"protocolType":"consumer"' in m and f'"subscription":{{"topics":["{TOPIC}"]' in m
               for m in metadata), metadata
