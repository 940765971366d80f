"""The transaction coordinator's I/O on a real BrokerNode (one broker leading a one-partition
``__transaction_state``) with the partition leaders' WriteTxnMarkers answered by a stand-in:
markers are retried until written, the Complete record follows, and a new leader epoch of the
partition (a coordinator failover) reloads the transaction and re-sends its markers with the
new coordinator epoch. Also a new producer incarnation fencing an ongoing transaction."""

from __future__ import annotations

import asyncio
import socket
import struct

from kraft.client.node_client import NodeClient
from kraft.errors import ErrorCode as E
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.records import PartitionChangeRecord
from kraft.protocol import (AddPartitionsToTxnRequest, DescribeTransactionsRequest, EndTxnRequest,
                            InitProducerIdRequest, WriteTxnMarkersRequest, WriteTxnMarkersResponse, encode_request)
from kraft.protocol.messages.add_to_txn import AddPartitionsToTxnTopic
from kraft.server.broker_node import BrokerNode, broker_config, static_image

TXNS = "__transaction_state"


class MarkerStandIn:
    """Answers WriteTxnMarkers as partition leaders would: ``code`` for every partition."""

    def __init__(self, node):
        self.code = int(E.NOT_LEADER_OR_FOLLOWER)
        self.seen = []  # (coordinator epoch, producer id, producer epoch, commit?, partitions)
        self.original = node.handlers.handle
        node.handlers.handle = self.handle
        # The node leads the partitions itself: its coordinator calls its handler directly.
        node.handlers.transactions.local_markers = lambda request, version: self.handle(None, request)

    def handle(self, ctx, request):
        if type(request) is not WriteTxnMarkersRequest:
            return self.original(ctx, request)
        R = WriteTxnMarkersResponse
        out = []
        for m in request.markers:
            self.seen.append((m.coordinator_epoch, m.producer_id, m.producer_epoch, m.transaction_result,
                              sorted((t.name, p) for t in m.topics for p in t.partition_indexes)))
            out.append(R.Marker(producer_id=m.producer_id, topics=[R.Marker.Topic(name=t.name, partitions=[
                R.Marker.Topic.Partition(partition_index=p, error_code=self.code) for p in t.partition_indexes])
                for t in m.topics]))
        return R(markers=out)


async def _eventually(fn, timeout=10.0):
    end = asyncio.get_running_loop().time() + timeout
    while True:
        value = await fn()
        if value:
            return value
        if asyncio.get_running_loop().time() > end:
            raise AssertionError("condition never held")
        await asyncio.sleep(0.05)


async def _scenario(tmp_path):
    node = BrokerNode(broker_config(1, str(tmp_path / "logs")), cluster_id="cid")
    await node.start()
    image = static_image(node.registration_record(), {"t": 2, TXNS: 1})
    node.publish(image)
    markers = MarkerStandIn(node)
    client = NodeClient("127.0.0.1", node.port(), client_id="txn-driver-test")
    try:
        async def loaded():
            s = node.handlers.transactions.shards.get(0)
            return s is not None and s.ready
        await _eventually(loaded)

        async def state(tid="tx"):
            resp = await client.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0)
            return resp.transaction_states[0]

        init = await client.request(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
        pid, epoch = init.producer_id, init.producer_epoch
        add = AddPartitionsToTxnRequest(v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid,
                                        v3_and_below_producer_epoch=epoch,
                                        v3_and_below_topics=[AddPartitionsToTxnTopic(name="t", partitions=[0, 1])])
        resp = await client.request(add, 3)
        assert {r.partition_error_code for t in resp.results_by_topic_v3_and_below for r in t.results_by_partition} \
            == {0}
        # KIP-890's check asked by this broker's own partitions: answered without a request.
        txns = node.handlers.transactions
        assert txns.verify("tx", pid, epoch, [("t", 0), ("t", 1)]) == {}
        assert txns.verify("tx", pid, epoch + 1, [("t", 0)]) == {("t", 0): E.PRODUCER_FENCED}
        assert txns.verify("nope", pid, epoch, [("t", 0)]) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
        end = await client.request(EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                                 committed=True), 3)
        assert end.error_code == 0

        # Leaders refuse (not leader): the markers are retried and the transaction waits.
        await _eventually(lambda: asyncio.sleep(0, len(markers.seen) >= 2))
        assert (await state()).transaction_state == "PrepareCommit"
        assert all(s[:4] == (0, pid, epoch, True) and s[4] == [("t", 0), ("t", 1)] for s in markers.seen)

        # A new leader epoch of __transaction_state-0: the coordinator reloads and re-sends the
        # markers of the transaction it inherits, in its new coordinator epoch.
        topic_id = node.state.image.topics.by_name[TXNS].id
        delta = MetadataDelta(node.state.image)
        delta.replay(PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=1))
        node.publish(delta.apply())
        markers.code = 0
        await _eventually(lambda: asyncio.sleep(0, any(s[0] == 1 for s in markers.seen)))

        async def complete():
            return (await state()).transaction_state == "CompleteCommit"
        await _eventually(complete)
        assert (await state()).topics == []

        # A new incarnation while a transaction is ongoing: it is aborted with the epoch bumped
        # (fencing the old producer on every partition), then the new one gets epoch + 2.
        resp = await client.request(add, 3)
        assert {r.partition_error_code for t in resp.results_by_topic_v3_and_below for r in t.results_by_partition} \
            == {0}
        again = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000)
        assert (await client.request(again, 4)).error_code == E.CONCURRENT_TRANSACTIONS
        await _eventually(lambda: asyncio.sleep(0, [s for s in markers.seen if not s[3]]))
        aborted = [s for s in markers.seen if not s[3]]
        assert aborted[0][:3] == (1, pid, epoch + 1)

        async def reinit():
            r = await client.request(again, 4)
            return r if r.error_code == 0 else None
        r = await _eventually(reinit)
        assert (r.producer_id, r.producer_epoch) == (pid, epoch + 2)
        fenced = await client.request(EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                                    committed=True), 3)
        assert fenced.error_code == E.PRODUCER_FENCED
    finally:
        await client.close()
        await node.shutdown()


