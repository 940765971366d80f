"""docs/configs.md against live nodes: every row of the config table (the same definitions the
table is generated from) is tried on a real cluster (node 1 broker+controller, node 2 broker
only, requests sent to node 2 so the controller gets them forwarded) with confluent-kafka's
admin client, so no config can drift back to "stored but ignored":

* each applied or accepted topic config: SET with a valid non-default value (also through a
  validate-only CreateTopics), DescribeConfigs shows it as the topic's, DELETE restores Kafka's
  default; a limited one: its refused value is INVALID_CONFIG, its allowed value passes; a
  refused one: INVALID_CONFIG, also through validate-only CreateTopics;
* each broker config: read-only ones get Kafka's INVALID_REQUEST, refused ones INVALID_CONFIG
  (Kafka's INVALID_REQUEST first where Kafka refuses them), the others are accepted;
* and the effects that are cheap to see: message.max.bytes (dynamic, cluster default) and
  max.message.bytes on the next Produce, segment.bytes and segment.ms on disk, retention.ms
  deleting segments, min.insync.replicas refusing acks=all, cleanup.policy=compact refusing a
  record without a key.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

import pytest

from kraft.cli.local_cluster import LocalCluster, wait_for
from kraft.client.node_client import NodeClient
from kraft.metadata.broker_config_defs import BROKER_CONFIGS
from kraft.metadata.config_defs import TOPIC_CONFIGS, ConfigType, Mode, Status
from kraft.protocol import IncrementalAlterConfigsRequest

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
from confluent_kafka import KafkaError, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,  # noqa: E402
                                   NewTopic)

pytestmark = pytest.mark.integration

SETTINGS = {
    "controller.quorum.append.linger.ms": "0",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "300",
    "log.retention.check.interval.ms": "500",  # retention runs often enough to be seen
}
_SILENT = logging.getLogger("kraft-test-rdkafka")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False
QUIET = {"logger": _SILENT}
TOPIC, BROKER = ConfigResource.Type.TOPIC, ConfigResource.Type.BROKER

#: a valid, non-default value of every topic config that is applied or accepted, and the value
#: kraft refuses of every limited one; a config without an entry fails the walk
TOPIC_EXAMPLES = {
    "cleanup.policy": "compact,delete", "compression.type": "zstd", "compression.gzip.level": "5",
    "compression.lz4.level": "12", "compression.zstd.level": "7", "delete.retention.ms": "1000",
    "flush.messages": "1000", "flush.ms": "5000", "index.interval.bytes": "8192", "local.retention.bytes": "100000",
    "local.retention.ms": "100000", "max.compaction.lag.ms": "86400000", "max.message.bytes": "500000",
    "message.timestamp.after.max.ms": "7200000", "message.timestamp.before.max.ms": "86400000",
    "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.3", "min.compaction.lag.ms": "100",
    "min.insync.replicas": "2", "remote.log.copy.disable": "true", "remote.log.delete.on.disable": "true",
    "retention.bytes": "100000000", "retention.ms": "86400000", "segment.bytes": "2097152",
    "segment.index.bytes": "1048576", "segment.jitter.ms": "1000", "segment.ms": "3600000",
    "unclean.leader.election.enable": "true",
    # limited: the value kraft refuses (the default is what it allows)
    "preallocate": "true", "remote.storage.enable": "true",
    # refused: any valid value
    "file.delete.delay.ms": "1000", "follower.replication.throttled.replicas": "0:1",
    "leader.replication.throttled.replicas": "*",
}
#: security configs Kafka updates only with a listener prefix: INVALID_REQUEST before kraft's refusal
LISTENER_ONLY = {"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
                 "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
                 "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"}
_BY_TYPE = {ConfigType.INT: "4", ConfigType.LONG: "4000", ConfigType.SHORT: "4", ConfigType.DOUBLE: "0.5",
            ConfigType.BOOLEAN: "true"}


def broker_example(d) -> str:
    """A valid value of broker config ``d``: its topic config's example for a topic default,
    else one of its type."""
    for topic, definition in TOPIC_CONFIGS.items():
        if d.note.startswith(f"default of {topic}:"):
            return TOPIC_EXAMPLES[topic]
    return _BY_TYPE.get(d.type, "x")


def _brokers(admin) -> list:
    try:
        return sorted(admin.list_topics(timeout=5).brokers)
    except KafkaException:  # not serving yet
        return []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(str(tmp_path_factory.mktemp("configs")), 1, combined=True, brokers=1, overrides=SETTINGS).create()
    c.start()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{c.broker_ports[2]}", **QUIET})
    assert wait_for(lambda: _brokers(admin) == [1, 2], 60, 0.3), c.unexpected_exits()
    yield c
    assert c.unexpected_exits() == {}
    c.stop()
    c.close()


@pytest.fixture(scope="module")
def admin(cluster):
    # Node 2 is broker only: every write it gets is forwarded to the controller on node 1.
    client = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.broker_ports[2]}", **QUIET})
    client.broker_port = cluster.broker_ports[2]
    return client


def code_of(future) -> int:
    try:
        future.result(30)
        return 0
    except KafkaException as exc:
        return exc.args[0].code()


def alter(admin, kind, name, config: str, value, op=AlterConfigOpType.SET) -> int:
    if kind == BROKER and name == "":
        return alter_cluster_default(admin, config, value, op)
    entry = ConfigEntry(config, value, incremental_operation=op)
    (future,) = admin.incremental_alter_configs([ConfigResource(kind, name, incremental_configs=[entry])]).values()
    return code_of(future)


def alter_cluster_default(admin, config: str, value, op) -> int:
    """IncrementalAlterConfigs on the cluster-wide default (BROKER ""), which confluent-kafka
    refuses to send (it wants a broker id): our client, to the same broker-only node."""
    R = IncrementalAlterConfigsRequest.Resource

    async def send():
        client = NodeClient("127.0.0.1", admin.broker_port, client_id="config-walk", request_timeout_ms=20_000)
        try:
            return await client.request(IncrementalAlterConfigsRequest(resources=[R(
                resource_type=4, resource_name="", configs=[R.Config(name=config, config_operation=int(op.value),
                                                                     value=value)])]), 1)
        finally:
            await client.close()
    return asyncio.run(send()).responses[0].error_code


def create(admin, name: str, configs: dict | None = None, *, validate_only=False, partitions=1) -> int:
    (future,) = admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})],
                                    validate_only=validate_only, operation_timeout=20).values()
    return code_of(future)


def described(admin, name: str) -> dict:
    (future,) = admin.describe_configs([ConfigResource(TOPIC, name)]).values()
    return future.result(30)


DYNAMIC_TOPIC = ck.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def shows(admin, topic: str, name: str, value: str, source: int | None = None) -> bool:
    entry = described(admin, topic)[name]
    return entry.value == value and (source is None or entry.source == source)


# --- the table, row by row --------------------------------------------------------------------


def test_every_topic_config_row_holds_on_a_live_node(admin):
    assert create(admin, "walk") == 0
    assert wait_for(lambda: "walk" in admin.list_topics(timeout=5).topics, 20)
    missing = sorted(set(TOPIC_CONFIGS) - set(TOPIC_EXAMPLES))
    assert not missing, f"add a walk example for {missing}"
    wrong = []
    for name, d in sorted(TOPIC_CONFIGS.items()):
        example = TOPIC_EXAMPLES[name]
        if d.status in (Status.APPLIED, Status.ACCEPTED):
            got = (alter(admin, TOPIC, "walk", name, example), create(admin, "walk-v", {name: example},
                                                                      validate_only=True))
            # DescribeConfigs reads node 2's image, which follows the commit within moments.
            if got != (0, 0) or not wait_for(lambda: shows(admin, "walk", name, example, DYNAMIC_TOPIC), 10, 0.05):
                wrong.append((name, got, described(admin, "walk")[name]))
            alter(admin, TOPIC, "walk", name, None, AlterConfigOpType.DELETE)
            if not wait_for(lambda: shows(admin, "walk", name, d.default), 10, 0.05):
                wrong.append((name, "not restored by DELETE"))
        else:
            expect = (KafkaError.INVALID_CONFIG, KafkaError.INVALID_CONFIG)
            got = (alter(admin, TOPIC, "walk", name, example), create(admin, "walk-v", {name: example},
                                                                      validate_only=True))
            if got != expect:
                wrong.append((name, d.status, got))
            if d.status == Status.LIMITED and alter(admin, TOPIC, "walk", name, d.default) != 0:
                wrong.append((name, "allowed value refused"))
    assert wrong == [], "\n".join(map(str, wrong))
    assert "walk-v" not in admin.list_topics(timeout=5).topics  # validate_only created nothing


def test_unknown_bad_and_removed_topic_configs_are_refused_at_creation(admin):
    for configs in ({"dummy.doesntexist": "1"}, {"retention.ms": "notanumber"}, {"message.format.version": "3.0"},
                    {"message.downconversion.enable": "true"}):
        assert create(admin, "bad", configs, validate_only=True) == KafkaError.INVALID_CONFIG, configs
        assert create(admin, "bad", configs) == KafkaError.INVALID_CONFIG, configs
    assert "bad" not in admin.list_topics(timeout=5).topics


def test_append_and_subtract_on_a_list_config(admin):
    assert create(admin, "lists") == 0
    assert alter(admin, TOPIC, "lists", "cleanup.policy", "compact", AlterConfigOpType.APPEND) == 0
    assert wait_for(lambda: shows(admin, "lists", "cleanup.policy", "delete,compact"), 10, 0.05)
    assert alter(admin, TOPIC, "lists", "cleanup.policy", "delete", AlterConfigOpType.SUBTRACT) == 0
    assert wait_for(lambda: shows(admin, "lists", "cleanup.policy", "compact"), 10, 0.05)
    assert alter(admin, TOPIC, "lists", "retention.ms", "1", AlterConfigOpType.APPEND) == KafkaError.INVALID_CONFIG
    # The throttled-replica lists take APPEND too; "*" joins no other entry (Kafka's validator).
    assert alter(admin, TOPIC, "lists", "leader.replication.throttled.replicas", "0:1", AlterConfigOpType.APPEND) == 0
    assert alter(admin, TOPIC, "lists", "leader.replication.throttled.replicas", "1:2", AlterConfigOpType.APPEND) == 0
    assert wait_for(lambda: shows(admin, "lists", "leader.replication.throttled.replicas", "0:1,1:2"), 10, 0.05)
    assert alter(admin, TOPIC, "lists", "leader.replication.throttled.replicas", "*",
                 AlterConfigOpType.APPEND) == KafkaError.INVALID_CONFIG


def test_every_broker_config_row_holds_on_a_live_node(admin):
    wrong = []
    for name, d in sorted(BROKER_CONFIGS.items()):
        resource = "1" if d.mode == Mode.PER_BROKER else ""
        value = d.default if d.status == Status.LIMITED else broker_example(d)
        if d.status == Status.LIMITED:
            value = {"log.preallocate": "true"}[name]
        if d.status == Status.READ_ONLY or name in LISTENER_ONLY:
            expect = KafkaError.INVALID_REQUEST
        elif d.status in (Status.REFUSED, Status.LIMITED):
            expect = KafkaError.INVALID_CONFIG
        else:
            expect = 0
        got = alter(admin, BROKER, resource, name, value)
        if got != expect:
            wrong.append((name, d.status, resource, value, got))
        if got == 0:
            alter(admin, BROKER, resource, name, None, AlterConfigOpType.DELETE)
    for name, code in (("listener.name.plaintext.max.connections", KafkaError.INVALID_CONFIG),
                       ("custom.plugin.setting", KafkaError.INVALID_CONFIG)):
        got = alter(admin, BROKER, "1", name, "5")
        if got != code:
            wrong.append((name, got))
    assert wrong == [], "\n".join(map(str, wrong))


# --- effects ----------------------------------------------------------------------------------


def produce(cluster, topic: str, values, *, acks="1", keys=None, timeout=20.0) -> list:
    """Delivery error codes (0: delivered), one per value, in order."""
    producer = Producer({"bootstrap.servers": cluster.broker_bootstrap, "acks": acks, "linger.ms": 0,
                         "message.max.bytes": 10_000_000, "retries": 0, "message.send.max.retries": 0, **QUIET})
    codes = [None] * len(values)

    def done(i):
        def cb(err, msg):
            codes[i] = 0 if err is None else err.code()
        return cb
    for i, value in enumerate(values):
        producer.produce(topic, value, key=None if keys is None else keys[i], on_delivery=done(i))
        producer.poll(0)
    producer.flush(timeout)
    return codes


def leader_of(admin, topic: str) -> int:
    """The partition's leader, -1 while no broker answering Metadata knows one yet."""
    partitions = admin.list_topics(topic, timeout=5).topics[topic].partitions
    return partitions[0].leader if 0 in partitions else -1


