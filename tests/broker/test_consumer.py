"""kraft.client.consumer against a real broker process (and, for a leader change, two brokers
in this process): every record back, in order, decoded into columns; seeks by offset,
beginning, end and timestamp; OFFSET_OUT_OF_RANGE; a leader move followed via Metadata. The
decoder's own rules (CRC, control batches, partial trailing batch) are checked on bytes."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from kraft.client.consumer import Consumer, decode_records
from kraft.client.node_client import NodeClient
from kraft.errors import CorruptRecordError, OffsetOutOfRangeError
from kraft.metadata import MetadataDelta, PartitionChangeRecord, PartitionRecord, TopicRecord
from kraft.protocol import ProduceRequest
from kraft.records import Compression, ControlType, build_batch, build_control_batch
from tests.broker.broker_helpers import BrokerProcess, BrokerThread

TOPIC = "c"


async def _produce(bootstrap: str, batches, topic=TOPIC, partition=0):
    host, port = bootstrap.split(":")
    client = NodeClient(host, int(port), request_timeout_ms=10_000)
    P = ProduceRequest
    try:
        for batch in batches:
            resp = await client.request(P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.Topic(
                name=topic, partition_data=[P.Topic.Partition(index=partition, records=batch)])]), 9)
            assert resp.responses[0].partition_responses[0].error_code == 0
    finally:
        await client.close()


def _batches(first: int, count: int, per_batch: int, compression=Compression.NONE, ts0=1_000_000):
    out = []
    for start in range(first, first + count, per_batch):
        n = min(per_batch, first + count - start)
        out.append(build_batch([b"v%d" % i for i in range(start, start + n)],
                               keys=[None if i % 7 == 0 else b"k%d" % i for i in range(start, start + n)],
                               timestamps=[ts0 + i for i in range(start, start + n)], compression=compression))
    return out


async def _read_all(consumer: Consumer, until: int, limit: int = 50):
    offsets, keys, values = [], [], []
    for _ in range(limit):
        for part in await consumer.poll(timeout_ms=2000):
            offsets += part.offsets.tolist()
            keys += [part.key(i) for i in range(len(part))]
            values += part.values()
        if offsets and offsets[-1] >= until - 1:
            break
    return offsets, keys, values


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("consumer")
    proc = BrokerProcess(str(d / "logs"), {TOPIC: 1, "empty": 1}).start()
    asyncio.run(_produce(proc.bootstrap, _batches(0, 300, 50) + _batches(300, 300, 100, Compression.LZ4)))
    yield proc
    proc.stop()


def test_reads_every_record_from_the_beginning_in_order_with_keys_values_and_timestamps(broker):
    async def go():
        async with Consumer(broker.bootstrap, partition_max_bytes=4096) as c:  # many fetches
            await c.assign([(TOPIC, 0)])
            await c.seek_to_beginning()
            assert c.position(TOPIC, 0) == 0
            offsets, keys, values = await _read_all(c, 600, limit=500)
            return offsets, keys, values, c.position(TOPIC, 0)
    offsets, keys, values, position = asyncio.run(go())
    assert offsets == list(range(600))
    assert values == [b"v%d" % i for i in range(600)]
    assert keys == [None if i % 7 == 0 else b"k%d" % i for i in range(600)]
    assert position == 600


def test_seek_into_a_compressed_batch_starts_at_that_offset_and_timestamps_are_decoded(broker):
    async def go():
        async with Consumer(broker.bootstrap) as c:
            await c.assign([(TOPIC, 0)])
            c.seek(TOPIC, 0, 437)  # inside the lz4 batch 400..499
            parts = await c.poll(timeout_ms=5000)
            return parts
    parts = asyncio.run(go())
    assert parts[0].offsets[0] == 437
    assert parts[0].value(0) == b"v437"
    assert parts[0].timestamps[0] == 1_000_000 + 437
    assert parts[0].high_watermark == 600


def test_seek_to_end_returns_only_records_written_afterwards(broker):
    async def go():
        async with Consumer(broker.bootstrap, max_wait_ms=100) as c:
            await c.assign([("empty", 0)])
            await _produce(broker.bootstrap, _batches(0, 5, 5), topic="empty")
            await c.seek_to_end()
            assert c.position("empty", 0) == 5
            assert await c.poll(timeout_ms=300) == []
            await _produce(broker.bootstrap, [build_batch([b"new"])], topic="empty")
            parts = await c.poll(timeout_ms=5000)
            return parts
    parts = asyncio.run(go())
    assert [(p.offsets.tolist(), p.values()) for p in parts] == [([5], [b"new"])]


def test_seek_to_timestamp_finds_the_first_record_at_or_after_it_and_the_end_past_the_last(broker):
    async def go():
        async with Consumer(broker.bootstrap) as c:
            await c.assign([(TOPIC, 0)])
            await c.seek_to_timestamp(1_000_000 + 250)
            at = c.position(TOPIC, 0)
            await c.seek_to_timestamp(10**13)
            return at, c.position(TOPIC, 0)
    assert asyncio.run(go()) == (250, 600)


def test_offset_out_of_range_raises_or_resets_as_configured(broker):
    async def go(reset):
        async with Consumer(broker.bootstrap, auto_offset_reset=reset) as c:
            await c.assign([(TOPIC, 0)])
            c.seek(TOPIC, 0, 10_000)
            if reset == "none":
                with pytest.raises(OffsetOutOfRangeError):
                    await c.poll(timeout_ms=5000)
                return None
            parts = []
            for _ in range(20):
                parts = await c.poll(timeout_ms=1000)
                if parts:
                    break
            return parts[0].offsets[0]
    assert asyncio.run(go("none")) is None
    assert asyncio.run(go("earliest")) == 0


def test_decode_checks_crc_skips_control_batches_and_ignores_a_partial_last_batch():
    data = build_batch([b"a", b"b"], base_offset=10)
    control = build_control_batch(ControlType.COMMIT, b"\x00\x00\x00\x00\x00\x00", base_offset=12)
    more = build_batch([b"c"], base_offset=13)
    fetched, nxt = decode_records("t", 0, data + control + more + more[:30], 11, 99)
    assert fetched.offsets.tolist() == [11, 13]
    assert fetched.values() == [b"b", b"c"]
    assert nxt == 14
    bad = bytearray(data)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decode_records("t", 0, bytes(bad) + more, 10, 99)
    only_control, nxt = decode_records("t", 0, control, 12, 99)
    assert only_control is None and nxt == 13


def _two_broker_image(regs, leader: int, epoch: int, previous=None):
    from kraft.metadata.image import EMPTY_IMAGE
    import uuid
    delta = MetadataDelta(previous or EMPTY_IMAGE)
    tid = uuid.uuid5(uuid.NAMESPACE_OID, "kraft-topic:moving")
    if previous is None:
        for r in regs:
            delta.replay(r)
        delta.replay(TopicRecord(name="moving", topic_id=tid))
        delta.replay(PartitionRecord(partition_id=0, topic_id=tid, replicas=[1, 2], isr=[1, 2], removing_replicas=[],
                                     adding_replicas=[], leader=leader, leader_epoch=epoch, partition_epoch=epoch))
    else:
        delta.replay(PartitionChangeRecord(partition_id=0, topic_id=tid, leader=leader))
    return delta.apply()


def test_follows_a_leader_change_through_metadata(tmp_path):
    """Broker 1 leads, broker 2 follows it (replication copies the records); the leadership
    moves to broker 2 and the consumer, fenced or told NOT_LEADER by broker 1, reads on from 2."""
    b1 = BrokerThread(str(tmp_path / "b1"), {}, node_id=1)
    b2 = BrokerThread(str(tmp_path / "b2"), {}, node_id=2)
    b1._thread.start(), b2._thread.start()
    try:
        for b in (b1, b2):
            asyncio.run_coroutine_threadsafe(b.node.start(), b.loop).result(30)
        regs = [b1.call(b1.node.registration_record), b2.call(b2.node.registration_record)]
        first = _two_broker_image(regs, 1, 0)
        for b in (b1, b2):
            b.call(b.node.publish, first)

        async def go():
            await _produce(b1.bootstrap, _batches(0, 50, 10), topic="moving")
            async with Consumer(b1.bootstrap, max_wait_ms=100, retry_backoff_ms=20) as c:
                await c.assign([("moving", 0)])
                await c.seek_to_beginning()
                offsets, _, values = await _read_all(c, 50)
                assert offsets == list(range(50))
                for _ in range(200):  # the follower has caught up
                    if b2.call(lambda: b2.node.logs.get("moving", 0).log.end_offset) == 50:
                        break
                    await asyncio.sleep(0.05)
                moved = _two_broker_image(regs, 2, 1, first)
                for b in (b2, b1):
                    b.call(b.node.publish, moved)
                await _produce(b2.bootstrap, [build_batch([b"on-2-%d" % i for i in range(5)])], topic="moving")
                offsets, _, values = await _read_all(c, 55)
                return offsets, values, {k: v for k, v in c._clients.items() if isinstance(k, int)}
        offsets, values, clients = asyncio.run(go())
        assert offsets == list(range(50, 55))
        assert values == [b"on-2-%d" % i for i in range(5)]
        assert 2 in clients
    finally:
        b1.stop()
        b2.stop()


def test_fetched_records_columns_are_numpy_arrays(broker):
    async def go():
        async with Consumer(broker.bootstrap) as c:
            await c.assign([(TOPIC, 0)])
            c.seek(TOPIC, 0, 0)
            return await c.poll(timeout_ms=5000)
    part = asyncio.run(go())[0]
    assert isinstance(part.offsets, np.ndarray) and part.offsets.dtype == np.int64
    assert part.nbytes == int(part.key_offsets[-1]) + int(part.value_offsets[-1]) > 0
