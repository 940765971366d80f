"""Talking to the quorum controller: ``ControllerClient`` sends controller requests
(CreateTopics, BrokerRegistration, ...) to whichever node is the active controller, following
NOT_CONTROLLER and dead nodes; ``SimulatedBroker`` is a broker's lifecycle as seen by the
controller (register, then heartbeat every ``broker.heartbeat.interval.ms``, reporting the
metadata offset it has "read", here the quorum's high watermark), for tests, benchmarks and
demos until real brokers exist. Retries are for answers that say "not me" or connections that
failed. A request that carries its own timeout (CreateTopics: ``timeout_ms``) is given longer
than that on the socket: the controller answers it first, REQUEST_TIMED_OUT if it never started
it (then nothing was applied and a retry is safe); only a request the client itself gave up on
may have been applied (a retry of CreateTopics then answers TOPIC_ALREADY_EXISTS).
"""

from __future__ import annotations

import asyncio
import time
import uuid

from kraft.errors import ErrorCode, KraftError, NetworkError
from kraft.client.node_client import NodeClient
from kraft.protocol import (BrokerHeartbeatRequest, BrokerRegistrationRequest, CreateTopicsRequest,
                            DescribeQuorumRequest, Struct)

NOT_CONTROLLER = int(ErrorCode.NOT_CONTROLLER)
#: a simulated broker claims every metadata.version (it reads no records that would care)
METADATA_VERSION_MAX = 0x7FFF
#: the version each controller API is sent at
VERSIONS = {19: 7, 20: 6, 37: 3, 62: 4, 63: 1, 64: 0, 55: 2}
#: How much longer than a request's own timeout the socket waits for its answer (a request the
#: controller started is answered at its commit, which may come a little after the timeout).
ANSWER_MARGIN_MS = 15_000
#: How often a request waiting on the hinted leader checks that it still is the leader.
LEADER_CHECK_S = 0.1


class NoControllerError(KraftError):
    code = ErrorCode.NOT_CONTROLLER


class _LeaderMoved(Exception):
    """The node a request waits on is no longer the quorum's leader."""


def _codes(obj) -> list[int]:
    out = []
    if isinstance(obj, list):
        for x in obj:
            out += _codes(x)
    elif isinstance(obj, Struct):
        for f in type(obj).FIELDS:
            v = getattr(obj, f.name, None)
            if f.name == "error_code" and isinstance(v, int):
                out.append(v)
            elif isinstance(v, (list, Struct)):
                out += _codes(v)
    return out


