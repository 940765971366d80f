"""A controller in a test process: RaftCore over an InMemoryLog, a real RaftDriver feeding a
QuorumController, and ControllerHandlers behind a real KafkaServer on 127.0.0.1. Peers are silent by default, or
reached with the real NodeClient (``real_peers=True``) for multi-node tests."""

from __future__ import annotations

import asyncio
import random

from kraft.raft import RaftConfig, RaftCore
from kraft.raft.voters import ReplicaKey
from kraft.client.node_client import NodeClient
from kraft.controller.quorum_controller import QuorumController
from kraft.server.controller_handlers import ControllerHandlers
from kraft.server.controller_requests import ControllerRequests
from kraft.server.metrics import NodeMetrics
from kraft.server.network import KafkaServer
from kraft.server.raft_driver import RaftDriver, wall_ms
from kraft.testing import InMemoryLog


def raft_config(cluster_id="c", election_timeout_ms=20):
    return RaftConfig(election_timeout_ms=election_timeout_ms, fetch_timeout_ms=200, request_timeout_ms=300,
                      fetch_max_wait_ms=50, election_backoff_max_ms=20, retry_backoff_ms=5, append_linger_ms=0,
                      cluster_id=cluster_id)


class FlushingLog(InMemoryLog):
    """InMemoryLog with the server log's flush entry points, reporting to the driver."""

    driver = None

    def request_flush(self):
        end = self.end_offset()
        self.flush(end)
        asyncio.get_running_loop().call_soon(self.driver._on_flushed, end)

    def flush_now(self):
        self.flush(self.end_offset())
        return self.end_offset()


class SilentPeer:
    def __init__(self, *a, **kw):
        pass

    def request_nowait(self, wire, version, on_done, timeout_ms=None):
        return False  # never connected: the driver falls back to request()

    async def request(self, wire, version):
        await asyncio.Event().wait()

    async def close(self):
        pass


class NoStateFile:
    def write(self, data):
        pass


class NullListener:
    def handle_commit(self, batches):
        pass

    def handle_load_snapshot(self, reader):
        pass

    def handle_leader_change(self, leader_and_epoch):
        pass


class Controller:
    """Build, then ``await start(ports)`` with every voter's listener port (``listen()`` first
    binds this node's, so nodes can learn each other's ports before their drivers exist)."""

    def __init__(self, voters, *, node_id=1, cluster_id="c", election_timeout_ms=20, directory_id=None,
                 log=None, config=None):
        self.node_id, self.voters, self.cluster_id = node_id, voters, cluster_id
        self.log = log if log is not None else FlushingLog()
        self.core = RaftCore(node_id, self.log, config or raft_config(cluster_id, election_timeout_ms), voters,
                             random.Random(node_id), directory_id=directory_id, now_ms=wall_ms())
        self.server = KafkaServer(None, "127.0.0.1", 0, listener_name="CONTROLLER")
        self.metrics = NodeMetrics(node_id)
        self.driver = None

    async def listen(self) -> int:
        await self.server.start()
        return self.server.port

    async def start(self, ports=None, real_peers=False):
        if self.server._server is None:
            await self.listen()
        ids = [v.id if isinstance(v, ReplicaKey) else v for v in self.voters]
        ports = ports or {}
        endpoints = [(i, "127.0.0.1", ports.get(i, self.server.port if i == self.node_id else 19090 + i))
                     for i in ids]
        self.controller = QuorumController(self.node_id, cluster_id=self.cluster_id)
        self.driver = RaftDriver(self.core, self.log, NoStateFile(), self.controller,
                                 peers={i: ("127.0.0.1", p) for i, _, p in endpoints}, cluster_id=self.cluster_id,
                                 voters=ids, metrics=self.metrics,
                                 client_factory=NodeClient if real_peers else SilentPeer)
        self.log.driver = self.driver
        self.requests = ControllerRequests(self.driver, self.controller, endpoints)
        self.handlers = ControllerHandlers(self.driver, endpoints, metrics=self.metrics,
                                           controller_requests=self.requests)
        self.server.handler = self.handlers
        self.server.admission = self.requests  # as the node wires it
        self.driver.start()

    async def close(self):
        if self.driver is not None:
            self.requests.close()
        await self.server.close()
        if self.driver is not None:
            await self.driver.close()
        close = getattr(self.log, "close", None)
        if close is not None:
            close()
