"""New partition logs are made off the event loop in a real node (its loop also runs the Raft
quorum: a topic of 1,000 partitions held it for seconds and the quorum elected another
leader). Until a log is there its partition answers NOT_LEADER_OR_FOLLOWER and is not
fetched; once made it serves; one removed from the image meanwhile is deleted again."""

from __future__ import annotations

import asyncio
import os

from kraft.broker.partition_logs import PartitionLogs
from kraft.log import LogConfig
from kraft.metadata import MetadataDelta, RemoveTopicRecord
from kraft.protocol import ProduceRequest
from kraft.records import build_batch
from kraft.server.broker_node import BrokerNode, broker_config, static_image


def _produce(topic: str, partition: int):
    P = ProduceRequest
    return P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        P.Topic(name=topic, partition_data=[P.Topic.Partition(index=partition, records=build_batch([b"v"]))])])


def _code(node, topic, partition):
    resp = node.handlers.handle(type("Ctx", (), {"header": type("H", (), {"api_version": 9})(),
                                                "listener": "PLAINTEXT"})(), _produce(topic, partition))
    return resp.responses[0].partition_responses[0].error_code


def test_logs_are_made_off_the_loop_and_serve_once_there(tmp_path):
    async def scenario():
        node = BrokerNode(broker_config(1, str(tmp_path)), cluster_id="c")
        await node.start()
        node.create_in_background = True
        try:
            image = static_image(node.registration_record(), {"big": 600, "gone": 50})
            node.publish(image)
            assert node.logs.creating == 650 and node.logs.get("big", 0) is None  # publish did not wait
            assert _code(node, "big", 0) == 6  # NOT_LEADER_OR_FOLLOWER until its log is there
            gone = image.topics.by_name["gone"].id
            d = MetadataDelta(image)
            d.replay(RemoveTopicRecord(topic_id=gone))
            node.publish(d.apply())  # deleted while its logs were being made
            for _ in range(600):
                if node.logs.creating == 0:
                    break
                await asyncio.sleep(0.05)
            assert node.logs.creating == 0
            assert len([p for p in node.logs if p.topic == "big"]) == 600
            assert [p for p in node.logs if p.topic == "gone"] == []
            assert _code(node, "big", 599) == 0
            node.logs.wait_for_deletions(10)
            assert not [n for n in os.listdir(tmp_path) if n.startswith("gone-")]
        finally:
            await node.shutdown()

    asyncio.run(scenario())


def test_closing_while_logs_are_being_made_leaves_them_whole(tmp_path):
    async def scenario():
        node = BrokerNode(broker_config(1, str(tmp_path)), cluster_id="c")
        await node.start()
        node.create_in_background = True
        node.publish(static_image(node.registration_record(), {"t": 300}))
        await node.shutdown()  # waits for the creator, closes what it made

    asyncio.run(scenario())
    logs = PartitionLogs([str(tmp_path)], LogConfig())
    opened = logs.open_all()
    assert len(opened) == 300 and all(p.log.end_offset == 0 for p in opened)
    logs.close()
