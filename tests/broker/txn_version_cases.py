"""The transaction APIs' cases of ``test_broker_every_advertised_version``: every advertised
version of InitProducerId (with a transactional id), AddPartitionsToTxn (client and batched
forms), AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions gets a decodable
answer, on the success path and an error path, from a broker that leads a one-partition
``__transaction_state``."""

from __future__ import annotations

import asyncio

from kraft.errors import ErrorCode as E
from kraft.protocol import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeTransactionsRequest,
                            EndTxnRequest, InitProducerIdRequest, ListTransactionsRequest, TxnOffsetCommitRequest)
from kraft.protocol.messages.add_to_txn import AddPartitionsToTxnTopic

TXNS = "__transaction_state"


async def wait_loaded(node) -> None:
    for _ in range(200):
        loaded = node.handlers.transactions.shards.get(0)
        if loaded is not None and loaded.ready:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("__transaction_state-0 never loaded")


async def init(conn, tid: str, version: int = 3):
    resp = await conn.ask(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), version)
    assert resp.error_code == 0 and resp.producer_id >= 0, (tid, resp)
    return resp.producer_id, resp.producer_epoch


def _add(tid, pid, epoch, topic, parts):
    return AddPartitionsToTxnRequest(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                                     v3_and_below_producer_epoch=epoch,
                                     v3_and_below_topics=[AddPartitionsToTxnTopic(name=topic, partitions=parts)])


def _codes(topic_results):
    return {(t.name, r.partition_index): r.partition_error_code for t in topic_results for r in t.results_by_partition}


