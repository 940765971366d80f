"""ZooKeeper 3.8 (Debian package ``zookeeper``) as a 3-server ensemble on loopback, and its
benchmark writer (kazoo). Each server has its own dataDir and ports in a temp dir; the txn
log is fsynced before an ack (ZooKeeper's default ``forceSync=yes``). Writes are ``setData``
of 256-byte values on pre-created znodes; a batch is one ``multi`` transaction.
Must not measure anything (bench_peers does) nor touch the system-wide ZooKeeper config."""

from __future__ import annotations

import asyncio
import os

from bench.peers.procs import ServerProcesses, free_ports, spawn, tcp_command, temp_dir, wait_until

CLASSPATH = "/usr/share/java/zookeeper.jar"  # its manifest lists the other jars
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
KEYS_PER_WRITER = 128


class ZooKeeperCluster(ServerProcesses):
    name = "ZooKeeper 3.8"

    def __init__(self, size: int = 3, heap: str = "1g"):
        self.ids = list(range(1, size + 1))
        self.dir = temp_dir("zk")
        ports = free_ports(3 * size)
        self.client_ports = dict(zip(self.ids, ports[0:size]))
        self.quorum_ports = dict(zip(self.ids, ports[size:2 * size]))
        self.election_ports = dict(zip(self.ids, ports[2 * size:]))
        self.heap = heap
        self.procs = {}

    def _config(self, i: int) -> str:
        data = os.path.join(self.dir, f"zk{i}")
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, "myid"), "w") as f:
            f.write(f"{i}\n")
        lines = [
            "tickTime=2000", "initLimit=10", "syncLimit=5",  # ZooKeeper's sample defaults
            f"dataDir={data}", f"clientPort={self.client_ports[i]}", "clientPortAddress=127.0.0.1",
            "maxClientCnxns=0", "admin.enableServer=false", "4lw.commands.whitelist=srvr,ruok",
            "autopurge.purgeInterval=1", "autopurge.snapRetainCount=3",
        ] + [f"server.{j}=127.0.0.1:{self.quorum_ports[j]}:{self.election_ports[j]}" for j in self.ids]
        path = os.path.join(self.dir, f"zoo{i}.cfg")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def start(self, node_id: int | None = None) -> None:
        for i in ([node_id] if node_id else self.ids):
            cfg = self._config(i)
            cmd = ["java", f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseG1GC",
                   "-Dzookeeper.log.dir=" + self.dir, "-cp", CLASSPATH, MAIN, cfg]
            self.procs[i] = spawn(cmd, os.path.join(self.dir, f"zk{i}.log"))

    def mode(self, i: int) -> str:
        out = tcp_command("127.0.0.1", self.client_ports[i], b"srvr").decode(errors="replace")
        for line in out.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def leader(self) -> int | None:
        for i in self.running():
            try:
                if self.mode(i) in ("leader", "standalone"):
                    return i
            except OSError:
                pass
        return None

    def wait_ready(self, timeout: float = 60.0) -> int:
        def ready():
            lead = self.leader()
            if lead is None:
                return None
            modes = [self.mode(i) for i in self.running()]
            return lead if all(m in ("leader", "follower") for m in modes) else None
        return wait_until(ready, timeout, 0.1, "ZooKeeper ensemble serving")

    def hosts(self, ids) -> str:
        return ",".join(f"127.0.0.1:{self.client_ports[i]}" for i in ids)

    def spec(self, ids: list[int] | None = None) -> dict:
        """Writers connect to the leader (best case: no forwarding hop), or to every server."""
        ids = ids or [self.leader()]
        return {"kind": "zookeeper", "hosts": self.hosts(ids)}


class Writer:
    """kazoo client; its async calls complete on kazoo's thread and are handed to asyncio."""

    def __init__(self, spec: dict, worker: int, value: bytes):
        import logging

        from kazoo.client import KazooClient

        logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # reconnects are expected in failover
        self.zk = KazooClient(hosts=spec["hosts"], timeout=10.0, connection_retry={"max_tries": -1, "delay": 0.01, "max_delay": 0.1})
        self.prefix = f"/bench/w{worker}"
        self.value = value
        self.n = 0

    async def connect(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._setup)
        self.loop = asyncio.get_running_loop()

    def _setup(self) -> None:
        self.zk.start(timeout=30)
        self.zk.ensure_path("/bench")
        for k in range(KEYS_PER_WRITER):
            path = f"{self.prefix}-{k}"
            if not self.zk.exists(path):
                try:
                    self.zk.create(path, self.value)
                except Exception:  # noqa: BLE001 - NodeExists after a retried create
                    pass

    def _bridge(self, async_result):
        fut = self.loop.create_future()

        def done(r):
            try:
                value = r.get_nowait()
                self.loop.call_soon_threadsafe(_set_result, fut, value)
            except Exception as exc:  # noqa: BLE001 - delivered to the awaiting task
                self.loop.call_soon_threadsafe(_set_exception, fut, exc)

        async_result.rawlink(done)
        return fut

    async def write(self, count: int) -> None:
        self.n += 1
        if count == 1:
            await self._bridge(self.zk.set_async(f"{self.prefix}-{self.n % KEYS_PER_WRITER}", self.value))
            return
        tx = self.zk.transaction()
        for j in range(count):
            tx.set_data(f"{self.prefix}-{j % KEYS_PER_WRITER}", self.value)
        results = await self._bridge(tx.commit_async())
        for r in results:
            if isinstance(r, Exception):
                raise r

    async def recover(self, exc: BaseException | None = None) -> None:
        await asyncio.sleep(0.005)  # kazoo reconnects on its own

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._stop)

    def _stop(self) -> None:
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001 - closing after a killed server
            pass


def _set_result(fut, value):
    if not fut.done():
        fut.set_result(value)


def _set_exception(fut, exc):
    if not fut.done():
        fut.set_exception(exc)
