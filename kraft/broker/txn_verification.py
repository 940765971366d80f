"""KIP-890 part 1: the partition leader asks the transaction coordinator whether a transactional
produce belongs to an ongoing transaction before it appends the transaction's first batch there.

Without it a produce delayed in the network (or retried) can land after its transaction ended:
it opens a transaction no coordinator knows, which no marker will ever close, and the partition's
last stable offset stops there for good (a *hanging transaction*; read_committed consumers stall).
With it, as Kafka 3.6+ (``transaction.partition.verification.enable``, default true):

* a transactional batch of a producer with no ongoing transaction on the partition is held
  while this broker sends the coordinator (the leader of the id's ``__transaction_state``
  partition) an AddPartitionsToTxn v4 with ``verify_only`` (Kafka's AddPartitionsToTxnManager:
  one request per coordinator at a time, the transactions of a loop turn batched in it);
* a *verification guard* is put in the partition's producer state when the check starts; a
  COMMIT/ABORT marker for that producer removes it (``ProducerStateTable.apply``), so a produce
  verified while its transaction was still open, but appended after the marker, is refused
  INVALID_TXN_STATE instead of opening a hanging transaction;
* the coordinator's answers are turned into produce errors as Kafka's ReplicaManager does:
  PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE -> INVALID_TXN_STATE,
  the retriable coordinator errors (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) -> NOT_ENOUGH_REPLICAS so every client retries,
  a lost connection -> NETWORK_EXCEPTION; a coordinator that does not know v4 means "skip".
"""

from __future__ import annotations

import asyncio
import logging
import struct

from kraft.client.client_pool import ClientPool
from kraft.client.node_client import NodeClient
from kraft.coordinator.txn_records import TRANSACTION_TOPIC, partition_for
from kraft.errors import ErrorCode as E, KraftError, UnsupportedVersionError
from kraft.protocol.messages.add_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnTopic

log = logging.getLogger("kraft.transactions")

_ATTRIBUTES, _PRODUCER_ID, _EPOCH = 21, 43, 51
_TRANSACTIONAL = 0x10
_HEAD = struct.Struct(">qh")
VERIFY_TIMEOUT_MS = 10_000

#: coordinator answers a client retries, turned into one every producer retries (Kafka's mapping)
_RETRIABLE = {int(E.CONCURRENT_TRANSACTIONS), int(E.COORDINATOR_LOAD_IN_PROGRESS),
              int(E.COORDINATOR_NOT_AVAILABLE), int(E.NOT_COORDINATOR)}


def produce_error(code: int) -> tuple[int, str | None]:
    """The produce answer for a verification answer ``code`` (Kafka's ReplicaManager mapping)."""
    if code == E.PRODUCER_FENCED:
        return int(E.INVALID_PRODUCER_EPOCH), None
    if code in (E.TRANSACTION_ABORTABLE, E.INVALID_TXN_STATE):
        return int(E.INVALID_TXN_STATE), "Partition was not added to the transaction"
    if code in _RETRIABLE:
        return int(E.NOT_ENOUGH_REPLICAS), ("Unable to verify the partition has been added to the transaction. "
                                            f"Underlying error: {E(code).name}")
    return code, None


def transactional_head(data) -> tuple[int, int] | None:
    """(producer id, epoch) of the first batch of ``data`` if it is transactional, else None."""
    if data is None or len(data) < _EPOCH + 2 or not data[_ATTRIBUTES + 1] & _TRANSACTIONAL:
        return None
    return _HEAD.unpack_from(data, _PRODUCER_ID)


class _Pending:
    """One transaction's partitions to verify in the next request to its coordinator."""

    __slots__ = ("producer_id", "epoch", "partitions", "future")

    def __init__(self, producer_id: int, epoch: int, future):
        self.producer_id, self.epoch, self.partitions, self.future = producer_id, epoch, set(), future


class TxnVerifier:
    """Sends the verifications of a broker to the transaction coordinators. ``verify`` returns a
    future of {(topic, partition): error code} (the partitions not verified); ``state`` is the
    broker's (image and endpoints), ``listener`` the one brokers reach each other on."""

    def __init__(self, state, listener: str, *, client_id: str = "kraft-txn-verify"):
        self.state = state
        self.listener = listener
        self.client_id = f"{client_id}-{state.broker_id}"
        self.clients = ClientPool(self._address, lambda host, port: NodeClient(
            host, port, client_id=self.client_id, request_timeout_ms=VERIFY_TIMEOUT_MS))
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
