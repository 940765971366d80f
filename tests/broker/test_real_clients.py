"""Real Kafka clients against a real kraft broker over TCP: confluent-kafka (librdkafka),
kafka-python, aiokafka and kcat, unmodified. Produce with every codec and acks 0/1/all,
consume with ``assign`` from earliest, latest and by timestamp, per-key order, and a broker
restart (graceful and SIGKILL) that keeps every acknowledged record."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import pytest

from broker_helpers import BrokerProcess, BrokerThread

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra (pip install confluent-kafka)")
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, Producer, TopicPartition  # noqa: E402

pytestmark = pytest.mark.integration
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _producer(bootstrap, **extra):
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "linger.ms": 5, **extra})


def _consume(bootstrap, assignments, count, timeout=20.0):
    """``count`` messages from ``assignments`` (TopicPartition list) as (partition, offset, key, value, ts)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kraft-test", "enable.auto.commit": False,
                  "enable.partition.eof": False})
    c.assign(assignments)
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append((m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]))
    finally:
        c.close()
    return out


def _produce_all(p, topic, items, partitions):
    acked, failed = [], []

    def report(err, msg):
        (failed if err else acked).append((msg.partition(), msg.offset(), msg.key(), msg.value()) if not err
                                          else err)
    for key, value in items:
        p.produce(topic, key=key, value=value, partition=int(key[1:]) % partitions, on_delivery=report)
    assert p.flush(20) == 0
    return acked, failed


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    topics = {f"c-{codec}-{acks}": 2 for codec in CODECS for acks in ("0", "1", "all")}
    topics.update({"latest": 1, "times": 1, "kp": 1, "aio": 1, "kcat": 1})
    with BrokerThread(str(tmp_path_factory.mktemp("broker") / "logs"), topics) as b:
        yield b


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_produce_every_codec_and_acks_then_consume_in_key_order(broker, codec, acks):
    topic = f"c-{codec}-{acks}"
    p = _producer(broker.bootstrap, **{"compression.type": codec, "acks": acks})
    items = [(b"k%d" % (i % 6), b"value-%04d-" % i + b"x" * (i % 50)) for i in range(600)]
    acked, failed = _produce_all(p, topic, items, 2)
    assert failed == [] and len(acked) == len(items)
    if acks != "0":  # acks=0 delivery reports carry no offset
        assert sorted(o for part, o, _, _ in acked if part == 0) == list(range(sum(1 for a in acked if a[0] == 0)))
    got = _consume(broker.bootstrap, [TopicPartition(topic, 0, OFFSET_BEGINNING),
                                      TopicPartition(topic, 1, OFFSET_BEGINNING)], len(items))
    assert sorted(v for _, _, _, v, _ in got) == sorted(v for _, v in items)
    for key in {k for k, _ in items}:  # per-key order: what was sent, in order
        assert [v for _, _, k, v, _ in sorted(got, key=lambda m: (m[0], m[1])) if k == key] == \
            [v for k2, v in items if k2 == key]


def test_confluent_kafka_assign_at_latest_sees_only_new_records(broker):
    p = _producer(broker.bootstrap)
    _produce_all(p, "latest", [(b"k0", b"old-%d" % i) for i in range(5)], 1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "latest", "enable.auto.commit": False})
    c.assign([TopicPartition("latest", 0, OFFSET_END)])
    c.poll(1.0)  # resolves the end offset
    _produce_all(p, "latest", [(b"k0", b"new-%d" % i) for i in range(3)], 1)
    got = []
    deadline = time.monotonic() + 15
    while len(got) < 3 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    c.close()
    assert got == [(5, b"new-0"), (6, b"new-1"), (7, b"new-2")]


def test_confluent_kafka_offsets_for_times_and_watermarks(broker):
    p = _producer(broker.bootstrap, **{"linger.ms": 0})
    for i, ts in enumerate([1000, 2000, 3000, 4000]):
        p.produce("times", key=b"k0", value=b"t%d" % i, partition=0, timestamp=ts)
        p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "times"})
    [tp] = c.offsets_for_times([TopicPartition("times", 0, 2500)], timeout=10)
    assert tp.offset == 2
    assert c.get_watermark_offsets(TopicPartition("times", 0), timeout=10) == (0, 4)
    c.close()
    got = _consume(broker.bootstrap, [TopicPartition("times", 0, 2)], 2)
    assert [(o, v, ts) for _, o, _, v, ts in got] == [(2, b"t2", 3000), (3, b"t3", 4000)]


def test_confluent_kafka_metadata_lists_the_broker_and_topics(broker):
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert [(b.id, b.port) for b in md.brokers.values()] == [(1, broker.node.port())]
    assert md.cluster_id == "test-cluster"
    assert sorted(md.topics["c-lz4-1"].partitions) == [0, 1]
    assert md.topics["c-lz4-1"].partitions[0].leader == 1


def test_kafka_python_produces_and_consumes(broker):
    kafka = pytest.importorskip("kafka", reason="kafka-python is in the test extra")
    prod = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, compression_type="gzip",
                               enable_idempotence=False)
    for i in range(50):
        prod.send("kp", key=b"k", value=b"kp-%d" % i)
    prod.flush(10)
    prod.close()
    cons = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                               consumer_timeout_ms=5000)
    tp = kafka.TopicPartition("kp", 0)
    cons.assign([tp])
    cons.seek_to_beginning(tp)
    got = [m.value for _, m in zip(range(50), cons)]
    cons.close()
    assert got == [b"kp-%d" % i for i in range(50)]


