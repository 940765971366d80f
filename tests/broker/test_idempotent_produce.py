"""Idempotent produce end to end on one RF-1 broker (static image): a retried batch over the
wire is answered with its original offset and stored once, a gap and a stale epoch are
refused, producer state survives a clean restart through `.snapshot` files, and
confluent-kafka with ``enable.idempotence=true`` (librdkafka: InitProducerId, up to five
requests in flight) writes every record exactly once and in order."""

from __future__ import annotations

import asyncio
import os
import struct
import time

import pytest

from broker_helpers import BrokerThread
from kraft.broker.producer_snapshots import snapshot_offsets
from kraft.errors import ErrorCode
from kraft.protocol import InitProducerIdRequest, ProduceRequest, decode_response, encode_request
from kraft.records import build_batch, iter_batches
from kraft.server.broker_node import BrokerNode, broker_config, static_image

E = ErrorCode
TOPIC = "idem"


class Conn:
    def __init__(self, reader, writer):
        self.reader, self.writer, self.cid = reader, writer, 0

    async def ask(self, request, version):
        self.cid += 1
        self.writer.write(encode_request(request, version, self.cid, "idem-test"))
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 10))[0]
        _, resp = decode_response(await asyncio.wait_for(self.reader.readexactly(size), 10),
                                  type(request).API_KEY, version)
        return resp


def _produce(records, acks=-1):
    P = ProduceRequest
    return P(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[P.Topic(name=TOPIC, partition_data=[
        P.Topic.Partition(index=0, records=records)])])


async def _start(log_dir):
    node = BrokerNode(broker_config(1, log_dir), cluster_id="cid")
    await node.start()
    node.publish(static_image(node.registration_record(), {TOPIC: 1}))
    reader, writer = await asyncio.open_connection("127.0.0.1", node.port())
    return node, Conn(reader, writer), writer


async def _scenario(tmp_path):
    log_dir = str(tmp_path / "logs")
    node, conn, writer = await _start(log_dir)
    try:
        init = await conn.ask(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch

        def b(seq, n=2, ep=epoch):
            return build_batch([b"s%d" % (seq + i) for i in range(n)], producer_id=pid, producer_epoch=ep,
                               base_sequence=seq)

        async def send(records):
            return (await conn.ask(_produce(records), 9)).responses[0].partition_responses[0]

        first = await send(b(0))
        assert (first.error_code, first.base_offset) == (0, 0)
        assert (await send(b(2))).base_offset == 2
        again = await send(b(0))  # a retry of the first batch
        assert (again.error_code, again.base_offset) == (0, 0)
        gap = await send(b(7))
        assert gap.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        plog = node.logs.get(TOPIC, 0)
        assert plog.log.end_offset == 4  # the retry and the gap were not appended
        bumped = await send(b(0, ep=epoch + 1))  # a new epoch starts at 0
        assert (bumped.error_code, bumped.base_offset) == (0, 4)
        stale = await send(b(4, ep=epoch))
        assert stale.error_code == E.INVALID_PRODUCER_EPOCH
    finally:
        writer.close()
        await node.shutdown()
    assert snapshot_offsets(os.path.join(log_dir, f"{TOPIC}-0")) == [6]  # written on clean shutdown

    node, conn, writer = await _start(log_dir)
    try:
        retry = (await conn.ask(_produce(build_batch([b"s0", b"s1"], producer_id=pid, producer_epoch=epoch + 1,
                                                     base_sequence=0)), 9)).responses[0].partition_responses[0]
        assert (retry.error_code, retry.base_offset) == (0, 4)  # the snapshot kept the last batch
        nxt = (await conn.ask(_produce(build_batch([b"s2"], producer_id=pid, producer_epoch=epoch + 1,
                                                   base_sequence=2)), 9)).responses[0].partition_responses[0]
        assert (nxt.error_code, nxt.base_offset) == (0, 6)
    finally:
        writer.close()
        await node.shutdown()


def test_retries_gaps_epochs_and_a_clean_restart_over_the_wire(tmp_path):
    asyncio.run(asyncio.wait_for(_scenario(tmp_path), 60))


ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra (pip install confluent-kafka)")


@pytest.mark.integration
def test_confluent_kafka_idempotent_producer_writes_each_record_once_in_order(tmp_path):
    from confluent_kafka import Producer
    with BrokerThread(str(tmp_path / "logs"), {TOPIC: 2}) as b:
        p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 2,
                      "compression.type": "lz4", "batch.num.messages": 50})
        acked, failed = [], []
        for i in range(3000):
            p.produce(TOPIC, value=b"%06d" % i, partition=i % 2,
                      on_delivery=lambda err, m: (failed if err else acked).append(err or (m.partition(), m.offset())))
            if i % 500 == 0:
                p.poll(0)
        assert p.flush(30) == 0
        assert failed == [] and len(acked) == 3000
        deadline = time.monotonic() + 10
        tables = None
        while time.monotonic() < deadline:
            tables = b.call(lambda: [(pl.log.end_offset, len(b.node.state.producer_states.table(pl)))
                                     for pl in (b.node.logs.get(TOPIC, 0), b.node.logs.get(TOPIC, 1))])
            if [t[0] for t in tables] == [1500, 1500]:
                break
        assert tables == [(1500, 1), (1500, 1)]  # one producer id, every record once
        values = []
        for part in (0, 1):
            data = b.call(lambda pt=part: bytes(b.node.logs.get(TOPIC, pt).log.read(0, 1 << 24)))
            got = []
            while data:
                batches = list(iter_batches(data))
                got += [r.value for bt in batches for r in bt]
                end = batches[-1].last_offset + 1
                data = b.call(lambda pt=part, o=end: bytes(b.node.logs.get(TOPIC, pt).log.read(o, 1 << 24)))
            assert got == [b"%06d" % i for i in range(part, 3000, 2)]  # in order, no duplicates
            values += got
        assert len(values) == 3000
