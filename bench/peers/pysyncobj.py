"""PySyncObj (journal file, fdatasync added by bench/pysyncobj_node.py) as 3 node processes on
loopback, each with a small TCP front end, and the benchmark writer for that front end.
PySyncObj is a library with no client protocol of its own; the front end is the thinnest
way to let client processes write, one request per command (``put``) or per batch
(``put_many``: one replicated command carrying many values). Measures nothing."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys

from bench.peers.procs import ServerProcesses, free_ports, spawn, temp_dir, wait_until

NODE_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pysyncobj_node.py")
REQ = struct.Struct("<IHI")
REP = struct.Struct("<IB")


class PySyncObjCluster(ServerProcesses):
    name = "PySyncObj"

    def __init__(self, size: int = 3):
        self.ids = list(range(1, size + 1))
        self.dir = temp_dir("pysyncobj")
        ports = free_ports(2 * size)
        self.raft_ports = dict(zip(self.ids, ports[:size]))
        self.front_ports = dict(zip(self.ids, ports[size:]))
        self.procs = {}

    def start(self, node_id: int | None = None) -> None:
        addrs = {i: f"127.0.0.1:{p}" for i, p in self.raft_ports.items()}
        for i in ([node_id] if node_id else self.ids):
            partners = ",".join(a for j, a in addrs.items() if j != i)
            cmd = [sys.executable, NODE_SCRIPT, "--self", addrs[i], "--partners", partners,
                   "--journal", os.path.join(self.dir, f"journal-{i}.bin"), "--serve", str(self.front_ports[i])]
            self.procs[i] = spawn(cmd, os.path.join(self.dir, f"node-{i}.log"))

    def is_leader(self, i: int) -> bool:
        with socket.create_connection(("127.0.0.1", self.front_ports[i]), timeout=1.0) as s:
            s.sendall(REQ.pack(1, 0, 0))
            data = b""
            while len(data) < REP.size:
                b = s.recv(REP.size - len(data))
                if not b:
                    raise ConnectionError("closed")
                data += b
            return REP.unpack(data)[1] == 0

    def leader(self) -> int | None:
        for i in self.running():
            try:
                if self.is_leader(i):
                    return i
            except OSError:
                pass
        return None

    def wait_ready(self, timeout: float = 60.0) -> int:
        return wait_until(self.leader, timeout, 0.1, "PySyncObj leader")

    def spec(self, ids: list[int] | None = None) -> dict:
        ids = ids or [self.leader()]
        return {"kind": "pysyncobj", "ports": [self.front_ports[i] for i in ids]}


class WriteFailed(Exception):
    pass


class Writer:
    """One pipelined connection to a node's front end; replies matched by request id."""

    def __init__(self, spec: dict, worker: int, value: bytes):
        self.ports = spec["ports"]
        self.t = 0
        self.value = value
        self.waiting: dict[int, asyncio.Future] = {}
        self.next_id = 0
        self.writer = None
        self.reader_task = None

    async def connect(self) -> None:
        reader, self.writer = await asyncio.open_connection("127.0.0.1", self.ports[self.t % len(self.ports)])
        self.writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader_task = asyncio.ensure_future(self._read(reader))

    async def _read(self, reader) -> None:
        try:
            while True:
                data = await reader.readexactly(REP.size)
                rid, status = REP.unpack(data)
                fut = self.waiting.pop(rid, None)
                if fut is not None and not fut.done():
                    if status == 0:
                        fut.set_result(None)
                    else:
                        fut.set_exception(WriteFailed("not committed"))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            waiting, self.waiting = self.waiting, {}
            for fut in waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("front end closed"))

    async def write(self, count: int) -> None:
        if self.writer is None or self.reader_task.done():
            raise ConnectionError("not connected")
        self.next_id = (self.next_id + 1) & 0xFFFFFFFF
        rid = self.next_id
        fut = asyncio.get_running_loop().create_future()
        self.waiting[rid] = fut
        payload = self.value * count
        self.writer.write(REQ.pack(rid, count, len(payload)) + payload)
        await asyncio.wait_for(fut, 30)

    async def recover(self, exc: BaseException | None = None) -> None:
        """After a failure: if the connection died or a command got no answer, reconnect to
        the next node (a follower forwards to its leader); a refused command on a live
        connection is just retried."""
        alive = self.writer is not None and not self.reader_task.done()
        if alive and not isinstance(exc, asyncio.TimeoutError):
            await asyncio.sleep(0.005)
            return
        await self.close()
        self.t += 1
        try:
            await self.connect()
        except OSError:
            await asyncio.sleep(0.005)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.reader_task is not None:
            self.reader_task.cancel()
