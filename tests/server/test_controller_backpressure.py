"""Back-pressure from the Raft log to the controller, through a real listener (issue 38): a
single-voter controller whose flushes are held, so nothing commits until the test lets it.
Writes beyond the leader's uncommitted bound wait in the controller's queue and are all
answered, once each, when the log drains; a full queue stops the listener reading writes (not
other requests); a request whose timeout passes in the queue is answered REQUEST_TIMED_OUT and
is never applied."""

from __future__ import annotations

import asyncio
import dataclasses

from controller_helpers import Controller, FlushingLog, raft_config
from server_helpers import run, settle

from kraft.client.node_client import NodeClient
from kraft.errors import ErrorCode
from kraft.protocol import CreateTopicsRequest, DescribeQuorumRequest


class HeldFlushLog(FlushingLog):
    """Flushes wait until ``release()`` (nothing commits meanwhile: a single voter's high
    watermark is its flushed offset)."""

    held = False

    def request_flush(self):
        if not self.held:
            super().request_flush()

    def release(self):
        self.held = False
        super().request_flush()


def create(name, partitions=4, timeout_ms=30_000):
    T = CreateTopicsRequest.Topic
    return CreateTopicsRequest(topics=[T(name=name, num_partitions=partitions, replication_factor=1)],
                               timeout_ms=timeout_ms)


async def started(bound=10):
    log = HeldFlushLog()
    node = Controller([1], log=log, config=dataclasses.replace(raft_config("c"), max_uncommitted_records=bound))
    await node.start()
    assert await settle(lambda: node.controller.active)
    client = NodeClient("127.0.0.1", node.server.port, request_timeout_ms=10_000, max_in_flight=64)
    # One broker so that topics can be placed (registration and heartbeat commit at once).
    from test_every_advertised_version import _registration
    from kraft.protocol import BrokerHeartbeatRequest
    reg = await client.request(_registration(0, 1), 0)
    hb = await client.request(BrokerHeartbeatRequest(broker_id=1, broker_epoch=reg.broker_epoch,
                                                     current_metadata_offset=log.end_offset()), 0)
    assert hb.error_code == 0
    assert await settle(lambda: not node.controller.image.cluster.brokers[1].fenced)
    return node, log, client


def test_a_burst_past_the_bound_waits_in_the_queue_and_every_request_is_answered_once_it_drains():
    async def main():
        node, log, client = await started(bound=10)
        try:
            log.held = True
            committed = log.end_offset()
            calls = [asyncio.ensure_future(client.request(create(f"t{i}"), 7)) for i in range(12)]
            await asyncio.sleep(0.3)
            # The bound plus the one request (5 records) admitted last; the rest wait unproposed.
            assert log.end_offset() - committed <= 10 + 5
            assert not any(c.done() for c in calls)
            log.release()
            answers = await asyncio.wait_for(asyncio.gather(*calls), 10)
            assert [a.topics[0].error_code for a in answers] == [0] * 12
            assert await settle(lambda: len(node.controller.image.topics.by_name) == 12)
            assert node.requests.queue.held_back > 0
        finally:
            await client.close()
            await node.close()
    run(main())


def test_a_full_queue_stops_reading_writes_but_other_connections_are_served():
    async def main():
        node, log, client = await started(bound=5)
        other = NodeClient("127.0.0.1", node.server.port, request_timeout_ms=10_000)
        try:
            node.requests.queue.max_queued = 3
            log.held = True
            calls = [asyncio.ensure_future(client.request(create(f"q{i}"), 7)) for i in range(8)]
            assert await settle(lambda: len(node.requests.queue) == 3)
            await asyncio.sleep(0.1)
            assert len(node.requests.queue) == 3  # the rest stay unread on the connection
            D = DescribeQuorumRequest
            quorum = await other.request(D(topics=[D.Topic(topic_name="__cluster_metadata", partitions=[
                D.Topic.Partition(partition_index=0)])]), 1)
            assert quorum.topics[0].partitions[0].error_code == 0
            log.release()
            answers = await asyncio.wait_for(asyncio.gather(*calls), 10)
            assert [a.topics[0].error_code for a in answers] == [0] * 8
        finally:
            await other.close()
            await client.close()
            await node.close()
    run(main())


def test_a_request_that_times_out_in_the_queue_is_never_applied():
    async def main():
        node, log, client = await started(bound=5)
        # Another connection: answers on one connection leave in request order, so the timed-out
        # answer would wait behind the first request's commit.
        other = NodeClient("127.0.0.1", node.server.port, request_timeout_ms=10_000)
        try:
            log.held = True
            first = asyncio.ensure_future(client.request(create("first", partitions=8), 7))  # fills the log
            assert await settle(lambda: "first" in node.controller.view.topics.by_name)
            late = await asyncio.wait_for(other.request(create("late", timeout_ms=200), 7), 5)
            assert late.topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT
            log.release()
            assert (await asyncio.wait_for(first, 5)).topics[0].error_code == 0
            again = await asyncio.wait_for(client.request(create("late"), 7), 5)  # the retry creates it
            assert again.topics[0].error_code == 0
            assert await settle(lambda: "late" in node.controller.image.topics.by_name)
        finally:
            await other.close()
            await client.close()
            await node.close()
    run(main())
