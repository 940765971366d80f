"""A Fetch answer that waits in its connection's queue while the partition's log is truncated
(a follower truncating after a leader change) is still written whole and valid, and the broker
lives on. Answers made of views of the segment's map would touch pages past the new end of
file (SIGBUS when copied in user space; here the kernel's send fails with EFAULT and the
connection drops after the first bytes of the answer). Runs in a subprocess: a SIGBUS
must not take the test runner with it."""

from __future__ import annotations

import asyncio
import os
import struct
import subprocess
import sys

from kraft.client.node_client import NodeClient
from kraft.protocol import FetchRequest, ProduceRequest, decode_response, encode_request
from kraft.records import build_batch, scan_batches
from kraft.server.broker_node import BrokerNode, broker_config, static_image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fetch(topic, max_wait_ms):
    F = FetchRequest
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=64 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, forgotten_topics_data=[], topics=[F.Topic(topic=topic, partitions=[
                 F.Topic.Partition(partition=0, fetch_offset=0, partition_max_bytes=32 << 20)])])


async def _scenario(log_dir: str) -> None:
    node = BrokerNode(broker_config(1, log_dir), cluster_id="c")
    await node.start()
    node.publish(static_image(node.registration_record(), {"t": 1, "idle": 1}))
    client = NodeClient("127.0.0.1", node.port(), request_timeout_ms=30_000)
    P = ProduceRequest
    for i in range(40):  # ~4 MB: many pages past the point the file is cut to
        await client.request(P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.Topic(
            name="t", partition_data=[P.Topic.Partition(index=0, records=build_batch([b"%04d" % i * 250] * 100))])]), 9)
    await client.close()
    plog = node.logs.get("t", 0)
    end = plog.log.end_offset
    truncated = []

    def truncate():
        plog.high_watermark = 0
        plog.log.truncate_to(0)
        truncated.append(plog.log.end_offset)
    handle = node.handlers.fetch.handle

    def fetch_then_truncate(request, version, listener=None):
        answer = handle(request, version, listener)
        if request.topics[0].topic == "t":  # answered now, written after the parked fetch ahead of it
            asyncio.get_running_loop().call_soon(truncate)
        return answer
    node.handlers.fetch.handle = fetch_then_truncate
    reader, writer = await asyncio.open_connection("127.0.0.1", node.port())
    writer.write(encode_request(_fetch("idle", 1000), 12, 1, "t") + encode_request(_fetch("t", 0), 12, 2, "t"))
    answers = []
    for _ in range(2):
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 30))[0]
        header, resp = decode_response(await asyncio.wait_for(reader.readexactly(size), 30), 1, 12)
        answers.append((header.correlation_id, resp))
    writer.close()
    await node.shutdown()
    assert truncated, "the truncation did not run"
    assert [cid for cid, _ in answers] == [1, 2]
    records = answers[1][1].responses[0].partitions[0].records
    scan = scan_batches(records)
    assert scan.error is None and int(scan.last_offsets[-1]) + 1 == end, (scan.error, len(scan))
    print("OK", end, len(records))


def test_a_fetch_answer_waiting_to_be_written_survives_a_truncation_of_its_segment(tmp_path):
    code = f"import asyncio, tests.broker.test_fetch_truncation as t; asyncio.run(t._scenario({str(tmp_path)!r}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-3000:])
    assert out.stdout.startswith("OK")
