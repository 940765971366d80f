"""Topic and dynamic broker configs take effect on a running broker with the image that carries
them (Kafka's ``LogConfig`` of each log, ``DynamicLogConfig``): no restart. Each test changes a
config through ``ConfigRecord``s in a new image, exactly what a committed AlterConfigs brings,
and checks the effect: the Produce answer, the segments on disk, what retention deletes."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from types import SimpleNamespace

import pytest

from broker_helpers import BrokerThread

from kraft.broker.broker_state import BrokerState
from kraft.broker.handlers import BrokerHandlers
from kraft.broker.image_publisher import publish_image
from kraft.broker.partition_logs import PartitionLogs
from kraft.broker.topic_configs import follow_topic_configs
from kraft.errors import ErrorCode as E
from kraft.log import LogConfig
from kraft.metadata import ConfigRecord, MetadataDelta, PartitionRecord, RegisterBrokerRecord, TopicRecord
from kraft.metadata.configs import BROKER, TOPIC
from kraft.metadata.image import EMPTY_IMAGE
from kraft.protocol import ProduceRequest
from kraft.records import build_batch, iter_batches
from kraft.records.format import Compression

TID = uuid.UUID(int=0x70)
MIB = 1 << 20


def _image():
    d = MetadataDelta(EMPTY_IMAGE)
    d.replay(RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.UUID(int=1), broker_epoch=1, end_points=[
        RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9001)], fenced=False))
    d.replay(TopicRecord(name="t", topic_id=TID))
    d.replay(PartitionRecord(partition_id=0, topic_id=TID, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                             partition_epoch=0))
    return d.apply()


class Node:
    """A broker's logs, state and handlers following images, as ``BrokerNode.publish`` wires them."""

    def __init__(self, tmp_path, clock=None):
        self.logs = PartitionLogs([str(tmp_path)], LogConfig(append_linger_ms=0.0))
        self.state = BrokerState(1, self.logs, cluster_id="cid")
        follow_topic_configs(self.logs, self.state, LogConfig(append_linger_ms=0.0))
        self.now = int(time.time() * 1000)
        self.handlers = BrokerHandlers(self.state, clock_ms=clock or (lambda: self.now))
        self.publish(_image())

    def publish(self, image):
        previous = self.state.image
        publish_image(self.logs, previous, image, 1)
        self.state.image = image
        self.logs.reconfigure(self.state.topic_configs.changed_topics(previous, image))

    def set(self, kind: int, name: str, **configs):
        d = MetadataDelta(self.state.image)
        for key, value in configs.items():
            d.replay(ConfigRecord(resource_type=kind, resource_name=name, name=key.replace("_", "."), value=value))
        self.publish(d.apply())

    def produce(self, batch: bytes, acks: int = 1):
        P = ProduceRequest
        request = P(transactional_id=None, acks=acks, timeout_ms=1000, topic_data=[
            P.Topic(name="t", partition_data=[P.Topic.Partition(index=0, records=bytearray(batch))])])
        ctx = SimpleNamespace(header=SimpleNamespace(api_version=9), listener="PLAINTEXT")

        async def go():
            answer = self.handlers.handle(ctx, request)
            return await answer if asyncio.isfuture(answer) else answer
        return asyncio.run(go()).responses[0].partition_responses[0]

    @property
    def log(self):
        return self.logs.get("t", 0).log

    def close(self):
        self.handlers.close()
        self.logs.close()


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path)
    yield n
    n.close()


def test_dynamic_message_max_bytes_and_topic_max_message_bytes_apply_to_the_next_produce(node):
    big = build_batch([b"x" * 5000])
    assert node.produce(big).error_code == 0
    node.set(BROKER, "", message_max_bytes="2000")  # the cluster-wide default, no restart
    assert node.produce(big).error_code == E.MESSAGE_TOO_LARGE
    node.set(TOPIC, "t", max_message_bytes="10000")  # the topic's own setting wins
    assert node.produce(big).error_code == 0
    node.set(BROKER, "1", message_max_bytes="3000")  # per broker: still below the topic's
    assert node.produce(big).error_code == 0
    node.set(TOPIC, "t", max_message_bytes=None)  # deleted: the per-broker value applies
    assert node.produce(big).error_code == E.MESSAGE_TOO_LARGE


def _segments(log) -> list:
    return sorted(f for f in os.listdir(log.directory) if f.endswith(".log"))


