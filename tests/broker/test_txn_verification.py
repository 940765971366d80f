"""KIP-890 part 1 on a partition leader (``kraft.broker.txn_verification``): a transactional
produce that would open a transaction on a partition is appended only once the transaction
coordinator confirmed the partition is in the producer's ongoing transaction; a marker that
comes while the check is in flight makes the produce INVALID_TXN_STATE (no hanging
transaction); the coordinator's errors become the produce errors Kafka gives; the verifier
batches one request per coordinator."""

from __future__ import annotations

import asyncio

import pytest
from test_transactions_broker import TOPIC, _start, fetch, marker, produce

from kraft.broker.txn_verification import produce_error
from kraft.server.txn_verifier import TxnVerifier
from kraft.errors import ErrorCode as E


class FakeVerifier:
    """Answers verifications as a test says: ``answer`` maps (topic, partition) to an error
    code; ``hold`` keeps the next answer until ``release()``."""

    def __init__(self):
        self.calls, self.answer, self.hold, self._held = [], {}, False, []

    def verify(self, tid, pid, epoch, partitions):
        self.calls.append((tid, pid, epoch, sorted(partitions)))
        fut = asyncio.get_running_loop().create_future()
        result = {tp: self.answer[tp] for tp in partitions if tp in self.answer}
        if self.hold:
            self._held.append((fut, result))
        else:
            fut.set_result(result)
        return fut

    def release(self):
        for fut, result in self._held:
            fut.set_result(result)
        self._held.clear()

    async def close(self):
        pass


def _run(tmp_path, body):
    async def main():
        node, conn, writer, topic_id = await _start(str(tmp_path / "logs"), verify=True)
        try:
            await body(node, conn, topic_id)
        finally:
            writer.close()
            await node.shutdown()
    asyncio.run(main())


def test_without_a_coordinator_a_transactional_produce_is_refused_retriably_and_not_appended(tmp_path):
    async def body(node, conn, topic_id):
        assert isinstance(node.handlers.produce.verifier, TxnVerifier)  # on by default
        p = await produce(conn, 1000, 0)
        assert p.error_code == E.NOT_ENOUGH_REPLICAS and "COORDINATOR_NOT_AVAILABLE" in p.error_message
        assert (await fetch(conn, topic_id, 0)).high_watermark == 0  # nothing appended
        p = await produce(conn, 2000, 0, transactional=False)  # idempotent only: not asked
        assert p.error_code == 0
    _run(tmp_path, body)


def test_the_first_batch_of_each_transaction_is_verified_once(tmp_path):
    async def body(node, conn, topic_id):
        fake = node.handlers.produce.verifier = FakeVerifier()
        assert (await produce(conn, 1000, 0)).error_code == 0
        assert (await produce(conn, 1000, 2)).error_code == 0  # inside its transaction: not asked again
        assert fake.calls == [("t", 1000, 0, [(TOPIC, 0)])]
        assert await marker(conn, 1000, True) == [0]
        assert (await produce(conn, 1000, 4)).error_code == 0  # the next transaction: asked again
        assert len(fake.calls) == 2
    _run(tmp_path, body)


@pytest.mark.parametrize("answer,expected", [(E.INVALID_TXN_STATE, E.INVALID_TXN_STATE),
                                             (E.TRANSACTION_ABORTABLE, E.INVALID_TXN_STATE),
                                             (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH),
                                             (E.CONCURRENT_TRANSACTIONS, E.NOT_ENOUGH_REPLICAS),
                                             (E.NOT_COORDINATOR, E.NOT_ENOUGH_REPLICAS),
                                             (E.NETWORK_EXCEPTION, E.NETWORK_EXCEPTION)])
def test_a_partition_not_in_the_transaction_is_refused_with_kafkas_error(tmp_path, answer, expected):
    async def body(node, conn, topic_id):
        fake = node.handlers.produce.verifier = FakeVerifier()
        fake.answer = {(TOPIC, 0): int(answer)}
        assert (await produce(conn, 1000, 0)).error_code == expected
        ru = await fetch(conn, topic_id, 0)
        assert (ru.high_watermark, ru.last_stable_offset) == (0, 0)  # nothing appended, nothing hanging
    _run(tmp_path, body)


def test_a_marker_during_the_check_makes_the_late_produce_invalid_instead_of_hanging(tmp_path):
    async def body(node, conn, topic_id):
        fake = node.handlers.produce.verifier = FakeVerifier()
        fake.hold = True
        late = asyncio.ensure_future(produce(conn, 1000, 0))
        while not fake.calls:
            await asyncio.sleep(0.01)
        # The transaction ends (abort by timeout, say) while the produce is being verified.
        side = await _second_connection(node)
        try:
            assert await marker(side, 1000, False) == [0]
        finally:
            side.writer.close()
        fake.release()  # the coordinator had said yes, before the abort
        assert (await late).error_code == E.INVALID_TXN_STATE
        ru = await fetch(conn, topic_id, 0)
        assert ru.last_stable_offset == ru.high_watermark == 1  # the marker alone; no open transaction
    _run(tmp_path, body)


