"""The partition side of transactions on one RF-1 broker over the wire: transactional
batches, WriteTxnMarkers COMMIT/ABORT, the last stable offset in Fetch and ListOffsets,
read_committed fetches that stop at the LSO and name the aborted transactions (from the
`.txnindex`), the group coordinator's hook, and a restart (clean, and with the snapshots and
index removed, as after a crash) that gives back the same LSO and aborted set."""

from __future__ import annotations

import asyncio
import glob
import os
import struct

from kraft.errors import ErrorCode
from kraft.log import txn_index
from kraft.protocol import (DescribeProducersRequest, FetchRequest, ListOffsetsRequest, ProduceRequest, WriteTxnMarkersRequest,
                            decode_response, encode_request)
from kraft.records import build_batch
from kraft.server.broker_node import BrokerNode, broker_config, static_image

E = ErrorCode
TOPIC = "txn"
A, B, C = 1000, 2000, 3000  # producer ids: committed, aborted, left open


class Conn:
    def __init__(self, reader, writer):
        self.reader, self.writer, self.cid = reader, writer, 0

    async def ask(self, request, version):
        self.cid += 1
        self.writer.write(encode_request(request, version, self.cid, "txn-test"))
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 10))[0]
        _, resp = decode_response(await asyncio.wait_for(self.reader.readexactly(size), 10),
                                  type(request).API_KEY, version)
        return resp


async def _start(log_dir, verify: bool = False):
    # verify: KIP-890's check with the transaction coordinator before a transaction's first
    # batch; off where this file writes markers by hand with no coordinator to ask.
    node = BrokerNode(broker_config(1, log_dir, props={"transaction.partition.verification.enable": str(verify).lower()}),
                      cluster_id="cid")
    await node.start()
    image = static_image(node.registration_record(), {TOPIC: 1})
    node.publish(image)
    reader, writer = await asyncio.open_connection("127.0.0.1", node.port())
    return node, Conn(reader, writer), writer, image.topics.by_name[TOPIC].id


async def produce(conn, pid, seq, n=2, transactional=True, epoch=0):
    P = ProduceRequest
    records = build_batch([b"%d-%d" % (pid, seq + i) for i in range(n)], producer_id=pid, producer_epoch=epoch,
                          base_sequence=seq, transactional=transactional)
    resp = await conn.ask(P(transactional_id="t" if transactional else None, acks=-1, timeout_ms=5000,
                            topic_data=[P.Topic(name=TOPIC, partition_data=[
                                P.Topic.Partition(index=0, records=records)])]), 9)
    return resp.responses[0].partition_responses[0]


async def marker(conn, pid, commit, coord_epoch=1, epoch=0, partitions=(0,)):
    W = WriteTxnMarkersRequest
    resp = await conn.ask(W(markers=[W.Marker(producer_id=pid, producer_epoch=epoch, transaction_result=commit,
                                              coordinator_epoch=coord_epoch, topics=[W.Marker.Topic(
                                                  name=TOPIC, partition_indexes=list(partitions))])]), 1)
    return [p.error_code for p in resp.markers[0].topics[0].partitions]


async def fetch(conn, topic_id, isolation, offset=0):
    F = FetchRequest
    t = F.Topic(topic=TOPIC, topic_id=topic_id, partitions=[F.Topic.Partition(
        partition=0, current_leader_epoch=-1, fetch_offset=offset, partition_max_bytes=1 << 20)])
    resp = await conn.ask(F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation,
                            session_id=0, session_epoch=-1, topics=[t], forgotten_topics_data=[]), 12)
    return resp.responses[0].partitions[0]


async def latest(conn, isolation):
    L = ListOffsetsRequest
    resp = await conn.ask(L(replica_id=-1, isolation_level=isolation, topics=[L.Topic(name=TOPIC, partitions=[
        L.Topic.Partition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])]), 7)
    return resp.topics[0].partitions[0].offset


def last_offset_of(records) -> int:
    """The last offset of the last batch in a Fetch answer's records."""
    data = bytes(records)
    pos, last = 0, -1
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        last = base + struct.unpack_from(">i", data, pos + 23)[0]
        pos += 12 + length
    return last


async def _check_state(conn, topic_id, lso, hw, aborted):
    ru = await fetch(conn, topic_id, 0)
    assert (ru.error_code, ru.high_watermark, ru.last_stable_offset) == (0, hw, lso)
    assert last_offset_of(ru.records) == hw - 1  # read_uncommitted reads to the HW
    rc = await fetch(conn, topic_id, 1)
    assert (rc.error_code, rc.last_stable_offset) == (0, lso)
    assert last_offset_of(rc.records) == lso - 1  # read_committed stops at the LSO
    assert [(a.producer_id, a.first_offset) for a in rc.aborted_transactions] == aborted
    assert ru.aborted_transactions is None
    assert await latest(conn, 1) == lso and await latest(conn, 0) == hw


