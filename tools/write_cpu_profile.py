"""Where one write in flight spends its CPU: a 3-node kraft cluster on loopback (real
processes, fsync on), one client writing one 256-byte record at a time for ``--seconds``, and
per node and per thread the user and system CPU per write (from /proc), context switches per
write, and the client's p50/p99.

    PYTHONPATH=$PWD python tools/write_cpu_profile.py [--profile low-latency] [--seconds 8]
        [--perf record|trace] [--py-spy] [--node N] [--split]

``--perf record`` samples the leader (or ``--node``) with ``perf record -g`` into
``write_cpu.perf.data``; ``--perf trace`` writes a syscall summary (``perf trace -s``) to
``write_cpu.trace.txt``; ``--py-spy`` writes py-spy raw stacks to ``write_cpu.pyspy.txt``.
``--split`` samples every node with ``perf record`` and splits each node's CPU per write by the
code it ran (``tools/cpu_split.py``): kernel, Python interpreter, kraft's compiled hot path,
event loop, CPython C modules, other libraries.
A profiler, not a benchmark: the figures are for finding costs, compare them only within one
run (bench/bench_peers.py is the benchmark).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.peers.kraft import Writer  # noqa: E402
from tools.cpu_split import CLASSES, split  # noqa: E402
from tools.server_hooks import running_cluster  # noqa: E402


def thread_cpu(pid: int) -> dict:
    """tid -> (name, user ticks, system ticks, voluntary switches, involuntary switches,
    minor page faults)."""
    out = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            stat = open(task + "/stat").read()
            name = open(task + "/comm").read().strip()
            status = open(task + "/status").read().splitlines()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        switches = {line.split(":")[0]: int(line.split()[1]) for line in status if "ctxt_switches" in line}
        out[task.rsplit("/", 1)[1]] = (name, int(fields[11]), int(fields[12]),
                                       switches.get("voluntary_ctxt_switches", 0),
                                       switches.get("nonvoluntary_ctxt_switches", 0), int(fields[7]))
    return out


def profiler(args, pid: int):
    if args.perf == "record":
        cmd = ["perf", "record", "-F", "2000", "-g", "-p", str(pid), "-o", "write_cpu.perf.data"]
    elif args.perf == "trace":
        cmd = ["perf", "trace", "-s", "-p", str(pid), "-o", "write_cpu.trace.txt"]
    elif args.py_spy:
        # --nonblocking: py-spy otherwise stops the process for every sample, which more than
        # tripled the leader's voluntary context switches per write (22.8 against 6.4) and
        # changed the very timing being profiled.
        cmd = ["py-spy", "record", "--pid", str(pid), "--rate", "500", "--format", "raw", "--threads", "--gil", "--nonblocking",
               "-o", "write_cpu.pyspy.txt", "--duration", str(int(args.seconds))]
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        return None
    return subprocess.Popen(cmd + ["--", "sleep", str(int(args.seconds))], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


async def write_loop(spec: dict, seconds: float, stamps: list | None = None) -> list[float]:
    """Latencies (s) of one write at a time for ``seconds``; ``stamps`` gets each write's
    (start, end) in ``perf_counter_ns`` (CLOCK_MONOTONIC: comparable across processes)."""
    writer = Writer(spec, 0, b"x" * 256)
    await writer.connect()
    try:
        for _ in range(300):  # warm up: connections, caches, the JIT-less interpreter's dicts
            await writer.write(1)
        latencies, end = [], time.perf_counter() + seconds
        while time.perf_counter() < end:
            t = time.perf_counter_ns()
            await writer.write(1)
            t1 = time.perf_counter_ns()
            latencies.append((t1 - t) / 1e9)
            if stamps is not None:
                stamps.append((t, t1))
        return latencies
    finally:
        await writer.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="low-latency", choices=["defaults", "low-latency", "linger-0"])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--perf", choices=["record", "trace"])
    ap.add_argument("--py-spy", action="store_true")
    ap.add_argument("--node", type=int, help="the node to sample (default: the leader)")
    ap.add_argument("--split", action="store_true", help="CPU per write by the code it ran, every node (perf)")
    args = ap.parse_args()
    if args.split and (args.perf or args.py_spy):
        ap.error("--split samples every node with perf itself: not with --perf or --py-spy")
    if args.split and subprocess.run(["perf", "--version"], capture_output=True).returncode != 0:
        ap.error("--split needs perf (apt-get install linux-perf)")

    with running_cluster(args.profile) as (cluster, leader, pids):
        spec = cluster.spec()
        asyncio.run(write_loop(spec, 0.5))  # first connections and elections settle
        before = {i: thread_cpu(p) for i, p in pids.items()}
        sampler = profiler(args, pids[args.node or leader])
        splitters = {i: subprocess.Popen(["perf", "record", "-F", "2000", "-p", str(p), "-o", f"write_cpu.split-{i}.data",
                                          "--", "sleep", str(int(args.seconds))],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for i, p in pids.items()} if args.split else {}
        latencies = asyncio.run(write_loop(spec, args.seconds))
        if sampler is not None:
            sampler.wait()
        for p in splitters.values():
            p.wait()
        after = {i: thread_cpu(p) for i, p in pids.items()}
    n = len(latencies)
    latencies.sort()
    tick = os.sysconf("SC_CLK_TCK")
    print(f"{args.profile}: {n} writes in {args.seconds:.0f} s, p50 {latencies[n // 2] * 1e3:.2f} ms, "
          f"p99 {latencies[int(n * 0.99)] * 1e3:.2f} ms (one in flight)")
    for i in pids:
        user = system = vol = invol = faults = 0.0
        threads = []
        for tid, (name, u, s, v, iv, f) in after[i].items():
            bu, bs, bv, biv, bf = before[i].get(tid, (name, 0, 0, 0, 0, 0))[1:]
            du, ds = (u - bu) / tick, (s - bs) / tick
            user, system, vol, invol = user + du, system + ds, vol + v - bv, invol + iv - biv
            faults += f - bf
            if du + ds > 0.01:
                threads.append(f"{name}[{tid}] {du * 1e6 / n:.0f}u+{ds * 1e6 / n:.0f}s")
        print(f"  node {i}{' (leader)' if i == leader else ''}: {user * 1e6 / n:.0f} µs user + "
              f"{system * 1e6 / n:.0f} µs system per write, {vol / n:.1f} voluntary + {invol / n:.1f} "
              f"involuntary switches, {faults / n:.2f} minor page faults per write; threads: {', '.join(threads)}")
        if i in splitters:
            # The samples' shares of the node's measured CPU (perf samples at 2 kHz, /proc in ticks).
            got = split(f"write_cpu.split-{i}.data")
            per_write = (user + system) * 1e6 / n
            print("    by code: " + ", ".join(f"{k} {got[k] * per_write:.0f} µs ({got[k] * 100:.0f}%)"
                                             for k in CLASSES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