async def _second_connection(node):
    from test_transactions_broker import Conn
    reader, writer = await asyncio.open_connection("127.0.0.1", node.port())
    conn = Conn(reader, writer)
    conn.writer = writer
    return conn


def test_produce_error_mapping_is_kafkas():
    assert produce_error(int(E.COORDINATOR_LOAD_IN_PROGRESS))[0] == E.NOT_ENOUGH_REPLICAS
    assert produce_error(int(E.UNKNOWN_SERVER_ERROR)) == (int(E.UNKNOWN_SERVER_ERROR), None)


class _Topic:
    def __init__(self, leaders):
        self.partitions = {i: type("Reg", (), {"leader": b})() for i, b in enumerate(leaders)}


class _State:
    broker_id = 1

    def __init__(self, leaders):
        self.image = type("Image", (), {"topics": type("Topics", (), {
            "by_name": {"__transaction_state": _Topic(leaders)}})()})()

    def leader_endpoint(self, broker_id, listener):
        return ("127.0.0.1", 9000 + broker_id)


class _Client:
    def __init__(self, answer_for):
        self.requests, self.answer_for = [], answer_for

    async def request(self, req, version):
        self.requests.append((req, version))
        await asyncio.sleep(0.01)
        return self.answer_for(req)

    async def close(self):
        pass


def test_the_verifier_sends_one_request_per_coordinator_and_maps_each_transactions_answer():
    from kraft.protocol.messages.add_to_txn import (AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResponse,
                                                    AddPartitionsToTxnTopicResult)
    R = AddPartitionsToTxnResponse

    def answer(req):
        results = []
        for t in req.transactions:
            assert t.verify_only
            code = int(E.INVALID_TXN_STATE) if t.transactional_id == "bad" else 0
            results.append(R.Result(transactional_id=t.transactional_id, topic_results=[
                AddPartitionsToTxnTopicResult(name=x.name, results_by_partition=[
                    AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
                    for p in x.partitions]) for x in t.topics]))
        return R(throttle_time_ms=0, error_code=0, results_by_transaction=results)

    async def main():
        v = TxnVerifier(_State([7]), "PLAINTEXT")  # one __transaction_state partition, led by 7
        client = _Client(answer)
        v._client = lambda node: client
        a = v.verify("good", 1, 0, [("x", 0)])
        b = v.verify("bad", 2, 0, [("x", 1), ("y", 0)])
        c = v.verify("good", 1, 0, [("x", 2)])  # same transaction, same turn: merged
        assert await a == {} and await c == {}
        assert await b == {("x", 1): E.INVALID_TXN_STATE, ("y", 0): E.INVALID_TXN_STATE}
        assert len(client.requests) == 1 and client.requests[0][1] == 4
        sent = {t.transactional_id: sorted((x.name, p) for x in t.topics for p in x.partitions)
                for t in client.requests[0][0].transactions}
        assert sent == {"good": [("x", 0), ("x", 2)], "bad": [("x", 1), ("y", 0)]}
        # An older epoch of an id already waiting in this turn is fenced at once.
        d = v.verify("good", 1, 5, [("x", 0)])
        e = v.verify("good", 1, 4, [("x", 0)])
        assert await e == {("x", 0): E.INVALID_PRODUCER_EPOCH} and await d == {}
        await v.close()
    asyncio.run(main())


def test_a_dropped_verification_is_answered_with_a_retriable_error_not_a_loop_error(tmp_path):
    async def body(node, conn, topic_id):
        fake = node.handlers.produce.verifier = FakeVerifier()
        fake.hold = True
        loop_errors = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: loop_errors.append(ctx))
        late = asyncio.ensure_future(produce(conn, 1000, 0))
        while not fake.calls:
            await asyncio.sleep(0.01)
        for fut, _ in fake._held:
            fut.cancel()  # the coordinator's answer will never come
        assert (await asyncio.wait_for(late, 10)).error_code == E.NETWORK_EXCEPTION
        assert not loop_errors, loop_errors
        ru = await fetch(conn, topic_id, 0)
        assert (ru.high_watermark, ru.last_stable_offset) == (0, 0)  # nothing appended
    _run(tmp_path, body)


def test_the_verifier_asks_its_own_coordinator_directly_and_nothing_over_the_network():
    async def main():
        asked = []

        def local(tid, pid, epoch, partitions):
            asked.append((tid, pid, epoch, partitions))
            return {tp: int(E.INVALID_TXN_STATE) for tp in partitions if tp[0] == "y"}
        v = TxnVerifier(_State([1]), "PLAINTEXT", local=local)  # led by broker 1, this one
        v._client = lambda node: pytest.fail("a request to itself")
        a = v.verify("good", 1, 0, [("x", 0), ("y", 0)])
        b = v.verify("good", 1, 0, [("x", 1)])  # same turn: one question
        assert await a == await b == {("y", 0): E.INVALID_TXN_STATE}
        assert asked == [("good", 1, 0, [("x", 0), ("x", 1), ("y", 0)])]
        await v.close()
    asyncio.run(main())
