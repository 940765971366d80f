"""Operator-side client of a quorum: describe it, find its leader, write records through it.

Used by ``kraft metadata-quorum``, ``kraft produce``, the demo, integration tests and
benchmarks. Writes use Kafka's Produce API (v11) on the controller listener, addressed to
``__cluster_metadata`` partition 0: the leader answers once the records are committed
(acks=-1), or NOT_LEADER_OR_FOLLOWER with the current leader's id and epoch, which the
writer follows. Every address comes from DescribeQuorum v2's node list, so one bootstrap
address is enough. Nothing here retries a write whose outcome is unknown (a timeout) on its
own; the caller decides.
"""

from __future__ import annotations

import asyncio
import struct
import time
from dataclasses import dataclass, field

from kraft.errors import ErrorCode, KraftError, NetworkError, NotLeaderError
from kraft.protocol import (INT64_SENTINEL, DescribeQuorumRequest, ProduceRequest, ProduceResponse, encode_response,
                            split_at_int64)
from kraft.client.node_client import ConnectionRefused, NodeClient

METADATA_TOPIC = "__cluster_metadata"
DESCRIBE_QUORUM_VERSION = 2
PRODUCE_VERSION = 11


@dataclass
class QuorumDescription:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list  # DescribeQuorumResponse.ReplicaState
    observers: list
    nodes: dict  # node id -> (host, port) of its controller listener
    error_code: int = 0
    endpoints: dict = field(default_factory=dict)  # node id -> ["NAME://host:port", ...]
    # kraft's TargetVoters (a reassignment under way): DescribeQuorumResponse.TargetVoter, or None
    target_voters: list | None = None


class _SuccessAnswer:
    """Reads the base offset out of a success answer to a Produce of ``__cluster_metadata``-0
    at one version by matching the bytes around it against the encoding of that answer (a
    writer's answers are all alike but for the offset); anything else (an error, a field
    the server filled in) is None and decoded in full. Decoding the answer into message
    objects was a fifth of a writing client's CPU."""

    __slots__ = ("head", "tail", "size")
    _I64 = struct.Struct(">q")

    def __init__(self, version: int):
        P = ProduceResponse
        body = P(responses=[P.Topic(name=METADATA_TOPIC, partition_responses=[
            P.Topic.Partition(index=0, base_offset=INT64_SENTINEL)])])
        # The frame as the client sees it: correlation id (zero here), header rest, body.
        frame = bytes(encode_response(0, P.API_KEY, version, body))[4:]
        head, self.tail = split_at_int64(frame[4:])
        self.head, self.size = head, len(frame)

    def __call__(self, frame):
        head = self.head
        if (len(frame) == self.size and type(frame) is bytes and frame.startswith(head, 4)
                and frame.endswith(self.tail)):
            return self._I64.unpack_from(frame, 4 + len(head))[0]
        return None


_SUCCESS = _SuccessAnswer(PRODUCE_VERSION)


def parse_address(s: str) -> tuple[str, int]:
    host, _, port = s.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {s!r}")
    if not 0 < int(port) < 65536:  # else the socket layer's OverflowError, as a traceback
        raise ValueError(f"port {port} is out of range (1-65535) in {s.strip()!r}")
    return host.strip("[]"), int(port)


class NoNodeReachable(KraftError):
    """Every address refused the connection (nothing listens there): a command-line tool
    reports this at once instead of retrying until its timeout."""

    code = ErrorCode.NETWORK_EXCEPTION


class NotAControllerListener(NoNodeReachable):
    """Every address that answered took DescribeQuorum for a request it does not serve
    (INVALID_REQUEST): a broker listener given where a controller listener was expected. Waiting
    cannot change that, so a command-line tool says so at once."""