def test_segment_bytes_rolls_the_topics_segments_on_disk(node):
    value = b"v" * 10_000
    node.set(TOPIC, "t", segment_bytes=str(MIB))
    for _ in range(250):  # 2.5 MB in 10 kB batches
        assert node.produce(build_batch([value])).error_code == 0
    files = _segments(node.log)
    assert len(files) == 3, files
    assert all(os.path.getsize(os.path.join(node.log.directory, f)) <= MIB for f in files)


def test_segment_ms_rolls_a_segment_older_than_it(node):
    t0 = node.now
    assert node.produce(build_batch([b"a"], timestamp=t0 - 60_000)).error_code == 0
    assert node.produce(build_batch([b"b"], timestamp=t0 - 30_000)).error_code == 0
    assert len(_segments(node.log)) == 1  # a week by default
    node.set(TOPIC, "t", segment_ms="10000")
    assert node.produce(build_batch([b"c"], timestamp=t0)).error_code == 0
    assert len(_segments(node.log)) == 2  # the first segment was 60 s old by its first batch


def test_segment_index_bytes_rolls_when_the_index_is_full(node):
    node.set(TOPIC, "t", segment_index_bytes="24", index_interval_bytes="0")  # room for 3 offset-index entries
    assert node.produce(build_batch([b"first"])).error_code == 0
    node.log.roll()  # the index interval applies to segments created after the change, as in Kafka
    for i in range(6):
        assert node.produce(build_batch([b"%d" % i], timestamp=node.now + i)).error_code == 0
    new = node.log.segments[1:]
    assert [s.next_offset - s.base_offset for s in new] == [3, 3]  # an entry per batch


def test_segment_jitter_ms_shortens_each_new_segments_age(node):
    node.set(TOPIC, "t", segment_jitter_ms="1000000", segment_ms="1000000")
    node.log.roll()
    assert node.produce(build_batch([b"a"])).error_code == 0
    node.log.roll()
    assert 0 <= node.log.segments[-1].roll_jitter_ms < 1_000_000
    assert node.log.config.segment_jitter_ms == 1_000_000


def test_retention_ms_and_bytes_apply_per_topic_and_not_to_a_compact_only_topic(node):
    old = node.now - 3_600_000
    for i in range(3):
        assert node.produce(build_batch([b"%d" % i], timestamp=old)).error_code == 0
        node.log.roll()
    node.logs.get("t", 0).high_watermark = node.log.end_offset
    assert node.logs.apply_retention(node.now) == 0  # a week by default
    node.set(TOPIC, "t", retention_ms="60000", cleanup_policy="compact")
    assert node.logs.apply_retention(node.now) == 0  # compact only: retention does not trim (Kafka's rule)
    node.set(TOPIC, "t", cleanup_policy="compact,delete")
    assert node.logs.apply_retention(node.now) == 3
    assert node.log.start_offset == 3


def test_min_insync_replicas_from_the_cluster_default_refuses_acks_all(node):
    assert node.produce(build_batch([b"a"]), acks=-1).error_code == 0
    node.set(BROKER, "", min_insync_replicas="2")
    assert node.produce(build_batch([b"a"]), acks=-1).error_code == E.NOT_ENOUGH_REPLICAS
    assert node.produce(build_batch([b"a"]), acks=1).error_code == 0


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_a_record_without_a_key_on_a_compacted_topic_is_invalid_record(node, codec):
    node.set(TOPIC, "t", cleanup_policy="compact")
    p = node.produce(build_batch([b"a", b"b", b"c"], keys=[b"k", None, None], compression=codec))
    assert p.error_code == E.INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
        (1, "Compacted topic cannot accept message without key in topic partition t-0"),
        (2, "Compacted topic cannot accept message without key in topic partition t-0")]
    assert p.error_message.startswith("One or more records have been rejected due to 2 record errors in total")
    assert node.log.end_offset == 0
    assert node.produce(build_batch([b"a"], keys=[b"k"], compression=codec)).error_code == 0


