"""The requests behind ``kraft transactions``, over kraft's own ``NodeClient``: librdkafka's admin
client has no ListTransactions, DescribeTransactions, DescribeProducers or abort, so this
speaks them itself, as Kafka's ``Admin`` does (``listTransactions``: every broker;
``describeTransactions``: FindCoordinator key type 1, then the coordinator;
``describeProducers``: the partition leader or a chosen broker; ``abortTransaction``: an ABORT
WriteTxnMarkers to the partition leader).

Coordinator errors Kafka's admin client retries (loading, not available, moved) are retried
here until the timeout; every other error code is returned to the caller, which words it.
Prints nothing.
"""

from __future__ import annotations

import asyncio
import time

from kraft.cli.kafka_tool_args import ToolError
from kraft.client.node_client import NodeClient
from kraft.client.quorum import parse_address
from kraft.errors import ErrorCode, NetworkError
from kraft.protocol import MetadataRequest
from kraft.protocol.messages.describe_producers import DescribeProducersRequest
from kraft.protocol.messages.group_membership import FindCoordinatorRequest
from kraft.protocol.messages.transactions_admin import DescribeTransactionsRequest, ListTransactionsRequest
from kraft.protocol.messages.write_txn_markers import WriteTxnMarkersRequest

METADATA_VERSION = 9
FIND_COORDINATOR_VERSION = 3  # one key per request: all a describe needs
#: Kafka's admin client retries these until its timeout (the coordinator is loading or moved).
RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.NOT_COORDINATOR}
_BACKOFF_S = 0.2


def error_text(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


class Cluster:
    """What Metadata says: brokers by id and each partition's leader and replicas."""

    def __init__(self, response):
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        self.partitions: dict[tuple[str, int], tuple[int, list[int]]] = {}
        self.topic_errors: dict[str, int] = {}
        for t in response.topics:
            if t.error_code:
                self.topic_errors[t.name] = t.error_code
                continue
            for p in t.partitions:
                self.partitions[(t.name, p.partition_index)] = (p.leader_id, list(p.replica_nodes))


class TxnAdmin:
    def __init__(self, bootstrap: str, *, timeout_s: float = 30.0):
        self.bootstrap = [parse_address(s) for s in bootstrap.split(",") if s.strip()]
        self.timeout_s = timeout_s
        self._clients: dict = {}

    async def close(self) -> None:
        for c in self._clients.values():
            await c.close()
        self._clients.clear()

    async def _ask(self, address, request, version: int):
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = NodeClient(*address, client_id="kraft-transactions",
                                                         request_timeout_ms=int(self.timeout_s * 1000))
        return await client.request(request, version)

    async def _any(self, request, version: int):
        last = None
        for address in self.bootstrap:
            try:
                return await self._ask(address, request, version)
            except NetworkError as exc:
                last = exc
        raise ToolError(f"no broker of {', '.join(f'{h}:{p}' for h, p in self.bootstrap)} answered: {last}")

    async def _at(self, cluster: Cluster, broker_id: int, request, version: int):
        address = cluster.brokers.get(broker_id)
        if address is None:
            raise ToolError(f"broker {broker_id} is not in the cluster's metadata "
                            f"(brokers: {', '.join(str(b) for b in sorted(cluster.brokers))})")
        try:
            return await self._ask(address, request, version)
        except NetworkError as exc:
            raise ToolError(f"broker {broker_id} ({address[0]}:{address[1]}) did not answer: {exc}") from None

    async def cluster(self, topics: list[str] | None = None) -> Cluster:
        M = MetadataRequest
        req = M(topics=None if topics is None else [M.Topic(name=t) for t in topics], allow_auto_topic_creation=False)
        return Cluster(await self._any(req, METADATA_VERSION))

    async def _retrying(self, call):
        """``call()`` -> (error code, result); again while the code is retriable, until the timeout."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            code, result = await call()
            if code not in RETRIABLE or time.monotonic() >= deadline:
                return code, result
            await asyncio.sleep(_BACKOFF_S)

    async def list_transactions(self, cluster: Cluster, producer_ids=(), duration_ms: int = -1,
                                pattern: str | None = None) -> dict[int, list]:
        """broker id -> its ListTransactions listings (each broker coordinates some ids). The
        oldest version that carries the filters asked for, as Kafka's admin client picks it:
        v1 for a duration (KIP-994), v2 for a transactional id pattern (KIP-1152)."""
        req = ListTransactionsRequest(state_filters=[], producer_id_filters=list(producer_ids),
                                      duration_filter=duration_ms, transactional_id_pattern=pattern)
        version = 2 if pattern else 1 if duration_ms >= 0 else 0

        async def one(broker_id):
            async def call():
                resp = await self._at(cluster, broker_id, req, version)
                return resp.error_code, resp.transaction_states
            code, states = await self._retrying(call)
            if code:
                raise ToolError(f"broker {broker_id}: {error_text(code)}")
            return broker_id, list(states)
        return dict(await asyncio.gather(*(one(b) for b in sorted(cluster.brokers))))

    async def describe_transaction(self, cluster: Cluster, transactional_id: str):
        """(coordinator id, error code, DescribeTransactions state) for one transactional id."""
        async def call():
            found = await self._any(FindCoordinatorRequest(key=transactional_id, key_type=1),
                                    FIND_COORDINATOR_VERSION)
            if found.error_code:
                return found.error_code, (found.node_id, None)
            if found.node_id not in cluster.brokers:
                cluster.brokers[found.node_id] = (found.host, found.port)
            resp = await self._at(cluster, found.node_id,
                                  DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0)
            state = resp.transaction_states[0]
            return state.error_code, (found.node_id, state)
        code, (node, state) = await self._retrying(call)
        return node, code, state

    async def describe_producers(self, cluster: Cluster, partitions, broker_id: int | None = None) -> dict:
        """(topic, partition) -> (error code, error message, producer states), asked of each
        partition's leader, or of ``broker_id`` when given."""
        by_broker: dict[int, list[tuple[str, int]]] = {}
        out = {}
        for tp in partitions:
            leader = cluster.partitions.get(tp, (-1, []))[0] if broker_id is None else broker_id
            if tp not in cluster.partitions:
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, [])
            elif leader < 0:
                out[tp] = (ErrorCode.LEADER_NOT_AVAILABLE, None, [])
            else:
                by_broker.setdefault(leader, []).append(tp)
        R = DescribeProducersRequest
        for node, tps in sorted(by_broker.items()):
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            resp = await self._at(cluster, node, R(topics=[R.Topic(name=t, partition_indexes=ps)
                                                           for t, ps in topics.items()]), 0)
            for t in resp.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = (p.error_code, p.error_message, list(p.active_producers))
        return out

    async def abort(self, cluster: Cluster, tp: tuple[str, int], producer_id: int, producer_epoch: int,
                    coordinator_epoch: int) -> int:
        """An ABORT marker for the producer's transaction on ``tp``, at its leader; the error code."""
        leader = cluster.partitions.get(tp, (-1, []))[0]
        if tp not in cluster.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if leader < 0:
            return ErrorCode.LEADER_NOT_AVAILABLE
        W = WriteTxnMarkersRequest
        req = W(markers=[W.Marker(producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
                                  coordinator_epoch=coordinator_epoch,
                                  topics=[W.Marker.Topic(name=tp[0], partition_indexes=[tp[1]])])])
        resp = await self._at(cluster, leader, req, 1)
        return resp.markers[0].topics[0].partitions[0].error_code