class ControllerClient:
    def __init__(self, addresses, *, client_id: str = "kraft-controller-client", request_timeout_ms: int = 30000,
                 client_options: dict | None = None, leader_hint=None):
        """``leader_hint() -> (host, port) | None``: the quorum leader as this node's Raft knows
        it. Requests go there first, and one waiting on a node that is no longer the leader is
        sent again to the new one (a paused controller would otherwise hold it for its whole
        timeout; the resend on a leader change is kraft's own choice)."""
        self.addresses = list(addresses)
        self._options = dict(client_id=client_id, request_timeout_ms=request_timeout_ms, max_in_flight=64,
                             **(client_options or {}))
        self._clients = {a: NodeClient(a[0], a[1], **self._options) for a in self.addresses}
        self._active = 0
        self.leader_hint = leader_hint

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._clients.values()), return_exceptions=True)

    async def call(self, request, *, deadline_s: float = 30.0, version: int | None = None,
                   attempt_timeout_ms: int | None = None):
        """The active controller's answer to ``request``; NoControllerError past the deadline.
        ``attempt_timeout_ms``: how long one node may take to answer before the next is tried
        (default: the client's request timeout)."""
        if version is None:
            version = VERSIONS[request.API_KEY]
        end = time.monotonic() + deadline_s
        # Past the request's own timeout, so that the controller's answer (or its
        # REQUEST_TIMED_OUT) comes before the socket gives up on it.
        own = getattr(request, "timeout_ms", None)
        socket_ms = own + ANSWER_MARGIN_MS if isinstance(own, int) and own > 0 else attempt_timeout_ms
        last = None
        while time.monotonic() < end:
            hinted = self._hinted()
            addr = hinted or self.addresses[self._active % len(self.addresses)]
            try:
                if hinted is None:
                    resp = await self._client(addr).request(request, version, socket_ms)
                else:
                    resp = await self._while_leader(addr, self._client(addr).request(request, version, socket_ms))
            except NetworkError as e:
                last = e
            except _LeaderMoved:
                last = "the leader moved"
                continue
            else:
                if NOT_CONTROLLER not in _codes(resp):
                    return resp
                last = "NOT_CONTROLLER"
            if hinted is not None:  # the hint's node said "not me" or failed: it is about to change
                await asyncio.sleep(0.05)
                continue
            self._active += 1
            if self._active % len(self.addresses) == 0:
                await asyncio.sleep(0.05)
        raise NoControllerError(f"no active controller answered within {deadline_s} s (last: {last})")

    def _hinted(self):
        if self.leader_hint is None:
            return None
        try:
            address = self.leader_hint()
        except Exception:  # a hint is only a hint
            return None
        return tuple(address) if address else None

    def _client(self, address) -> NodeClient:
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = NodeClient(address[0], address[1], **self._options)
        return client

    async def _while_leader(self, address, attempt):
        """``attempt``'s answer, unless the hinted leader moves away from ``address`` first."""
        task = asyncio.ensure_future(attempt)
        try:
            while True:
                done, _ = await asyncio.wait((task,), timeout=LEADER_CHECK_S)
                if done:
                    return task.result()
                moved = self._hinted()
                if moved is not None and moved != address:
                    raise _LeaderMoved()
        finally:
            if not task.done():
                task.cancel()

    async def high_watermark(self) -> int:
        D = DescribeQuorumRequest
        req = D(topics=[D.Topic(topic_name="__cluster_metadata", partitions=[D.Topic.Partition(partition_index=0)])])
        for i in range(len(self.addresses)):
            addr = self.addresses[(self._active + i) % len(self.addresses)]
            try:
                resp = await self._clients[addr].request(req, VERSIONS[55], timeout_ms=2000)
            except NetworkError:
                continue
            p = resp.topics[0].partitions[0] if resp.topics and resp.topics[0].partitions else None
            if p is not None and p.error_code == 0:
                return p.high_watermark
        return -1

    async def create_topics(self, specs, *, deadline_s: float = 60.0):
        """``specs``: (name, partitions, replication factor); the CreateTopics answer."""
        T = CreateTopicsRequest.Topic
        req = CreateTopicsRequest(topics=[T(name=n, num_partitions=p, replication_factor=r) for n, p, r in specs],
                                  timeout_ms=int(deadline_s * 1000))
        return await self.call(req, deadline_s=deadline_s)


class SimulatedBroker:
    def __init__(self, client: ControllerClient, broker_id: int, cluster_id: str, *, rack: str | None = None,
                 heartbeat_interval_s: float = 2.0, port: int = 9092):
        self.client = client
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.rack = rack
        self.interval = heartbeat_interval_s
        self.port = port
        self.incarnation = uuid.uuid4()
        self.epoch = -1
        self.fenced = True
        self.errors = 0
        self._task: asyncio.Task | None = None

    async def register(self, deadline_s: float = 30.0) -> int:
        R = BrokerRegistrationRequest
        req = R(broker_id=self.broker_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation,
                listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1", port=self.port, security_protocol=0)],
                features=[R.Feature(name="metadata.version", min_supported_version=1,
                                    max_supported_version=METADATA_VERSION_MAX)], rack=self.rack)
        resp = await self.client.call(req, deadline_s=deadline_s)
        if resp.error_code != 0:
            raise KraftError(f"broker {self.broker_id}: registration failed: {ErrorCode(resp.error_code).name}")
        self.epoch = resp.broker_epoch
        return self.epoch

    async def heartbeat(self, *, want_shut_down: bool = False):
        offset = await self.client.high_watermark()
        resp = await self.client.call(BrokerHeartbeatRequest(
            broker_id=self.broker_id, broker_epoch=self.epoch, current_metadata_offset=offset, want_fence=False,
            want_shut_down=want_shut_down), deadline_s=self.interval * 4,
            attempt_timeout_ms=int(self.interval * 1000))  # a dead controller: try the next soon
        if resp.error_code == 0:
            self.fenced = resp.is_fenced
        else:
            self.errors += 1
        return resp

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                await self.heartbeat()
            except KraftError:
                self.errors += 1
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        """Stop heartbeating (the controller fences this broker once its lease expires)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
