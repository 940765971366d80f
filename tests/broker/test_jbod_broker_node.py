"""KIP-858 on a real BrokerNode with two ``log.dirs`` (Kafka's LogDirFailureChannel ->
ReplicaManager.handleLogDirFailure): an I/O error on one directory's log makes that directory
offline; its partitions answer KAFKA_STORAGE_ERROR over the wire while the other directory's
partitions keep taking produce requests; DescribeLogDirs reports the failed directory; the
next heartbeat names it. The metadata log's directory failing is fatal for the node."""

from __future__ import annotations

import asyncio
import struct

import pytest

from kraft.errors import ErrorCode as E, FatalLogError
from kraft.protocol import DescribeLogDirsRequest, ProduceRequest, decode_response, encode_request
from kraft.records import build_batch
from kraft.server.broker_node import BrokerNode, broker_config, static_image

TOPIC = "t"


async def _ask(reader, writer, request, version, cid=[0]):
    cid[0] += 1
    writer.write(encode_request(request, version, cid[0], "jbod"))
    size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
    return decode_response(await asyncio.wait_for(reader.readexactly(size), 10), type(request).API_KEY, version)[1]


def _produce(partition):
    P = ProduceRequest
    return P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[P.Topic(name=TOPIC, partition_data=[
        P.Topic.Partition(index=partition, records=build_batch([b"x"]))])])


def test_one_failed_directory_stops_only_its_partitions(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")

    async def main():
        node = BrokerNode(broker_config(1, f"{a},{b}"), cluster_id="cid")
        await node.start()
        offline = []
        node.on_dir_offline = offline.append
        node.publish(static_image(node.registration_record(), {TOPIC: 4}))
        in_b = [p for p in range(4) if node.logs.get(TOPIC, p).log_dir == b]
        in_a = [p for p in range(4) if node.logs.get(TOPIC, p).log_dir == a]
        assert in_a and in_b
        reader, writer = await asyncio.open_connection("127.0.0.1", node.port())
        try:
            # An fsync of one of b's logs fails (EIO): the log reports it, the loop takes b offline.
            node.logs.get(TOPIC, in_b[0]).log._set_fatal(FatalLogError("fdatasync: [Errno 5] EIO"))
            for _ in range(50):
                await asyncio.sleep(0.01)
                if offline:
                    break
            assert offline == [b]
            for p in in_b:
                resp = await _ask(reader, writer, _produce(p), 9)
                assert resp.responses[0].partition_responses[0].error_code == E.KAFKA_STORAGE_ERROR
            for p in in_a:
                resp = await _ask(reader, writer, _produce(p), 9)
                assert resp.responses[0].partition_responses[0].error_code == E.NONE
            dirs = {r.log_dir: r for r in (await _ask(reader, writer, DescribeLogDirsRequest(topics=None), 4)).results}
            assert dirs[b].error_code == E.KAFKA_STORAGE_ERROR and dirs[b].topics == []
            assert dirs[a].error_code == E.NONE
            assert sorted(p.partition_index for p in dirs[a].topics[0].partitions) == in_a
            # The metadata log's directory (the first of log.dirs by default) failing stops the node.
            with pytest.raises(FatalLogError, match="metadata log"):
                node._dir_failed(a, OSError(5, "EIO"))
        finally:
            writer.close()
            await node.shutdown()
    asyncio.run(main())