def leader_dir(cluster, admin, topic: str) -> str:
    # Asked once: librdkafka asks any broker, and one that has not applied the topic yet says -1.
    leader = wait_for(lambda: max(leader_of(admin, topic), 0), 20)
    assert leader, f"{topic} has no leader"
    return os.path.join(cluster.partition_dir(leader), f"{topic}-0")


def segments(path: str) -> list:
    return sorted(f for f in os.listdir(path) if f.endswith(".log"))


def new_topic(admin, name: str, configs=None):
    assert create(admin, name, configs) == 0
    assert wait_for(lambda: leader_of(admin, name) >= 0, 20)


def test_message_max_bytes_and_max_message_bytes_apply_on_the_next_produce(cluster, admin):
    new_topic(admin, "sizes")
    big = [b"x" * 20_000]
    assert produce(cluster, "sizes", big) == [0]
    assert alter(admin, BROKER, "", "message.max.bytes", "10000") == 0  # cluster-wide, no restart
    assert wait_for(lambda: produce(cluster, "sizes", big) == [KafkaError.MSG_SIZE_TOO_LARGE], 10, 0.5)
    assert alter(admin, TOPIC, "sizes", "max.message.bytes", "50000") == 0
    assert wait_for(lambda: produce(cluster, "sizes", big) == [0], 10, 0.5)
    assert alter(admin, TOPIC, "sizes", "max.message.bytes", "15000") == 0
    assert wait_for(lambda: produce(cluster, "sizes", big) == [KafkaError.MSG_SIZE_TOO_LARGE], 10, 0.5)
    assert alter(admin, BROKER, "", "message.max.bytes", None, AlterConfigOpType.DELETE) == 0


