"""Quorum benchmarks: a 3-node kraft quorum of real processes on loopback (fsync on) beside a
3-node PySyncObj cluster (journal file on disk) as the Python anchor, in one run.

PySyncObj's journal is fdatasynced (bench/pysyncobj_node.py adds it; PySyncObj itself never
syncs). The whole-field comparison with ZooKeeper and etcd is bench/bench_peers.py.

Measures (256-byte records/commands):
  * committed writes/s: PySyncObj (window of in-flight commands) vs kraft, with one record
    per Produce request and with 100 records per request (a Kafka producer's batching);
  * commit latency p50/p99 at a fixed 10,000 records/s (10 records every 1 ms, and 100 every
    10 ms; the low-latency profile's 1 ms linger), measured by the client from send to commit
    ack, beside a bare ApiVersions round trip at the same pacing (the machine's floor);
  * failover: SIGKILL of the leader to the first commit of a write sent after it, with
    Kafka's default timeouts and with the low-latency profile (median and max of N kills).

    python bench/bench_quorum.py [--seconds 8] [--kills 3]

Prints a Markdown table. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.peers.kraft import LOW_LATENCY, LocalCluster, NodeClient, QuorumClient, QuorumWriter, free_ports  # noqa: E402
from kraft.errors import NetworkError, NotLeaderError  # noqa: E402
from kraft.records import build_batch  # noqa: E402

VALUE = b"v" * 256


# --- PySyncObj ------------------------------------------------------------------------------


def pysyncobj_throughput(seconds: float, window: int = 2000) -> float:
    d = tempfile.mkdtemp(prefix="pysyncobj-")
    ports = free_ports(3)
    addrs = [f"127.0.0.1:{p}" for p in ports]
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pysyncobj_node.py")
    procs = []
    try:
        for i, a in enumerate(addrs):
            partners = ",".join(x for x in addrs if x != a)
            cmd = [sys.executable, script, "--self", a, "--partners", partners,
                   "--journal", os.path.join(d, f"journal-{i}.bin"), "--lifetime", str(seconds + 30)]
            if i == 0:
                cmd += ["--load", str(seconds), "--window", str(window)]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        out, _ = procs[0].communicate(timeout=seconds + 60)
        result = json.loads(out.strip().splitlines()[-1])
        return result["committed"] / result["seconds"]
    finally:
        for p in procs:
            p.kill()
            p.wait()


# --- kraft ----------------------------------------------------------------------------------


async def _leader(client: QuorumClient):
    d = await client.describe(30)
    return client.nodes[d.leader_id]


async def kraft_throughput(cluster: LocalCluster, seconds: float, per_request: int, concurrency: int) -> float:
    client = QuorumClient([cluster.address(i) for i in cluster.ids])
    leader = await _leader(client)
    batch = build_batch([VALUE] * per_request)
    committed = 0
    end = time.monotonic() + seconds

    async def worker():
        nonlocal committed
        while time.monotonic() < end:
            await client.produce(leader, batch)
            committed += per_request

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.monotonic() - start
    await client.close()
    return committed / elapsed


async def kraft_latency(cluster: LocalCluster, seconds: float, rate: int, per_request: int):
    client = QuorumClient([cluster.address(i) for i in cluster.ids])
    leader = await _leader(client)
    batch = build_batch([VALUE] * per_request)
    lat: list[float] = []

    async def one():
        t = time.perf_counter()
        await client.produce(leader, batch)
        lat.append(time.perf_counter() - t)

    for _ in range(200):  # warm-up
        await one()
    lat.clear()
    interval = per_request / rate
    n = int(seconds / interval)
    tasks = []
    start = time.perf_counter()
    for i in range(n):
        tasks.append(asyncio.ensure_future(one()))
        delay = start + (i + 1) * interval - time.perf_counter()
        await asyncio.sleep(max(0.0, delay))
    await asyncio.gather(*tasks)
    achieved = n * per_request / (time.perf_counter() - start)
    await client.close()
    lat.sort()
    return achieved, lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000


async def bare_round_trip(cluster: LocalCluster, seconds: float, rate: int):
    """ApiVersions round trips at ``rate``/s to one node: the floor any commit latency sits
    on here (two processes, one loopback hop each way, no disk)."""
    from kraft.protocol import ApiVersionsRequest

    client = NodeClient(*cluster.address(cluster.ids[0]))
    for _ in range(200):  # the process may still be starting
        try:
            await client.request(ApiVersionsRequest(), 3)
            break
        except NetworkError:
            await asyncio.sleep(0.05)
    lat: list[float] = []
    n = int(seconds * rate)
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        await client.request(ApiVersionsRequest(), 3)
        lat.append(time.perf_counter() - t)
        await asyncio.sleep(max(0.0, start + (i + 1) / rate - time.perf_counter()))
    await client.close()
    lat.sort()
    return lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000


async def kraft_failover(cluster: LocalCluster) -> float:
    """Seconds from SIGKILL of the leader to the commit of the first write sent after it."""
    client = QuorumClient([cluster.address(i) for i in cluster.ids])
    writer = QuorumWriter(client)
    await client.describe(30)
    await writer.write(build_batch([VALUE]))
    # Kill the node that just committed our write: it is the leader (a describe could be stale).
    leader_id = next(i for i, addr in client.nodes.items() if addr == writer.leader)
    killed = time.monotonic()
    cluster.kill(leader_id)
    writer.leader = None
    while True:
        try:
            await writer.write(build_batch([VALUE]), deadline_s=30)
            break
        except (NetworkError, NotLeaderError):
            writer.leader = None
            await asyncio.sleep(0.005)
    took = time.monotonic() - killed
    cluster.start(leader_id)
    await client.close()
    return took


def with_cluster(overrides, fn):
    d = tempfile.mkdtemp(prefix="kraft-bench-")
    with LocalCluster(d, 3, overrides=overrides, log_level="WARNING").create() as cluster:
        cluster.start()
        return fn(cluster)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--kills", type=int, default=3)
    args = ap.parse_args()
    s = args.seconds
    rows = []

    anchor = pysyncobj_throughput(s)
    print(f"pysyncobj: {anchor:,.0f} commands/s", file=sys.stderr)
    t1 = with_cluster({}, lambda c: asyncio.run(kraft_throughput(c, s, 1, 1000)))
    print(f"kraft 1/request: {t1:,.0f} records/s", file=sys.stderr)
    t100 = with_cluster({}, lambda c: asyncio.run(kraft_throughput(c, s, 100, 32)))
    print(f"kraft 100/request: {t100:,.0f} records/s", file=sys.stderr)
    anchor2 = pysyncobj_throughput(s)  # again, so load drift shows
    print(f"pysyncobj (again): {anchor2:,.0f} commands/s", file=sys.stderr)
    pys = (anchor + anchor2) / 2
    rows.append(("PySyncObj 3 nodes, journal on disk (anchor)", f"{pys:,.0f} writes/s", "1.00×"))
    rows.append(("kraft, 1 record per Produce, 1,000 in flight", f"{t1:,.0f} records/s", f"{t1 / pys:.2f}×"))
    rows.append(("kraft, 100 records per Produce, 32 in flight", f"{t100:,.0f} records/s", f"{t100 / pys:.2f}×"))

    b50, b99 = with_cluster({}, lambda c: asyncio.run(bare_round_trip(c, s, 1000)))
    rows.append(("floor: bare ApiVersions round trip to one node, 1,000/s (no Raft, no disk)",
                 f"p50 {b50:.2f} ms, p99 {b99:.2f} ms", "latency anchor"))
    print(f"bare round trip p50 {b50:.2f} p99 {b99:.2f}", file=sys.stderr)
    for per in (10, 100):
        achieved, p50, p99 = with_cluster(LOW_LATENCY, lambda c: asyncio.run(kraft_latency(c, s, 10_000, per)))
        rows.append((f"kraft commit latency at {achieved:,.0f} records/s ({per}/request, linger 1 ms)",
                     f"p50 {p50:.2f} ms, p99 {p99:.2f} ms", f"p99 {p99 / b99:.1f}× floor; target p99 ≤ 5 ms"))
        print(f"latency {per}/req: {achieved:,.0f} rec/s p50 {p50:.2f} p99 {p99:.2f}", file=sys.stderr)

    for name, overrides in (("defaults", {}), ("low-latency profile", LOW_LATENCY)):
        def kills(c):
            out = []
            for _ in range(args.kills):
                out.append(asyncio.run(kraft_failover(c)))
                time.sleep(1.0)
            return out
        times = with_cluster(overrides, kills)
        print(f"failover {name}: {times}", file=sys.stderr)
        rows.append((f"failover, SIGKILL → first new commit ({name}, {args.kills} kills)",
                     f"median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms",
                     "target ≤ 3 s" if name == "defaults" else "target ≤ 600 ms"))

    print("| measurement | result | vs anchor / target |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
