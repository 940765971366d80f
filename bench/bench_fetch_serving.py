"""Fetch serving from the page cache: how many bytes of records one core of a broker sends, with
answers' records sent from the segment files by ``sendfile`` (the default) against the copying
path (``KRAFT_ZERO_COPY=0``: every answer read with ``pread`` and written from memory), in the
same run, rounds interleaved.

    PYTHONPATH=$PWD python bench/bench_fetch_serving.py [--mb 256] [--seconds 6] [--rounds 2]

One broker (``python -m kraft.server.broker_node``, one partition) takes ``--mb`` MB of
incompressible 1 KB records (uncompressed batches of 1 MB, acks=1); ``--readers`` raw Fetch v12
loops (our NodeClient, 8 MB per partition, 32 MB per answer, records counted by batch
header, not decoded) read the partition from the beginning, again and again, for
``--seconds``. The figure is bytes of records served per second of the broker's CPU (user +
system of its process, from /proc): GB/s per core. The client's own decoding is not the
broker's cost; the wall-clock rate is printed too. Anchor line: a plain ``pread`` loop over the
segment file in 1 MB reads (page cache to Python, one core). Not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from bench_peers import write_results  # noqa: E402

from kraft.client.node_client import NodeClient  # noqa: E402
from kraft.protocol import FetchRequest as F, ProduceRequest as P  # noqa: E402
from kraft.records import build_batch  # noqa: E402

TOPIC = "serve"


def cpu_seconds(pid: int, system_only: bool = False) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[12]) + (0 if system_only else int(fields[11]))) / os.sysconf("SC_CLK_TCK")


def start_broker(workdir: str, zero_copy: bool):
    port_file = os.path.join(workdir, "port")
    env = dict(os.environ, PYTHONPATH=ROOT, KRAFT_ZERO_COPY="1" if zero_copy else "0")
    proc = subprocess.Popen([sys.executable, "-m", "kraft.server.broker_node", "--log-dir", os.path.join(workdir, "logs"),
                             "--topic", f"{TOPIC}:1", "--port-file", port_file], env=env, cwd=workdir,
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "broker.log"), "w"))
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file) or not open(port_file).read().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"broker did not start: see {workdir}/broker.log")
        time.sleep(0.05)
    with open(port_file) as f:
        return proc, int(f.read())


async def fill(port: int, mb: int) -> None:
    client = NodeClient("127.0.0.1", port, request_timeout_ms=60000)
    try:
        for _ in range(mb):
            batch = build_batch([os.urandom(1024) for _ in range(1000)])
            resp = await client.request(P(transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
                P.Topic(name=TOPIC, partition_data=[P.Topic.Partition(index=0, records=batch)])]), 9)
            code = resp.responses[0].partition_responses[0].error_code
            if code:
                raise SystemExit(f"produce failed: error {code}")
    finally:
        await client.close()


async def read_loop(port: int, seconds: float) -> int:
    """Fetch the partition from 0 to its end, again and again; bytes of records received."""
    client = NodeClient("127.0.0.1", port, request_timeout_ms=60000)
    nbytes, offset, end = 0, 0, time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=32 << 20, isolation_level=0, session_id=0,
                    session_epoch=-1, forgotten_topics_data=[], topics=[F.Topic(topic=TOPIC, partitions=[
                        F.Topic.Partition(partition=0, fetch_offset=offset, partition_max_bytes=8 << 20)])])
            part = (await client.request(req, 12)).responses[0].partitions[0]
            data = part.records or b""
            if not data:
                offset = 0
                continue
            pos, n, last = 0, len(data), offset - 1
            while pos + 61 <= n:
                base, length = struct.unpack_from(">qi", data, pos)
                if pos + 12 + length > n:
                    break
                last = base + struct.unpack_from(">i", data, pos + 23)[0]
                pos += 12 + length
            nbytes += n
            offset = last + 1 if last + 1 < part.high_watermark else 0
    finally:
        await client.close()
    return nbytes


def serve_round(workdir: str, zero_copy: bool, mb: int, seconds: float, readers: int) -> dict:
    d = tempfile.mkdtemp(prefix="zc-" if zero_copy else "copy-", dir=workdir)
    proc, port = start_broker(d, zero_copy)
    try:
        asyncio.run(fill(port, mb))

        async def all_readers():
            return sum(await asyncio.gather(*(read_loop(port, seconds) for _ in range(readers))))
        asyncio.run(read_loop(port, 1.0))  # warm: the page cache, the broker's maps and indexes
        cpu0, sys0, t0 = cpu_seconds(proc.pid), cpu_seconds(proc.pid, True), time.perf_counter()
        served = asyncio.run(all_readers())
        cpu, wall = cpu_seconds(proc.pid) - cpu0, time.perf_counter() - t0
        system = cpu_seconds(proc.pid, True) - sys0
    finally:
        proc.terminate()
        proc.wait(30)
    return {"zero_copy": zero_copy, "bytes": served, "broker_cpu_s": cpu, "broker_system_cpu_s": system, "wall_s": wall,
            "gb_per_s_per_core": served / cpu / 1e9 if cpu else None, "gb_per_s_wall": served / wall / 1e9,
            "ms_cpu_per_mb": cpu / (served / 1e6) * 1e3 if served else None, "segment_dir": d}


def anchor(workdir: str) -> float:
    """A pread loop over the biggest segment file left by the rounds, 1 MB at a time: GB/s."""
    segs = []
    for base, _, names in os.walk(workdir):
        segs += [os.path.join(base, n) for n in names if n.endswith(".log")]
    path = max(segs, key=os.path.getsize)
    fd = os.open(path, os.O_RDONLY)
    size, total, t0 = os.path.getsize(path), 0, time.perf_counter()
    try:
        while time.perf_counter() - t0 < 2.0:
            pos = 0
            while pos < size:
                total += len(os.pread(fd, 1 << 20, pos))
                pos += 1 << 20
    finally:
        os.close(fd)
    return total / (time.perf_counter() - t0) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=256, help="MB of records in the partition")
    ap.add_argument("--seconds", type=float, default=6.0, help="length of each reading round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of each path, interleaved")
    ap.add_argument("--readers", type=int, default=2, help="concurrent fetch loops")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-serve-")
    rounds = []
    for i in range(args.rounds):
        for zc in (True, False):
            r = serve_round(workdir, zc, args.mb, args.seconds, args.readers)
            rounds.append(r)
            print(f"round {i + 1} {'sendfile' if zc else 'pread (copy)'}: {r['bytes'] / 1e9:.2f} GB served in "
                  f"{r['wall_s']:.1f} s ({r['gb_per_s_wall']:.2f} GB/s wall), broker CPU {r['broker_cpu_s']:.2f} s "
                  f"({r['broker_system_cpu_s']:.2f} s in the kernel): "
                  f"{r['gb_per_s_per_core']:.2f} GB/s per core ({r['ms_cpu_per_mb']:.3f} ms per MB)", flush=True)
    raw = anchor(workdir)
    zc = [r["gb_per_s_per_core"] for r in rounds if r["zero_copy"]]
    cp = [r["gb_per_s_per_core"] for r in rounds if not r["zero_copy"]]
    print(f"anchor: pread of the segment file, 1 MB reads: {raw:.2f} GB/s (one core)")
    print(f"per core: sendfile {min(zc):.2f}-{max(zc):.2f} GB/s vs copy {min(cp):.2f}-{max(cp):.2f} GB/s "
          f"({min(zc) / max(cp):.2f}-{max(zc) / min(cp):.2f}x); target >= 3 GB/s per core (issue 36)")
    print("wrote", write_results("fetch_serving", {"args": vars(args), "machine_cpus": os.cpu_count(),
                                                   "rounds": rounds, "anchor_pread_gb_s": raw}))


if __name__ == "__main__":
    main()
