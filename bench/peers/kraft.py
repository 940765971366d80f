"""kraft as 3 real ``kraft server start`` processes on loopback (LocalCluster, fsync on), and
its benchmark writer: Produce v11 to the leader's controller listener, acks=-1, answered
once the records are committed; every node's state machine (CommittedRecordsListener)
applies them. Batches are one record batch of ``count`` records.

The ONLY module of bench/peers that imports kraft's client and cluster classes: their module
paths are about to change (kraft.client.node_client -> kraft.client, local_cluster -> kraft.cli).
Measures nothing."""

from __future__ import annotations

import asyncio
import urllib.request

from bench.peers.procs import kill, register, temp_dir, wait_until
from kraft.errors import KraftError, NetworkError, NotLeaderError
from kraft.protocol import ApiVersionsRequest
from kraft.records import build_batch
from kraft.client.quorum import QuorumClient, QuorumWriter
from kraft.client.node_client import NodeClient
from kraft.cli.local_cluster import LOW_LATENCY, LocalCluster, free_ports

# Re-exported for bench/bench_quorum.py, so the coming move touches this file only.
__all__ = ["KraftCluster", "Writer", "round_trip_floor", "LOW_LATENCY", "LocalCluster", "NodeClient",
           "QuorumClient", "QuorumWriter", "free_ports"]

# "linger-0" is not a shipped profile: it shows what the 1 ms linger costs one write in flight.
PROFILES = {"defaults": {}, "low-latency": LOW_LATENCY,
            "linger-0": {**LOW_LATENCY, "controller.quorum.append.linger.ms": "0"}}


class KraftCluster:
    def __init__(self, profile: str = "defaults", size: int = 3):
        self.profile = profile
        self.name = "kraft" if profile == "defaults" else f"kraft ({profile})"
        self.cluster = LocalCluster(temp_dir("kraft"), size, overrides=PROFILES[profile], metrics=True,
                                    log_level="WARNING").create()
        self.ids = self.cluster.ids

    def start(self, node_id: int | None = None) -> None:
        self.cluster.start(node_id)
        for i in ([node_id] if node_id else self.ids):
            register(self.cluster.procs[i])

    def _describe(self):
        async def go():
            client = QuorumClient([self.cluster.address(i) for i in self.running()])
            try:
                return await client.describe(2.0)
            finally:
                await client.close()
        return asyncio.run(go())

    def leader(self) -> int | None:
        try:
            d = self._describe()
        except (KraftError, NetworkError, OSError):
            return None
        return d.leader_id if d.leader_id in self.running() else None

    def wait_ready(self, timeout: float = 60.0) -> int:
        def ready():
            d = self._describe()
            caught_up = all(v.log_end_offset >= 0 for v in d.voters) and len(d.voters) == len(self.ids)
            return d.leader_id if d.leader_id in self.running() and caught_up else None
        return wait_until(ready, timeout, 0.1, "kraft leader")

    def applied_records(self) -> dict[int, int]:
        """Records each node's state machine applied (its kraft_committed_records_total)."""
        out = {}
        for i in self.running():
            url = f"http://127.0.0.1:{self.cluster.metrics_ports[i]}/metrics"
            with urllib.request.urlopen(url, timeout=2) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("kraft_committed_records_total"):
                        out[i] = int(float(line.split()[-1]))
        return out

    def running(self) -> list[int]:
        return self.cluster.running()

    def kill(self, i: int) -> None:
        kill(self.cluster.procs.get(i))

    def stop(self) -> None:
        for i in list(self.cluster.procs):
            self.kill(i)

    def server_pids(self) -> list[int]:
        return [p.pid for p in self.cluster.procs.values() if p.poll() is None]

    def spec(self, ids: list[int] | None = None) -> dict:
        ids = ids or [self.leader()]
        return {"kind": "kraft", "nodes": [self.cluster.address(i) for i in ids]}


class Writer:
    """QuorumClient.produce to the node believed to lead; NOT_LEADER answers move it."""

    def __init__(self, spec: dict, worker: int, value: bytes):
        self.client = QuorumClient([tuple(a) for a in spec["nodes"]])
        self.leader = tuple(spec["nodes"][0]) if len(spec["nodes"]) == 1 else None
        self.value = value
        self.batches: dict[int, bytes] = {}

    async def connect(self) -> None:
        if self.leader is None:
            await self.recover()

    async def write(self, count: int) -> None:
        batch = self.batches.get(count)
        if batch is None:
            batch = self.batches[count] = build_batch([self.value] * count)
        if self.leader is None:
            raise NetworkError("no leader known")
        try:
            await self.client.produce(self.leader, batch)
        except NotLeaderError as exc:
            self.leader = self.client.nodes.get(exc.leader_id) if exc.leader_id >= 0 else None
            raise

    async def recover(self, exc: BaseException | None = None) -> None:
        try:
            d = await self.client.describe(1.0)
            self.leader = self.client.nodes[d.leader_id]
        except (KraftError, NetworkError, KeyError):
            self.leader = None

    async def close(self) -> None:
        await self.client.close()


async def round_trip_floor(address: tuple[str, int], seconds: float, rate: int) -> list[float]:
    """ApiVersions round trips to one kraft node: request in, response out, no Raft, no disk."""
    client = NodeClient(*address)
    for _ in range(200):
        try:
            await client.request(ApiVersionsRequest(), 3)
            break
        except NetworkError:
            await asyncio.sleep(0.05)
    lat = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i in range(int(seconds * rate)):
        t = loop.time()
        await client.request(ApiVersionsRequest(), 3)
        lat.append(loop.time() - t)
        await asyncio.sleep(max(0.0, start + (i + 1) / rate - loop.time()))
    await client.close()
    return lat