class QuorumClient:
    """Talks to the nodes of one quorum, starting from bootstrap addresses.

    ``refused_is_final``: when every known address refuses the connection, :meth:`describe`
    raises :class:`NoNodeReachable` at once (what an operator's command wants). Off by
    default, because a cluster that is starting up refuses connections for a moment."""

    def __init__(self, bootstrap: list[tuple[str, int]], *, request_timeout_ms: int = 5000,
                 refused_is_final: bool = False):
        self.bootstrap = list(bootstrap)
        self.refused_is_final = refused_is_final
        self.request_timeout_ms = request_timeout_ms
        self.nodes: dict[int, tuple[str, int]] = {}
        self._clients: dict[tuple[str, int], NodeClient] = {}

    def client(self, addr: tuple[str, int]) -> NodeClient:
        c = self._clients.get(addr)
        if c is None:
            c = self._clients[addr] = NodeClient(addr[0], addr[1], client_id="kraft-admin",
                                                 request_timeout_ms=self.request_timeout_ms,
                                                 retry_backoff_ms=50, retry_backoff_max_ms=500,
                                                 max_in_flight=1024)
        return c

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._clients.values()))

    async def describe_at(self, addr: tuple[str, int]) -> QuorumDescription:
        req = DescribeQuorumRequest(topics=[DescribeQuorumRequest.Topic(
            topic_name=METADATA_TOPIC, partitions=[DescribeQuorumRequest.Topic.Partition(partition_index=0)])])
        resp = await self.client(addr).request(req, DESCRIBE_QUORUM_VERSION)
        endpoints = {}
        for node in resp.nodes:
            for lst in node.listeners:
                self.nodes[node.node_id] = (lst.host, lst.port)
                host = f"[{lst.host}]" if ":" in lst.host else lst.host
                endpoints.setdefault(node.node_id, []).append(f"{lst.name}://{host}:{lst.port}")
        if resp.error_code:
            return QuorumDescription(-1, -1, -1, [], [], dict(self.nodes), resp.error_code)
        p = resp.topics[0].partitions[0]
        return QuorumDescription(p.leader_id, p.leader_epoch, p.high_watermark, list(p.current_voters),
                                 list(p.observers), dict(self.nodes), p.error_code, endpoints,
                                 None if resp.target_voters is None else list(resp.target_voters))

    async def describe(self, deadline_s: float = 10.0) -> QuorumDescription:
        """Ask every known node at once and return the leader's answer; raises KraftError at
        the deadline. Concurrent so that a dead node's connect backoff delays nobody."""
        end = time.monotonic() + deadline_s
        last: Exception | None = None
        while time.monotonic() < end:
            budget = max(0.05, min(2.0, end - time.monotonic()))
            candidates = self._candidates()
            tasks = [asyncio.ensure_future(self._tagged(a, budget)) for a in candidates]
            refused, not_controllers = 0, []
            try:
                for next_done in asyncio.as_completed(tasks):
                    addr, d = await next_done
                    if isinstance(d, Exception):
                        last = d
                        refused += isinstance(d, ConnectionRefused)
                    elif d.error_code == 0:
                        return d
                    else:
                        last = KraftError(f"answered {ErrorCode(d.error_code).name}")
                        if d.error_code == ErrorCode.INVALID_REQUEST:
                            not_controllers.append(addr)
            finally:
                for t in tasks:
                    t.cancel()
            if self.refused_is_final and not_controllers and refused + len(not_controllers) == len(candidates):
                names = ", ".join(f"{h}:{p}" for h, p in not_controllers)
                raise NotAControllerListener(
                    f"{names} answered DescribeQuorum with INVALID_REQUEST, as a broker listener does: "
                    "give a controller listener (one named in controller.listener.names) instead")
            if self.refused_is_final and refused == len(candidates):
                raise NoNodeReachable("connection refused to " + ", ".join(f"{h}:{p}" for h, p in candidates))
            await asyncio.sleep(0.02)
        raise KraftError(f"no leader found within {deadline_s:g} s: {last}")

    async def _tagged(self, addr, budget_s: float):
        return addr, await self._describe_quietly(addr, budget_s)

    async def _describe_quietly(self, addr, budget_s: float):
        inner = asyncio.ensure_future(self.describe_at(addr))
        # If this task is cancelled just as the attempt fails (connection refused), nobody
        # awaits it: retrieve the exception so asyncio does not log it as never retrieved.
        inner.add_done_callback(lambda t: t.cancelled() or t.exception())
        try:
            return await asyncio.wait_for(inner, budget_s)
        except (NetworkError, asyncio.TimeoutError) as exc:
            return exc if isinstance(exc, NetworkError) else NetworkError(f"{addr} did not answer in time")

    async def cluster_id(self) -> str:
        """The cluster id, from DescribeCluster v1 (controller endpoints) at any node."""
        from kraft.protocol import DescribeClusterRequest

        last: Exception | None = None
        for addr in self._candidates():
            try:
                resp = await self.client(addr).request(DescribeClusterRequest(endpoint_type=2), 1)
            except NetworkError as exc:
                last = exc
                continue
            if resp.error_code == 0:
                return resp.cluster_id
            last = KraftError(f"DescribeCluster: {ErrorCode(resp.error_code).name}")
        raise KraftError(f"no node answered DescribeCluster: {last}")

    def _candidates(self):
        seen = []
        for addr in list(self.nodes.values()) + self.bootstrap:
            if addr not in seen:
                seen.append(addr)
        return seen

    async def produce(self, addr: tuple[str, int], batch: bytes, *, acks: int = -1,
                      timeout_ms: int = 30000) -> int:
        """Send one batch to the node at ``addr``; returns the base offset it got.

        Raises NotLeaderError (with the leader id/epoch the node knows) or KraftError."""
        P = ProduceRequest

        def make():
            return P(acks=acks, timeout_ms=timeout_ms, topic_data=[P.Topic(
                name=METADATA_TOPIC, partition_data=[P.Topic.Partition(index=0, records=batch)])])
        # A writer resending the same batch reuses its encoded frame (immutable bytes up to
        # 64 KiB: the key hashes the content once per bytes object).
        key = ("produce", batch, acks, timeout_ms) if type(batch) is bytes and len(batch) <= 1 << 16 else None
        resp = await self.client(addr).request(make if key else make(), PRODUCE_VERSION,
                                               timeout_ms=timeout_ms + 5000, reuse_key=key,
                                               fast=_SUCCESS if acks else None)
        if type(resp) is int:  # the success answer, read without decoding
            return resp
        if resp is None:
            return -1
        for ep in getattr(resp, "node_endpoints", ()) or ():
            self.nodes.setdefault(ep.node_id, (ep.host, ep.port))
        part = resp.responses[0].partition_responses[0]
        if part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            leader = part.current_leader
            raise NotLeaderError(f"{addr[0]}:{addr[1]} is not the leader",
                                 leader.leader_id if leader else -1, leader.leader_epoch if leader else -1)
        if part.error_code:
            err = KraftError(f"produce failed: {ErrorCode(part.error_code).name} {part.error_message or ''}")
            err.code = ErrorCode(part.error_code)
            raise err
        return part.base_offset


