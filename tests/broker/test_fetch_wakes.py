"""Parked fetches are re-read once per event, not once per partition: a new metadata image
(``FetchHandler.wake_all``) re-reads a follower's fetch parked on every partition once and it
still sees what the image changed; a Produce to every partition answers that fetch with every
partition's records (the wake waits for the end of the loop turn, not the first append)."""

from __future__ import annotations

import asyncio
import time
import uuid
from types import SimpleNamespace

from kraft.broker.broker_state import BrokerState
from kraft.broker.handlers import BrokerHandlers
from kraft.broker.image_publisher import publish_image
from kraft.broker.partition_logs import PartitionLogs
from kraft.errors import ErrorCode
from kraft.log import LogConfig
from kraft.metadata import MetadataDelta, PartitionChangeRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.protocol import EncodedParts, FetchRequest, ProduceRequest, decode_response, encode_response_parts
from kraft.protocol.headers import RequestHeader
from kraft.records import build_batch

TOPIC, TID, N = "many", uuid.UUID(int=0xAB), 40


def _image():
    d = MetadataDelta(EMPTY_IMAGE)
    for b in (1, 2):
        d.replay(RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b), broker_epoch=1, end_points=[
            RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9000 + b)], rack=None, fenced=False))
    d.replay(TopicRecord(name=TOPIC, topic_id=TID))
    for p in range(N):
        d.replay(PartitionRecord(partition_id=p, topic_id=TID, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=0,
                                 partition_epoch=0))
    return d.apply()


def follower_fetch():
    F = FetchRequest
    return F(replica_id=2, max_wait_ms=10_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
             session_epoch=-1, forgotten_topics_data=[], topics=[F.Topic(topic=TOPIC, partitions=[
                 F.Topic.Partition(partition=p, current_leader_epoch=0, fetch_offset=0, last_fetched_epoch=-1,
                                   partition_max_bytes=1 << 20) for p in range(N)])])


#: the handlers' clock stands still near the wall clock records are stamped with (a record more
#: than message.timestamp.after.max.ms ahead of it is refused, as in Kafka)
NOW = int(time.time() * 1000)

def _handlers(tmp_path):
    logs = PartitionLogs([str(tmp_path)], LogConfig(append_linger_ms=0.0))
    state = BrokerState(1, logs, cluster_id="cid")
    handlers = BrokerHandlers(state, clock_ms=lambda: NOW)
    image = _image()
    publish_image(logs, EMPTY_IMAGE, image, 1)
    state.image = image
    return logs, state, handlers


def decoded(resp, version=11):
    """A Fetch answer as the client decodes it (EncodedParts go through the framing)."""
    if isinstance(resp, EncodedParts):
        frame = b"".join(bytes(p) for p in encode_response_parts(RequestHeader(1, version, 7, "c"), 1, version, resp))
        return decode_response(frame[4:], 1, version)[1]
    return resp


CTX = SimpleNamespace(header=SimpleNamespace(api_version=11), listener="PLAINTEXT")


def test_a_produce_to_every_partition_answers_a_parked_follower_fetch_with_all_of_them(tmp_path):
    logs, state, handlers = _handlers(tmp_path)
    P = ProduceRequest
    produce = P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[P.Topic(name=TOPIC, partition_data=[
        P.Topic.Partition(index=p, records=bytearray(build_batch([b"v%d" % p]))) for p in range(N)])])

    async def go():
        parked = handlers.handle(CTX, follower_fetch())
        assert asyncio.isfuture(parked) and not parked.done()
        answer = handlers.handle(CTX, produce)
        if asyncio.isfuture(answer):
            await answer
        return await asyncio.wait_for(parked, 5)
    try:
        resp = decoded(asyncio.run(go()))
        got = {p.partition_index for t in resp.responses for p in t.partitions if p.records is not None
               and len(p.records)}
        assert got == set(range(N))
    finally:
        handlers.close()
        logs.close()


def test_an_image_rereads_a_fetch_parked_on_every_partition_once_and_it_sees_the_change(tmp_path):
    logs = PartitionLogs([str(tmp_path)], LogConfig(append_linger_ms=0.0))
    state = BrokerState(1, logs, cluster_id="cid")
    handlers = BrokerHandlers(state, clock_ms=lambda: NOW)
    image = _image()
    publish_image(logs, EMPTY_IMAGE, image, 1)
    state.image = image
    reads = []
    real = handlers.fetch._read_all
    handlers.fetch._read_all = lambda *a: reads.append(1) or real(*a)

    async def go():
        ctx = SimpleNamespace(header=SimpleNamespace(api_version=11), listener="PLAINTEXT")
        parked = handlers.handle(ctx, follower_fetch())
        assert asyncio.isfuture(parked) and not parked.done()
        reads.clear()
        handlers.fetch.wake_all()  # an image that changes nothing here: still parked
        assert len(reads) == 1 and not parked.done()
        d = MetadataDelta(state.image)
        d.replay(PartitionChangeRecord(partition_id=7, topic_id=TID, leader=2))
        state.image = d.apply()
        reads.clear()
        handlers.fetch.wake_all()
        assert len(reads) == 1
        return await asyncio.wait_for(parked, 5)
    try:
        resp = decoded(asyncio.run(go()))
        codes = {p.partition_index: p.error_code for t in resp.responses for p in t.partitions}
        assert codes[7] in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)
        assert all(c == 0 for p, c in codes.items() if p != 7)
    finally:
        handlers.close()
        logs.close()