def test_segment_bytes_and_segment_ms_roll_segments_on_disk(cluster, admin):
    new_topic(admin, "rolls", {"segment.bytes": str(1 << 20)})
    path = leader_dir(cluster, admin, "rolls")
    assert produce(cluster, "rolls", [b"v" * 50_000] * 60) == [0] * 60  # 3 MB
    assert len(segments(path)) >= 3
    assert all(os.path.getsize(os.path.join(path, f)) <= 1 << 20 for f in segments(path))
    new_topic(admin, "aging")
    path = leader_dir(cluster, admin, "aging")
    assert produce(cluster, "aging", [b"a"]) == [0]
    assert alter(admin, TOPIC, "aging", "segment.ms", "1000") == 0
    time.sleep(2.5)
    assert produce(cluster, "aging", [b"b"]) == [0]
    assert wait_for(lambda: len(segments(path)) == 2, 10), segments(path)


def test_retention_ms_deletes_old_segments(cluster, admin):
    new_topic(admin, "retained", {"segment.ms": "500"})
    path = leader_dir(cluster, admin, "retained")
    for _ in range(3):
        assert produce(cluster, "retained", [b"r"]) == [0]
        time.sleep(0.7)
    assert produce(cluster, "retained", [b"last"]) == [0]
    assert len(segments(path)) >= 3
    assert alter(admin, TOPIC, "retained", "retention.ms", "1000") == 0
    assert wait_for(lambda: segments(path)[0] != "00000000000000000000.log", 20), segments(path)


