"""etcd 3.4 (Debian package ``etcd-server``) as 3 members on loopback, and its benchmark
writer. Writes go over etcd's native gRPC API (``etcdserverpb.KV/Put`` and ``KV/Txn``) with
the protobuf bytes built here by hand (a handful of fields; python-etcd3 does not import with
protobuf >= 4 and we want no generated stubs); leader lookup uses the HTTP/JSON gateway's
``/v3/maintenance/status``. etcd fsyncs its WAL before acking (always on).
Must not measure anything (bench_peers does)."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.request

from bench.peers.procs import ServerProcesses, free_ports, spawn, temp_dir, wait_until

KEYS_PER_WRITER = 128


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def put_request(key: bytes, value: bytes) -> bytes:
    return _field(1, key) + _field(2, value)  # PutRequest{key=1, value=2}


def txn_request(puts: list[tuple[bytes, bytes]]) -> bytes:
    # TxnRequest{success=2: repeated RequestOp{request_put=2: PutRequest}}, no compare: always succeeds.
    return b"".join(_field(2, _field(2, put_request(k, v))) for k, v in puts)


class EtcdCluster(ServerProcesses):
    name = "etcd 3.4"

    def __init__(self, size: int = 3):
        self.ids = list(range(1, size + 1))
        self.dir = temp_dir("etcd")
        ports = free_ports(2 * size)
        self.client_ports = dict(zip(self.ids, ports[:size]))
        self.peer_ports = dict(zip(self.ids, ports[size:]))
        self.procs = {}
        self.member_ids: dict[int, int] = {}
        self.started_once: set[int] = set()

    def start(self, node_id: int | None = None) -> None:
        initial = ",".join(f"n{j}=http://127.0.0.1:{self.peer_ports[j]}" for j in self.ids)
        for i in ([node_id] if node_id else self.ids):
            cu, pu = f"http://127.0.0.1:{self.client_ports[i]}", f"http://127.0.0.1:{self.peer_ports[i]}"
            cmd = ["etcd", "--name", f"n{i}", "--data-dir", os.path.join(self.dir, f"n{i}"),
                   "--listen-client-urls", cu, "--advertise-client-urls", cu,
                   "--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
                   "--initial-cluster", initial, "--initial-cluster-token", "bench",
                   "--initial-cluster-state", "existing" if i in self.started_once else "new",
                   # Keep the keyspace history from growing without bound during a long run.
                   "--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1m",
                   "--quota-backend-bytes", str(8 << 30), "--log-level", "error"]
            self.procs[i] = spawn(cmd, os.path.join(self.dir, f"n{i}.log"),
                                  env=dict(os.environ, ETCD_UNSUPPORTED_ARCH=""))
            self.started_once.add(i)

    def status(self, i: int) -> dict:
        req = urllib.request.Request(f"http://127.0.0.1:{self.client_ports[i]}/v3/maintenance/status",
                                     data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=1.0) as r:
            return json.loads(r.read())

    def leader(self) -> int | None:
        for i in self.running():
            try:
                st = self.status(i)
            except OSError:
                continue
            self.member_ids[i] = int(st["header"]["member_id"])
            lead = int(st.get("leader", 0))
            if lead and lead == self.member_ids[i]:
                return i
        return None

    def wait_ready(self, timeout: float = 60.0) -> int:
        def ready():
            lead = self.leader()
            if lead is None:
                return None
            return lead if all(self.status(i).get("leader") for i in self.running()) else None
        return wait_until(ready, timeout, 0.1, "etcd cluster with a leader")

    def spec(self, ids: list[int] | None = None) -> dict:
        """Writers talk to the leader (no forwarding hop), or to every member."""
        ids = ids or [self.leader()]
        return {"kind": "etcd", "targets": [f"127.0.0.1:{self.client_ports[i]}" for i in ids]}


class Writer:
    """grpc.aio channel(s), raw bytes in and out; many calls in flight on one HTTP/2 channel."""

    def __init__(self, spec: dict, worker: int, value: bytes):
        self.targets = spec["targets"]
        self.t = 0
        self.keys = [f"w{worker}-{k}".encode() for k in range(KEYS_PER_WRITER)]
        self.value = value
        self.n = 0

    def _open(self) -> None:
        import grpc

        self.channel = grpc.aio.insecure_channel(self.targets[self.t % len(self.targets)])
        ident = lambda b: b  # noqa: E731 - bytes pass through untouched
        self.put = self.channel.unary_unary("/etcdserverpb.KV/Put", request_serializer=ident, response_deserializer=ident)
        self.txn = self.channel.unary_unary("/etcdserverpb.KV/Txn", request_serializer=ident, response_deserializer=ident)

    async def connect(self) -> None:
        self._open()
        await self.channel.channel_ready()

    async def write(self, count: int) -> None:
        self.n += 1
        if count == 1:
            await self.put(put_request(self.keys[self.n % KEYS_PER_WRITER], self.value), timeout=30)
        else:
            await self.txn(txn_request([(self.keys[j % KEYS_PER_WRITER], self.value) for j in range(count)]), timeout=30)

    async def recover(self, exc: BaseException | None = None) -> None:
        """After a failure: move to the next member if this one is unreachable; a live member
        without a leader yet is simply asked again."""
        import grpc

        if not (isinstance(exc, grpc.aio.AioRpcError) and exc.code() == grpc.StatusCode.UNAVAILABLE):
            await asyncio.sleep(0.005)
            return
        await self.channel.close()
        self.t += 1
        self._open()

    async def close(self) -> None:
        await self.channel.close()
