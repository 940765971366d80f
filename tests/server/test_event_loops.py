"""The node runs on either event loop ``kraft.server.eventloop`` may pick: uvloop (a default
dependency) and asyncio's own. Three controllers over TCP with real on-disk logs and the
SharedLoopFlusher (an eventfd reader on the loop, the native fsync thread), writes through the
Raft driver, and a raw Kafka Produce and Fetch answered on the loop."""

from __future__ import annotations

import asyncio

import pytest

from kraft.log import LogConfig
from kraft.log.replicated_log import MetadataLog
from kraft.protocol import (METADATA_TOPIC_ID, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse,
                            decode_response, encode_request)
from kraft.records import build_batch, iter_batches
from kraft.server.shared_loop_flusher import SharedLoopFlusher

from controller_helpers import Controller
from server_helpers import RawConnection, settle


def _loops():
    loops = [pytest.param(asyncio.new_event_loop, id="asyncio")]
    try:
        import uvloop
    except ImportError:  # a default dependency; without it the node runs on asyncio's loop
        loops.append(pytest.param(None, id="uvloop", marks=pytest.mark.skip(reason="uvloop is not installed")))
    else:
        loops.append(pytest.param(uvloop.new_event_loop, id="uvloop"))
    return loops


@pytest.mark.parametrize("new_loop", _loops())
def test_a_quorum_commits_and_serves_kafka_requests_on_this_loop(tmp_path, new_loop):
    async def main():
        loop = asyncio.get_running_loop()
        holders, nodes, flushers = {}, [], []
        for i in (1, 2, 3):
            flushers.append(SharedLoopFlusher(loop, 1))
            log = MetadataLog(str(tmp_path / f"node-{i}"), LogConfig.metadata(), flusher=flushers[-1],
                              on_flushed=lambda off, i=i: holders[i].on_flushed_threadsafe(off))
            nodes.append(Controller([1, 2, 3], node_id=i, election_timeout_ms=50 if i == 1 else 5000, log=log))
        ports = {n.node_id: await n.listen() for n in nodes}
        for n in nodes:
            await n.start(ports, real_peers=True)
            holders[n.node_id] = n.driver
        try:
            assert await settle(lambda: any(n.core.is_leader() and n.core.high_watermark > 0 for n in nodes), 20)
            leader = next(n for n in nodes if n.core.is_leader())
            for k in range(20):
                await asyncio.wait_for(leader.driver.propose([b"v%d" % k])[1], 10)
            conn = await RawConnection.open(leader.server.port)
            try:
                P = ProduceRequest
                produce = P(acks=-1, timeout_ms=5000, topic_data=[P.Topic(name="__cluster_metadata", partition_data=[
                    P.Topic.Partition(index=0, records=build_batch([b"kafka-%d" % k for k in range(3)]))])])
                await conn.send(encode_request(produce, 11, 7, "t"))
                _, resp = decode_response(await conn.read_frame(), ProduceResponse.API_KEY, 11)
                part = resp.responses[0].partition_responses[0]
                assert part.error_code == 0 and part.base_offset > 0
                F = FetchRequest
                fetch = F(cluster_id="c", replica_state=F.ReplicaState(replica_id=99, replica_epoch=-1),  # an observer
                          max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[F.Topic(
                              topic_id=METADATA_TOPIC_ID, partitions=[F.Topic.Partition(
                                  partition=0, current_leader_epoch=leader.core.epoch, fetch_offset=0,
                                  last_fetched_epoch=0, partition_max_bytes=1 << 20)])])
                await conn.send(encode_request(fetch, 17, 8, "t"))
                _, fresp = decode_response(await conn.read_frame(), FetchResponse.API_KEY, 17)
                p = fresp.responses[0].partitions[0]
                assert fresp.error_code == 0 and p.error_code == 0 and p.records, (fresp.error_code, p)
                values = [v for b in iter_batches(p.records) if not b.is_control for v in b.values()]
                assert values == [b"v%d" % k for k in range(20)] + [b"kafka-0", b"kafka-1", b"kafka-2"]
            finally:
                await conn.close()
            # Every node applied the same committed prefix.
            end = leader.core.high_watermark
            assert await settle(lambda: all(n.core.high_watermark >= end for n in nodes), 10)
        finally:
            for n in nodes:
                await n.close()
            for f in flushers:
                f.stop()

    loop = new_loop()
    try:
        loop.run_until_complete(asyncio.wait_for(main(), 60))
    finally:
        loop.close()
