"""The requests of KIP-890's check (``kraft.broker.txn_verification``): a broker's
verifications sent to the transaction coordinators as AddPartitionsToTxn v4 with
``verify_only`` (Kafka's AddPartitionsToTxnManager: one request per coordinator at a time, the
transactions of a loop turn batched in it). The transactions this broker coordinates are
asked of its own coordinator directly, not over a connection to itself."""

from __future__ import annotations

import asyncio
import logging

from kraft.client.client_pool import ClientPool
from kraft.client.node_client import NodeClient
from kraft.coordinator.txn_records import TRANSACTION_TOPIC, partition_for
from kraft.errors import ErrorCode as E, KraftError, UnsupportedVersionError
from kraft.protocol.messages.add_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic

log = logging.getLogger("kraft.transactions")
VERIFY_TIMEOUT_MS = 10_000


class _Pending:
    """One transaction's partitions to verify in the next request to its coordinator."""

    __slots__ = ("producer_id", "epoch", "partitions", "future")

    def __init__(self, producer_id: int, epoch: int, future):
        self.producer_id, self.epoch, self.partitions, self.future = producer_id, epoch, set(), future


class TxnVerifier:
    """Sends the verifications of a broker to the transaction coordinators. ``verify`` returns a
    future of {(topic, partition): error code} (the partitions not verified); ``state`` is the
    broker's (image and endpoints), ``listener`` the one brokers reach each other on."""

    def __init__(self, state, listener: str, *, client_id: str = "kraft-txn-verify",
                 client_options: dict | None = None, local=None):
        """``client_options``: the NodeClient settings for other brokers (TLS, SASL);
        ``local(transactional_id, producer_id, epoch, partitions)``: this broker's own
        coordinator's answer ({partition: error code} of those not verified), asked directly
        for the ids it coordinates (None: over the listener too)."""
        self.state = state
        self.local = local
        self.listener = listener
        self.client_id = f"{client_id}-{state.broker_id}"
        self.clients = ClientPool(self._address, lambda host, port: NodeClient(
            host, port, client_id=self.client_id, request_timeout_ms=VERIFY_TIMEOUT_MS,
            **(client_options or {})))
        self._next: dict[int, dict[str, _Pending]] = {}  # coordinator -> transactional id -> pending
        self._in_flight: set[int] = set()
        self._tasks: set = set()
        self.closed = False
        self.verified = self.refused = 0

    def coordinator(self, transactional_id: str) -> int | None:
        t = self.state.image.topics.by_name.get(TRANSACTION_TOPIC)
        if t is None or not t.partitions:
            return None
        reg = t.partitions.get(partition_for(transactional_id, len(t.partitions)))
        return reg.leader if reg is not None and reg.leader >= 0 else None

    def verify(self, transactional_id: str, producer_id: int, epoch: int, partitions) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        node = self.coordinator(transactional_id)
        if node is None or self.state.leader_endpoint(node, self.listener) is None:
            fut = loop.create_future()
            fut.set_result({tp: int(E.COORDINATOR_NOT_AVAILABLE) for tp in partitions})
            return fut
        batch = self._next.setdefault(node, {})
        pending = batch.get(transactional_id)
        if pending is not None and (pending.producer_id, pending.epoch) != (producer_id, epoch):
            # Kafka's rule for two checks of one id in a request: the older epoch is fenced.
            if pending.epoch > epoch:
                fut = loop.create_future()
                fut.set_result({tp: int(E.INVALID_PRODUCER_EPOCH) for tp in partitions})
                return fut
            old = batch.pop(transactional_id)
            if not old.future.done():
                old.future.set_result({tp: int(E.INVALID_PRODUCER_EPOCH) for tp in old.partitions})
            pending = None
        if pending is None:
            pending = batch[transactional_id] = _Pending(producer_id, epoch, loop.create_future())
        pending.partitions.update(partitions)
        if node not in self._in_flight:
            loop.call_soon(self._send_next, node)
        return pending.future

    def _send_next(self, node: int) -> None:
        if node in self._in_flight or self.closed:
            return
        batch = self._next.pop(node, None)
        if not batch:
            return
        self._in_flight.add(node)
        task = asyncio.get_running_loop().create_task(self._send(node, batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _address(self, node: int):
        ep = self.state.leader_endpoint(node, self.listener)
        return None if ep is None else (ep[0] or "localhost", ep[1])

    def _client(self, node: int):
        return self.clients.get(node)

    async def _send(self, node: int, batch: dict) -> None:
        try:
            results = await self._ask(node, batch)
        finally:
            self._in_flight.discard(node)
            if self._next.get(node):
                asyncio.get_running_loop().call_soon(self._send_next, node)
        for tid, pending in batch.items():
            errors = results.get(tid, {})
            self.verified += len(pending.partitions) - len(errors)
            self.refused += len(errors)
            if not pending.future.done():
                pending.future.set_result(errors)

    async def _ask(self, node: int, batch: dict) -> dict:
        """transactional id -> {(topic, partition): error code} of the partitions not verified."""
        def all_of(code):
            return {tid: {tp: code for tp in p.partitions} for tid, p in batch.items()}

        if node == self.state.broker_id and self.local is not None:
            # This broker coordinates them: no request to itself over a socket.
            return {tid: self.local(tid, p.producer_id, p.epoch, sorted(p.partitions)) for tid, p in batch.items()}
        client = self._client(node)
        if client is None:
            return all_of(int(E.COORDINATOR_NOT_AVAILABLE))
        T = AddPartitionsToTxnRequest.Transaction
        txns = []
        for tid, p in batch.items():
            topics: dict = {}
            for topic, part in sorted(p.partitions):
                topics.setdefault(topic, []).append(part)
            txns.append(T(transactional_id=tid, producer_id=p.producer_id, producer_epoch=p.epoch, verify_only=True,
                          topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()]))
        try:
            resp = await client.request(AddPartitionsToTxnRequest(transactions=txns), 4)
        except UnsupportedVersionError:
            log.warning("transactions: broker %d does not verify transactional produce (AddPartitionsToTxn v4): "
                        "appending without verification", node)
            return {}
        except (KraftError, OSError, asyncio.TimeoutError) as exc:
            log.debug("transactions: verification by broker %d failed: %s", node, exc)
            return all_of(int(E.NETWORK_EXCEPTION))
        if resp.error_code:
            code = int(resp.error_code)
            return all_of(int(E.INVALID_TXN_STATE) if code == E.CLUSTER_AUTHORIZATION_FAILED else code)
        out: dict = {}
        for r in resp.results_by_transaction:
            errors = out.setdefault(r.transactional_id, {})
            for t in r.topic_results:
                for pr in t.results_by_partition:
                    if pr.partition_error_code:
                        errors[(t.name, pr.partition_index)] = int(pr.partition_error_code)
        return out

    async def close(self) -> None:
        self.closed = True
        for batch in self._next.values():
            for p in batch.values():
                if not p.future.done():
                    p.future.set_result({tp: int(E.NETWORK_EXCEPTION) for tp in p.partitions})
        self._next.clear()
        await self.clients.aclose()