class QuorumWriter:
    """Writes batches to whichever node leads, following NOT_LEADER_OR_FOLLOWER redirects."""

    def __init__(self, client: QuorumClient):
        self.client = client
        self.leader: tuple[str, int] | None = None

    async def _find_leader(self, deadline_s: float) -> tuple[str, int]:
        end = time.monotonic() + deadline_s
        while True:
            d = await self.client.describe(max(0.1, end - time.monotonic()))
            # A leader just added to a dynamic quorum may not have its address in the voters yet.
            self.leader = self.client.nodes.get(d.leader_id)
            if self.leader is not None:
                return self.leader
            if time.monotonic() > end:
                raise KraftError(f"no address known for leader {d.leader_id}")
            await asyncio.sleep(0.05)

    async def write(self, batch: bytes, *, deadline_s: float = 30.0) -> int:
        """Commit ``batch``; returns its base offset. Retries only answers that prove the
        write was not applied (not leader, no connection before sending)."""
        end = time.monotonic() + deadline_s
        while True:
            addr = self.leader or await self._find_leader(max(0.1, end - time.monotonic()))
            try:
                return await self.client.produce(addr, batch)
            except NotLeaderError as exc:
                self.leader = self.client.nodes.get(exc.leader_id) if exc.leader_id >= 0 else None
                if self.leader is None:
                    await asyncio.sleep(0.02)
            if time.monotonic() > end:
                raise KraftError(f"no leader accepted the write within {deadline_s:.0f} s")

    async def write_through_failures(self, batch: bytes, *, deadline_s: float = 30.0) -> int:
        """Like :meth:`write`, but also retries after a connection failure (the leader died),
        looking the leader up again. A failure after the request was sent is indeterminate,
        so the batch may then be committed twice: fine for demos and load, not for exactly-once."""
        end = time.monotonic() + deadline_s
        while True:
            try:
                return await self.write(batch, deadline_s=max(0.1, end - time.monotonic()))
            except NetworkError:
                self.leader = None
                if time.monotonic() > end:
                    raise
                await asyncio.sleep(0.02)