async def _scenario(tmp_path):
    log_dir = str(tmp_path / "logs")
    node, conn, writer, topic_id = await _start(log_dir)
    written = []
    node.handlers.write_txn_markers.txn_marker_written = lambda *a: written.append(a)
    try:
        assert (await produce(conn, A, 0)).base_offset == 0        # 0-1
        assert (await produce(conn, B, 0)).base_offset == 2        # 2-3
        assert (await produce(conn, A, 2)).base_offset == 4        # 4-5
        plain = await produce(conn, 4000, 0, transactional=False)  # 6-7: idempotent, not in a transaction
        assert plain.error_code == 0
        assert (await fetch(conn, topic_id, 1)).last_stable_offset == 0
        assert await marker(conn, A, True) == [0]                  # 8: COMMIT A
        assert (await fetch(conn, topic_id, 1)).last_stable_offset == 2  # B still open at 2
        assert written == [(TOPIC, 0, A, 0, True)]
        assert await marker(conn, B, False) == [0]                 # 9: ABORT B
        assert written[-1] == (TOPIC, 0, B, 0, False)
        assert (await produce(conn, C, 0)).base_offset == 10       # 10-11: C open
        await _check_state(conn, topic_id, lso=10, hw=12, aborted=[(B, 2)])
        DP = DescribeProducersRequest
        resp = await conn.ask(DP(topics=[DP.Topic(name=TOPIC, partition_indexes=[0])]), 0)
        described = {s.producer_id: (s.coordinator_epoch, s.current_txn_start_offset)
                     for s in resp.topics[0].partitions[0].active_producers}
        assert described == {A: (1, -1), B: (1, -1), C: (-1, 10), 4000: (-1, -1)}
        # The ABORT is in the segment's .txnindex as Kafka writes it.
        assert txn_index.read(os.path.join(log_dir, f"{TOPIC}-0"), 0) == [txn_index.AbortedTxn(B, 2, 9, 10)]

        # Kafka's refusals: a stale producer epoch, a deposed coordinator, no such partition.
        assert await marker(conn, B, False, coord_epoch=1, epoch=0) == [0]  # 12: a retried abort is written, closes nothing
        assert (await produce(conn, 5000, 0, epoch=3)).base_offset == 13  # 13-14
        assert await marker(conn, 5000, False, epoch=2) == [E.INVALID_PRODUCER_EPOCH]
        assert await marker(conn, A, True, coord_epoch=0) == [E.TRANSACTION_COORDINATOR_FENCED]
        assert await marker(conn, A, True, partitions=(5,)) == [E.UNKNOWN_TOPIC_OR_PARTITION]
        assert await marker(conn, -1, True) == [E.INVALID_REQUEST]
        assert await marker(conn, 5000, False, epoch=3) == [0]    # 15: ABORT 5000
        # A non-transactional write inside an open transaction is INVALID_TXN_STATE.
        assert (await produce(conn, C, 2, transactional=False)).error_code == E.INVALID_TXN_STATE
    finally:
        writer.close()
        await node.shutdown()
    plog_dir = os.path.join(log_dir, f"{TOPIC}-0")
    aborted_below_lso = [(B, 2)]  # 5000's aborted transaction starts above the LSO (10)

    # Clean restart: snapshot + index on disk.
    node, conn, writer, topic_id = await _start(log_dir)
    try:
        rc = await fetch(conn, topic_id, 1)
        assert rc.last_stable_offset == 10
        assert [(a.producer_id, a.first_offset) for a in rc.aborted_transactions] == aborted_below_lso
    finally:
        writer.close()
        await node.shutdown()

    # As after a crash with lost state files: no snapshots, no index; both rebuilt from the log.
    for f in glob.glob(os.path.join(plog_dir, "*.snapshot")) + glob.glob(os.path.join(plog_dir, "*.txnindex")):
        os.unlink(f)
    node, conn, writer, topic_id = await _start(log_dir)
    try:
        rc = await fetch(conn, topic_id, 1)
        assert rc.last_stable_offset == 10
        assert [(a.producer_id, a.first_offset) for a in rc.aborted_transactions] == aborted_below_lso
        assert [(e.producer_id, e.first_offset) for e in txn_index.read(plog_dir, 0)] == [(B, 2), (5000, 13)]
    finally:
        writer.close()
        await node.shutdown()


def test_transactions_on_a_partition_leader(tmp_path):
    asyncio.run(asyncio.wait_for(_scenario(tmp_path), 60))