def test_min_insync_replicas_refuses_acks_all_when_the_isr_is_too_small(cluster, admin):
    new_topic(admin, "isr")
    assert produce(cluster, "isr", [b"a"], acks="all") == [0]
    assert alter(admin, TOPIC, "isr", "min.insync.replicas", "2") == 0  # RF 1: never two in sync
    assert wait_for(lambda: produce(cluster, "isr", [b"a"], acks="all") == [KafkaError.NOT_ENOUGH_REPLICAS], 10, 0.5)
    assert produce(cluster, "isr", [b"a"], acks="1") == [0]


def test_cleanup_policy_compact_refuses_records_without_a_key(cluster, admin):
    new_topic(admin, "compacted", {"cleanup.policy": "compact"})
    assert produce(cluster, "compacted", [b"v"], keys=[b"k"]) == [0]
    assert produce(cluster, "compacted", [b"v"]) == [KafkaError.INVALID_RECORD]


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_legacy_alter_configs_gets_the_same_verdicts(admin):
    """AlterConfigs (the whole set replaced) is validated as IncrementalAlterConfigs is."""
    assert create(admin, "legacy") == 0
    for configs, code in (({"preallocate": "true"}, KafkaError.INVALID_CONFIG),
                          ({"retention.ms": "soon"}, KafkaError.INVALID_CONFIG),
                          ({"retention.ms": "3600000", "segment.bytes": str(1 << 21)}, 0)):
        (future,) = admin.alter_configs([ConfigResource(TOPIC, "legacy", set_config=configs)]).values()
        assert code_of(future) == code, configs
    assert wait_for(lambda: shows(admin, "legacy", "segment.bytes", str(1 << 21), DYNAMIC_TOPIC), 10, 0.05)