def test_markers_retried_completed_and_resent_after_a_coordinator_failover(tmp_path):
    asyncio.run(asyncio.wait_for(_scenario(tmp_path), 60))


async def _held_scenario(tmp_path):
    node = BrokerNode(broker_config(1, str(tmp_path / "logs")), cluster_id="cid")
    await node.start()
    node.publish(static_image(node.registration_record(), {"t": 2, TXNS: 1}))
    markers = MarkerStandIn(node)
    txns = node.handlers.transactions
    txns.config.completion_wait_ms = 60_000  # the markers' retry backoff must not time the held adds out
    client = NodeClient("127.0.0.1", node.port(), client_id="txn-held-test")
    try:
        async def loaded():
            s = txns.shards.get(0)
            return s is not None and s.ready
        await _eventually(loaded)
        init = await client.request(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
        pid, epoch = init.producer_id, init.producer_epoch

        def add(partition):
            return AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name="t", partitions=[partition])])

        def codes(resp):
            return {r.partition_error_code for t in resp.results_by_topic_v3_and_below for r in t.results_by_partition}
        assert codes(await client.request(add(0), 3)) == {0}
        end = await client.request(EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                                 committed=True), 3)
        assert end.error_code == 0
        meta = txns.shards[0].shard.txns["tx"]

        # The leaders refuse the markers: the next transaction's adds are held, not refused.
        _, writer = await asyncio.open_connection("127.0.0.1", node.port())
        writer.write(encode_request(add(1), 3, 1, "txn-held-gone"))
        await _eventually(lambda: asyncio.sleep(0, len(meta.held) == 1))
        # Its connection is reset (a half-close would still be answered): the held add is
        # dropped, it will change nothing.
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        await _eventually(lambda: asyncio.sleep(0, not meta.held))
        held = asyncio.ensure_future(client.request(add(0), 3))
        await _eventually(lambda: asyncio.sleep(0, len(meta.held) == 1))
        await asyncio.sleep(0.3)
        assert not held.done() and meta.state.state == "PrepareCommit"

        markers.code = 0  # the markers go through: CompleteCommit, then the held add runs
        assert codes(await asyncio.wait_for(held, 20)) == {0}
        resp = await client.request(DescribeTransactionsRequest(transactional_ids=["tx"]), 0)
        s = resp.transaction_states[0]
        assert s.transaction_state == "Ongoing"
        assert [(t.topic, list(t.partitions)) for t in s.topics] == [("t", [0])]  # not the dropped add's t-1

        # A coordinator unloading answers a held add NOT_COORDINATOR at once.
        markers.code = int(E.NOT_LEADER_OR_FOLLOWER)
        end = await client.request(EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                                 committed=False), 3)
        assert end.error_code == 0
        meta = txns.shards[0].shard.txns["tx"]
        held = asyncio.ensure_future(client.request(add(1), 3))
        await _eventually(lambda: asyncio.sleep(0, len(meta.held) == 1))
        topic_id = node.state.image.topics.by_name[TXNS].id
        delta = MetadataDelta(node.state.image)
        delta.replay(PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=1))
        node.publish(delta.apply())
        assert codes(await asyncio.wait_for(held, 10)) == {int(E.NOT_COORDINATOR)}
    finally:
        await client.close()
        await node.shutdown()


def test_add_while_completing_is_held_answered_after_complete_dropped_if_its_requester_left(tmp_path):
    asyncio.run(asyncio.wait_for(_held_scenario(tmp_path), 60))