async def check_txn_versions(conn, node, topic: str, checked: set) -> None:
    await wait_loaded(node)
    for v in range(0, 6):
        tid = f"tx-init-{v}"
        resp = await conn.ask(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), v)
        assert (resp.error_code, resp.producer_epoch) == (0, 0) and resp.producer_id >= 0, v
        again = await conn.ask(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), v)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (0, resp.producer_id, 1), v
        bad = await conn.ask(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=900_001), v)
        assert bad.error_code == E.INVALID_TRANSACTION_TIMEOUT, v
        checked.add((22, v))

    for v in range(0, 6):
        tid = f"tx-add-{v}"
        pid, epoch = await init(conn, tid)
        if v <= 3:
            resp = await conn.ask(_add(tid, pid, epoch, topic, [0]), v)
            assert _codes(resp.results_by_topic_v3_and_below) == {(topic, 0): 0}, v
            resp = await conn.ask(_add(tid, pid, epoch + 1, topic, [0]), v)
            fenced = E.PRODUCER_FENCED if v >= 2 else E.INVALID_PRODUCER_EPOCH
            assert _codes(resp.results_by_topic_v3_and_below) == {(topic, 0): fenced}, v
            resp = await conn.ask(_add(tid, pid, epoch, "nope", [0]), v)
            assert _codes(resp.results_by_topic_v3_and_below) == {("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}, v
        else:
            T = AddPartitionsToTxnRequest.Transaction
            topics = [AddPartitionsToTxnTopic(name=topic, partitions=[0])]
            resp = await conn.ask(AddPartitionsToTxnRequest(transactions=[
                T(transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=True, topics=topics)]), v)
            assert _codes(resp.results_by_transaction[0].topic_results) == {(topic, 0): E.INVALID_TXN_STATE}, v
            resp = await conn.ask(AddPartitionsToTxnRequest(transactions=[
                T(transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=False, topics=topics),
                T(transactional_id="tx-unknown", producer_id=1, producer_epoch=0, topics=topics)]), v)
            assert resp.error_code == 0, v
            [ok, unknown] = resp.results_by_transaction
            assert _codes(ok.topic_results) == {(topic, 0): 0}, v
            assert _codes(unknown.topic_results) == {(topic, 0): E.INVALID_PRODUCER_ID_MAPPING}, v
            resp = await conn.ask(AddPartitionsToTxnRequest(transactions=[
                T(transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=True, topics=topics)]), v)
            assert _codes(resp.results_by_transaction[0].topic_results) == {(topic, 0): 0}, v
        checked.add((24, v))

    for v in range(0, 5):
        tid = f"tx-offsets-{v}"
        pid, epoch = await init(conn, tid)
        resp = await conn.ask(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                     group_id="g"), v)
        assert resp.error_code == 0, v
        resp = await conn.ask(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid + 1,
                                                     producer_epoch=epoch, group_id="g"), v)
        assert resp.error_code == E.INVALID_PRODUCER_ID_MAPPING, v
        checked.add((25, v))

    for v in range(0, 5):
        tid = f"tx-end-{v}"
        pid, epoch = await init(conn, tid)
        resp = await conn.ask(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                            committed=True), v)
        assert resp.error_code == E.INVALID_TXN_STATE, v  # no transaction begun
        await conn.ask(_add(tid, pid, epoch, topic, [0]), 3)
        resp = await conn.ask(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                            committed=v % 2 == 0), v)
        assert resp.error_code == 0, v
        resp = await conn.ask(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch - 1,
                                            committed=True), v)
        assert resp.error_code == (E.PRODUCER_FENCED if v >= 2 else E.INVALID_PRODUCER_EPOCH), v
        checked.add((26, v))

    TO = TxnOffsetCommitRequest.Topic
    for v in range(0, 5):
        tid = f"tx-offsets-{v}"  # AddOffsetsToTxn above put the group's partition in its transaction
        pid, epoch = node.handlers.transactions._shard(tid)[1].txns[tid].state.producer_id, 0

        def commit(group, name):
            return TxnOffsetCommitRequest(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                                          topics=[TO(name=name, partitions=[TO.Partition(
                                              partition_index=0, committed_offset=5, committed_metadata=None)])])
        resp = await conn.ask(commit("g", topic), v)
        assert [(t.name, p.error_code) for t in resp.topics for p in t.partitions] == [(topic, 0)], v
        resp = await conn.ask(commit("g", "nope"), v)
        assert resp.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION, v
        resp = await conn.ask(commit("", topic), v)
        assert resp.topics[0].partitions[0].error_code == E.INVALID_GROUP_ID, v
        checked.add((28, v))

    # The offsets commit with their transactions: markers on __consumer_offsets-0 settle them.
    for v in range(0, 5):
        tid = f"tx-offsets-{v}"
        pid = node.handlers.transactions._shard(tid)[1].txns[tid].state.producer_id
        resp = await conn.ask(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=0,
                                            committed=True), 3)
        assert resp.error_code == 0, v
    ended = [f"tx-end-{v}" for v in range(0, 5)] + [f"tx-offsets-{v}" for v in range(0, 5)]
    for _ in range(200):  # the markers are written by the partition side, then the Complete record
        resp = await conn.ask(DescribeTransactionsRequest(transactional_ids=ended), 0)
        states = [s.transaction_state for s in resp.transaction_states]
        if all(s.startswith("Complete") for s in states):
            break
        await asyncio.sleep(0.05)
    assert states == ["CompleteCommit", "CompleteAbort"] * 2 + ["CompleteCommit"] + ["CompleteCommit"] * 5, states
    shard = node.handlers.groups.shards[0].shard
    assert shard.offsets["g"][(topic, 0)].offset == 5 and not shard.pending_txn

    resp = await conn.ask(DescribeTransactionsRequest(transactional_ids=["tx-add-0", "tx-none"]), 0)
    [found, missing] = resp.transaction_states
    assert (found.error_code, found.transaction_state, found.producer_epoch) == (0, "Ongoing", 0)
    assert [(t.topic, list(t.partitions)) for t in found.topics] == [(topic, [0])]
    assert missing.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    checked.add((65, 0))

    for v in range(0, 3):
        req = ListTransactionsRequest(state_filters=["Ongoing", "Bogus"], producer_id_filters=[])
        if v >= 2:
            req.transactional_id_pattern = "tx-add-.*"
        resp = await conn.ask(req, v)
        assert resp.error_code == 0 and resp.unknown_state_filters == ["Bogus"], v
        ids = {s.transactional_id for s in resp.transaction_states}
        assert {f"tx-add-{i}" for i in range(6)} <= ids and all(s.transaction_state == "Ongoing"
                                                                for s in resp.transaction_states), v
        if v >= 2:
            assert ids == {f"tx-add-{i}" for i in range(6)}
            req.transactional_id_pattern = "(["
            assert (await conn.ask(req, v)).error_code == E.INVALID_REQUEST
        checked.add((66, v))