def test_aiokafka_produces_and_consumes(broker):
    aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is in the test extra")

    async def go():
        prod = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type="lz4")
        await prod.start()
        try:
            for i in range(40):
                await prod.send("aio", key=b"k", value=b"aio-%d" % i)
            await prod.flush()
        finally:
            await prod.stop()
        cons = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await cons.start()
        try:
            tp = aiokafka.TopicPartition("aio", 0)
            cons.assign([tp])
            await cons.seek_to_beginning(tp)
            got = []
            while len(got) < 40:
                batch = await asyncio.wait_for(cons.getmany(timeout_ms=1000), 10)
                got += [m.value for ms in batch.values() for m in ms]
            return got
        finally:
            await cons.stop()
    assert asyncio.run(go()) == [b"aio-%d" % i for i in range(40)]


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt-get install -y kcat)")
def test_kcat_lists_produces_and_consumes(broker):
    b = broker.bootstrap
    listing = subprocess.run(["kcat", "-b", b, "-L"], capture_output=True, text=True, timeout=30)
    assert listing.returncode == 0 and "topic \"kcat\" with 1 partitions" in listing.stdout, listing.stderr
    subprocess.run(["kcat", "-b", b, "-P", "-t", "kcat", "-p", "0", "-z", "snappy"], input="one\ntwo\nthree\n",
                   text=True, check=True, timeout=30)
    out = subprocess.run(["kcat", "-b", b, "-C", "-t", "kcat", "-p", "0", "-o", "beginning", "-e", "-f", "%o:%s\n"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0:one", "1:two", "2:three"]


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_restart_keeps_every_acknowledged_record(tmp_path, how):
    log_dir = str(tmp_path / "logs")
    with BrokerProcess(log_dir, {"r": 2}) as b:
        p = _producer(b.bootstrap, **{"acks": "all", "compression.type": "zstd"})
        acked, failed = _produce_all(p, "r", [(b"k%d" % (i % 4), b"r-%d" % i) for i in range(400)], 2)
        assert failed == [] and len(acked) == 400
        del p
        if how == "sigkill":
            b.kill()
        else:
            b.stop()
    with BrokerProcess(log_dir, {"r": 2}) as b:
        got = _consume(b.bootstrap, [TopicPartition("r", 0, OFFSET_BEGINNING), TopicPartition("r", 1, OFFSET_BEGINNING)],
                       400)
        assert sorted((pt, o, v) for pt, o, _, v, _ in got) == sorted((pt, o, v) for pt, o, _, v in acked)
        p = _producer(b.bootstrap, acks="1")
        more, _ = _produce_all(p, "r", [(b"k0", b"after")], 2)
        assert more[0][1] == sum(1 for a in acked if a[0] == 0)  # offsets continue after the restart


def test_log_append_time_topic_and_topic_deletion_seen_by_a_real_client(tmp_path):
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
    from confluent_kafka.admin import AdminClient

    from kraft.metadata import ConfigRecord, MetadataDelta, RemoveTopicRecord
    with BrokerThread(str(tmp_path / "logs"), {"lat": 1, "doomed": 1}) as b:
        def set_config():
            d = MetadataDelta(b.node.state.image)
            d.replay(ConfigRecord(resource_type=2, resource_name="lat", name="message.timestamp.type",
                                  value="LogAppendTime"))
            b.node.publish(d.apply())
        b.call(set_config)
        p = _producer(b.bootstrap)
        before = int(time.time() * 1000)
        p.produce("lat", value=b"x", partition=0, timestamp=5)
        p.produce("doomed", value=b"y", partition=0)
        assert p.flush(10) == 0
        [(_, _, _, _, ts)] = _consume(b.bootstrap, [TopicPartition("lat", 0, OFFSET_BEGINNING)], 1)
        assert ts >= before  # the broker's clock, not the 5 the producer set
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "lat", "enable.auto.commit": False})
        c.assign([TopicPartition("lat", 0, OFFSET_BEGINNING)])
        m = None
        while m is None or m.error():
            m = c.poll(1.0)
        assert m.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME
        c.close()

        doomed_dir = tmp_path / "logs" / "doomed-0"
        assert doomed_dir.is_dir()

        def delete_topic():
            image = b.node.state.image
            d = MetadataDelta(image)
            d.replay(RemoveTopicRecord(topic_id=image.topics.by_name["doomed"].id))
            b.node.publish(d.apply())
        b.call(delete_topic)
        b.node.logs.wait_for_deletions(10)
        assert not doomed_dir.exists()
        assert not any(n.startswith("doomed-0") for n in __import__("os").listdir(tmp_path / "logs"))
        md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10)
        assert "doomed" not in md.topics and "lat" in md.topics


def test_broker_node_applies_size_retention_on_its_timer(tmp_path):
    props = {"log.segment.bytes": 4096, "log.retention.bytes": 8192, "log.retention.check.interval.ms": 50}
    with BrokerThread(str(tmp_path / "logs"), {"ret": 1}, props=props) as b:
        p = _producer(b.bootstrap, **{"linger.ms": 0, "batch.size": 1000})
        for i in range(200):
            p.produce("ret", value=b"%04d" % i + b"z" * 200, partition=0)
            p.flush(10)
        plog = b.node.logs.get("ret", 0)
        deadline = time.monotonic() + 20
        # Retention runs on the broker's timer: wait until it has caught up with the writes.
        while b.call(lambda: plog.log.size_bytes) >= 8192 + 4096 and time.monotonic() < deadline:
            time.sleep(0.05)
        start = b.call(lambda: plog.log.start_offset)
        assert start > 0 and b.call(lambda: plog.log.size_bytes) < 8192 + 4096
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "ret", "enable.auto.commit": False})
        assert c.get_watermark_offsets(TopicPartition("ret", 0), timeout=10) == (start, 200)
        c.close()
