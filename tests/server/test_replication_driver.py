"""The replication driver in one process: two BrokerNodes on one loop share a static image in
which broker 1 leads an RF-2 partition with ISR {1, 2}. Broker 2's fetcher task must find
broker 1 from the image's registration, fetch, append the batches as they arrived and move
broker 1's HW, which is what lets an acks=all produce complete. Without a controller the
AlterPartition sender never starts (proposals wait); the ISR here stays as it is."""

from __future__ import annotations

import asyncio
import uuid

from kraft.client.node_client import NodeClient
from kraft.metadata import MetadataDelta, PartitionRecord, TopicRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.protocol import ProduceRequest
from kraft.records import build_batch, iter_batches
from kraft.server.broker_node import BrokerNode, broker_config
from kraft.server.replication_driver import inter_broker_listener

TID = uuid.UUID(int=7)
P = ProduceRequest


def image_for(nodes, leader: int = 1):
    delta = MetadataDelta(EMPTY_IMAGE)
    for n in nodes:
        delta.replay(n.registration_record())
    delta.replay(TopicRecord(name="t", topic_id=TID))
    ids = [n.cfg.node_id for n in nodes]
    delta.replay(PartitionRecord(partition_id=0, topic_id=TID, replicas=ids, isr=ids, removing_replicas=[],
                                 adding_replicas=[], leader=leader, leader_epoch=0, partition_epoch=0))
    return delta.apply()


def batches(log_dir):
    data = b"".join(path.read_bytes() for path in sorted(log_dir.glob("t-0/*.log")))
    return list(iter_batches(data))


def produce_request(values, acks=-1):
    return P(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        P.Topic(name="t", partition_data=[P.Topic.Partition(index=0, records=build_batch(values))])])


def test_inter_broker_listener_is_the_named_one_else_the_first_broker_listener(tmp_path):
    named = broker_config(1, str(tmp_path), listener="INTERNAL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
                          props={"listener.security.protocol.map": "INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                                                   "CONTROLLER:PLAINTEXT",
                                 "inter.broker.listener.name": "INTERNAL"})
    assert inter_broker_listener(named) == "INTERNAL"
    other = broker_config(1, str(tmp_path), listener="CLIENT://127.0.0.1:0",
                          props={"listener.security.protocol.map": "CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT"})
    assert inter_broker_listener(other) == "CLIENT"


def test_a_follower_fetches_from_the_leader_and_acks_all_completes(tmp_path):
    async def scenario():
        props = {"replica.fetch.wait.max.ms": "100", "replica.fetch.backoff.ms": "50"}
        nodes = [BrokerNode(broker_config(i, str(tmp_path / f"b{i}"), props=props), cluster_id="c") for i in (1, 2)]
        for n in nodes:
            await n.start()
        client = NodeClient("127.0.0.1", nodes[0].port(), client_id="test")
        try:
            image = image_for(nodes)
            for n in nodes:
                n.publish(image)
            values = [b"v%d" % i for i in range(50)]
            for chunk in (values[:20], values[20:]):
                resp = await client.request(produce_request(chunk), 9, timeout_ms=10_000)
                assert resp.responses[0].partition_responses[0].error_code == 0  # not REQUEST_TIMED_OUT
            leader, follower = (n.logs.get("t", 0) for n in nodes)
            assert leader.high_watermark == leader.log.end_offset == 50
            # The follower holds what the leader acknowledged, as the same batches.
            assert follower.log.end_offset == 50
            lb = [(b.base_offset, b.last_offset, b.crc) for b in batches(tmp_path / "b1")]
            fb = [(b.base_offset, b.last_offset, b.crc) for b in batches(tmp_path / "b2")]
            assert lb == fb and len(lb) == 2
            # The leader's HW reaches the follower with its next fetch.
            for _ in range(100):
                if follower.high_watermark == 50:
                    break
                await asyncio.sleep(0.02)
            assert follower.high_watermark == 50
        finally:
            await client.close()
            for n in nodes:
                await n.shutdown()
    asyncio.run(scenario())
