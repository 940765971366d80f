"""Decompression bombs against a live 3-node quorum: does the leader keep serving?

Six client connections each send gzip "bombs" (a valid RecordBatch whose records inflate to
``--inflate-mib`` MiB of zeros, ~1,000x the wire size) to the leader back to back, while a
probe sends ApiVersions to the leader every 10 ms. Reports the probe's latency before and
during the bombs (the anchor is the same probe with no bombs, in the same run), the
answers the bombs got, and whether the leader kept its epoch.

    python bench/bench_hostile_produce.py [--seconds 10] [--bombs 6] [--inflate-mib 200]

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kraft.errors import ErrorCode, KraftError, NetworkError  # noqa: E402
from kraft.protocol import ApiVersionsRequest  # noqa: E402
from kraft.client.quorum import QuorumClient  # noqa: E402
from kraft.client.node_client import NodeClient  # noqa: E402
from kraft.cli.local_cluster import LocalCluster  # noqa: E402
from kraft.testing.hostile import gzip_bomb_batch  # noqa: E402


async def probe(addr, seconds: float) -> list[float]:
    client = NodeClient(*addr, request_timeout_ms=30000)
    lat = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        await client.request(ApiVersionsRequest(), 3)
        lat.append(time.perf_counter() - t)
        await asyncio.sleep(0.01)
    await client.close()
    return lat


async def bomber(client: QuorumClient, addr, bomb: bytes, seconds: float, answers: collections.Counter):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            await client.produce(addr, bomb, timeout_ms=30000)
            answers["accepted"] += 1
        except NetworkError as exc:
            answers[f"network: {exc}"] += 1
        except KraftError as exc:
            answers[ErrorCode(exc.code).name] += 1


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000


async def run(cluster: LocalCluster, seconds: float, bombs: int, bomb: bytes):
    admin = QuorumClient([cluster.address(i) for i in cluster.ids])
    before = await admin.describe(30)
    leader = admin.nodes[before.leader_id]
    quiet = await probe(leader, min(seconds, 3))
    answers = collections.Counter()
    clients = [QuorumClient([leader]) for _ in range(bombs)]
    t0 = time.perf_counter()
    noisy, *_ = await asyncio.gather(probe(leader, seconds),
                                     *(bomber(c, leader, bomb, seconds, answers) for c in clients))
    elapsed = time.perf_counter() - t0
    after = await admin.describe(30)
    for c in clients:
        await c.close()
    await admin.close()
    return quiet, noisy, answers, elapsed, (before.leader_id, before.leader_epoch), (after.leader_id, after.leader_epoch)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--bombs", type=int, default=6)
    ap.add_argument("--inflate-mib", type=int, default=200)
    a = ap.parse_args()
    bomb = gzip_bomb_batch(a.inflate_mib << 20)
    with tempfile.TemporaryDirectory(prefix="kraft-bombs-") as d:
        with LocalCluster(d, log_level="WARNING") as cluster:
            cluster.create()
            cluster.start()
            quiet, noisy, answers, elapsed, before, after = asyncio.run(run(cluster, a.seconds, a.bombs, bomb))
    sent = sum(answers.values())
    print(f"{a.bombs} connections sending {len(bomb) / 1e3:.0f} KB gzip bombs inflating to {a.inflate_mib} MiB, "
          f"{a.seconds:.0f} s: {sent} bombs answered ({sent / elapsed:.0f}/s): {dict(answers)}")
    print("| ApiVersions to the leader every 10 ms | p50 | p99 | max |")
    print("|---|---:|---:|---:|")
    print(f"| quiet (anchor) | {pct(quiet, .5):.2f} ms | {pct(quiet, .99):.2f} ms | {max(quiet) * 1000:.2f} ms |")
    print(f"| during bombs | {pct(noisy, .5):.2f} ms | {pct(noisy, .99):.2f} ms | {max(noisy) * 1000:.2f} ms |")
    print(f"leader (id, epoch) before {before}, after {after}: "
          f"{'kept' if before == after else 'CHANGED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