def test_timestamps_beyond_the_topics_bounds_are_invalid_timestamp(node):
    future = node.now + 2 * 3_600_000
    p = node.produce(build_batch([b"a"], timestamp=future))
    assert p.error_code == E.INVALID_TIMESTAMP  # message.timestamp.after.max.ms is an hour by default
    assert p.record_errors[0].batch_index_error_message.startswith(f"Timestamp {future} of message with offset 0")
    node.set(TOPIC, "t", message_timestamp_after_max_ms=str(3 * 3_600_000))
    assert node.produce(build_batch([b"a"], timestamp=future)).error_code == 0
    node.set(TOPIC, "t", message_timestamp_before_max_ms="1000")
    assert node.produce(build_batch([b"a"], timestamp=node.now - 5000)).error_code == E.INVALID_TIMESTAMP
    node.set(TOPIC, "t", message_timestamp_type="LogAppendTime")  # the broker's clock: no bounds
    assert node.produce(build_batch([b"a"], timestamp=node.now - 5000)).error_code == 0


@pytest.mark.parametrize("target,codec", [("gzip", Compression.GZIP), ("zstd", Compression.ZSTD),
                                          ("uncompressed", Compression.NONE)])
def test_compression_type_rewrites_batches_to_the_topics_codec(node, target, codec):
    node.set(TOPIC, "t", compression_type=target)
    sent = [build_batch([b"a" * 100, b"b"], keys=[b"1", b"2"]),
            build_batch([b"c" * 100], compression=Compression.LZ4)]
    for batch in sent:
        assert node.produce(batch).error_code == 0
    stored = list(iter_batches(node.log.read(0, 1 << 20), validate=True))
    assert [b.compression for b in stored] == [codec, codec]
    assert [[r.value for r in b] for b in stored] == [[b"a" * 100, b"b"], [b"c" * 100]]


def test_flush_settings_reach_the_log(node):
    node.set(TOPIC, "t", flush_messages="5", flush_ms="0")
    assert node.log.config.flush_interval_messages == 5 and node.log.config.append_linger_ms == 0
    node.set(TOPIC, "t", flush_messages=None, flush_ms=None)
    assert node.log.config.flush_interval_messages is None


def test_a_dynamic_max_connections_per_ip_reaches_every_listener(tmp_path):
    """Kafka's SocketServer reconfigures max.connections.per.ip at run time: per broker, else the
    cluster default, else server.properties (a real BrokerNode publishing images)."""
    with BrokerThread(str(tmp_path), {"t": 1}, props={"max.connections.per.ip": "50"}) as b:
        def set_config(resource: str, value):
            delta = MetadataDelta(b.node.state.image)
            delta.replay(ConfigRecord(resource_type=BROKER, resource_name=resource, name="max.connections.per.ip",
                                      value=value))
            b.node.publish(delta.apply())
            return [s.caps.per_ip for s in b.node.servers.values()]
        assert b.call(lambda: [s.caps.per_ip for s in b.node.servers.values()]) == [50]
        assert b.call(set_config, "", "7") == [7]
        assert b.call(set_config, "1", "3") == [3]
        assert b.call(set_config, "1", None) == [7]
        assert b.call(set_config, "", None) == [50]


@pytest.mark.parametrize("policy", ["delete", "compact", "compact,delete"])
def test_partition_logs_accept_offset_gaps_whatever_the_policy(policy):
    """A log compacted while its topic was ``compact`` keeps its gaps after a switch to
    ``delete``; a follower that required contiguous offsets would refuse its leader's batches
    for good. Kafka requires only growing offsets in a partition log."""
    from kraft.broker.topic_configs import TopicConfigs

    tid = uuid.uuid4()
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay(TopicRecord(name="t", topic_id=tid))
    delta.replay(ConfigRecord(resource_type=TOPIC, resource_name="t", name="cleanup.policy", value=policy))
    cfg = TopicConfigs(1).get(delta.apply(), "t").log_config(LogConfig())
    assert cfg.strict_order is False


def test_file_delete_delay_reaches_the_log_config():
    """Kafka's default (60 s) unless the topic sets file.delete.delay.ms."""
    from kraft.broker.topic_configs import TopicConfigs

    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay(TopicRecord(name="t", topic_id=uuid.uuid4()))
    delta.replay(TopicRecord(name="u", topic_id=uuid.uuid4()))
    delta.replay(ConfigRecord(resource_type=TOPIC, resource_name="u", name="file.delete.delay.ms", value="250"))
    image = delta.apply()
    assert TopicConfigs(1).get(image, "t").log_config(LogConfig()).file_delete_delay_ms == 60_000
    assert TopicConfigs(1).get(image, "u").log_config(LogConfig()).file_delete_delay_ms == 250
