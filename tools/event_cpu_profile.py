"""Where each node's CPU goes per write, by event: a 3-node kraft cluster on loopback (real
processes, fsync on), one client writing one 256-byte record at a time, and inside every
server the thread CPU time (``time.thread_time_ns``) spent in chosen functions, reported per
node as calls per write, µs per call and µs per write.

    PYTHONPATH=$PWD python tools/event_cpu_profile.py [--seconds 8] [--profile low-latency]
        [--wrap module:Class.method ...]

Why per event: py-spy and cProfile give a flat profile here, and a function costs 3–6× its
hot-loop time inside a running node (three nodes and a client share two cores, so every
event starts with cold caches). Timing the loop's top-level callbacks in place shows which
events cost what; nested entries (the default list has both) show what inside them.
Nested figures include their callees, so rows do not add up; the top-level rows (the loop's
callbacks: ``A`` in the default labels) do, to about the thread's CPU. The timers cost a
few µs per call themselves: compare figures within one run only (bench/bench_peers.py is the
benchmark). The servers load this file through a generated ``sitecustomize`` on their
``PYTHONPATH``; nothing in kraft knows about it.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sys
import threading
import time

#: label -> "module:Class.method". A: the loop's callbacks (they add up); B and below: inside.
DEFAULT_WRAPS = {
    "A server request read": "kraft.server.network:_Connection.data_received",
    "A client answer read": "kraft.client.node_client:_Reading.data_received",
    "A fsync done": "kraft.server.shared_loop_flusher:SharedLoopFlusher._synced",
    "A raft timer": "kraft.server.raft_driver:RaftDriver._on_timer",
    "A turn (next loop pass)": "kraft.server.turn:TurnQueue._run_scheduled",
    "B request decode+handle": "kraft.server.network:_Connection._dispatch",
    "B answers encode+write": "kraft.server.network:_Connection._flush",
    "B raft answer stepped": "kraft.server.raft_driver:RaftDriver._answered",
    "B raft request stepped": "kraft.server.raft_driver:RaftDriver.inbound_request",
    "B raft tick (append)": "kraft.server.raft_driver:RaftDriver._tick",
    "B raft send": "kraft.server.raft_driver:RaftDriver._send",
    "B flush reported": "kraft.server.raft_driver:RaftDriver._on_flushed",
    "B commit applied": "kraft.server.raft_driver:RaftDriver._apply",
    "C core.step": "kraft.raft.core:RaftCore.step",
    "C log.append": "kraft.log.segmented_log:SegmentedLog.append",
    "C log.read": "kraft.log.segmented_log:SegmentedLog.read",
    "C flush cycle start": "kraft.server.shared_loop_flusher:SharedLoopFlusher._start",
    "C flush cycle end": "kraft.server.shared_loop_flusher:SharedLoopFlusher._end",
}

_ENV_WRAPS = "KRAFT_EVENT_CPU_WRAPS"  # label=module:Class.method;...
_ENV_OUT = "KRAFT_EVENT_CPU_OUT"  # a path with {pid}


def wrap(target: str, label: str, acc: dict) -> None:
    """Replace ``module:Class.method`` by a wrapper adding (calls, thread CPU ns) to
    ``acc[label]``."""
    module_name, _, qual = target.partition(":")
    cls_name, _, name = qual.rpartition(".")
    owner = importlib.import_module(module_name)
    for part in cls_name.split(".") if cls_name else ():
        owner = getattr(owner, part)
    raw = owner.__dict__.get(name) if isinstance(owner, type) else None
    fn = getattr(owner, name)
    clock = time.thread_time_ns
    entry = acc.setdefault(label, [0, 0])

    def timed(*args, **kwargs):
        began = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            entry[0] += 1
            entry[1] += clock() - began

    setattr(owner, name, staticmethod(timed) if isinstance(raw, staticmethod) else timed)


def install_from_env() -> None:
    """In a server process: wrap what the environment names and dump the totals twice a
    second (the parent reads them before and after its window)."""
    spec, out = os.environ.get(_ENV_WRAPS), os.environ.get(_ENV_OUT)
    if not spec or not out or "server" not in sys.argv or "start" not in sys.argv:
        return
    acc: dict = {}
    for item in spec.split(";"):
        label, _, target = item.partition("=")
        wrap(target, label, acc)
    path = out.replace("{pid}", str(os.getpid()))

    def dump():
        while True:
            time.sleep(0.5)
            rows = "".join(f"{k}\t{n}\t{ns}\n" for k, (n, ns) in sorted(acc.items()))
            with open(path + ".tmp", "w") as f:
                f.write(rows)
            os.replace(path + ".tmp", path)

    threading.Thread(target=dump, name="event-cpu-dump", daemon=True).start()


def read_totals(path: str) -> dict:
    out = {}
    try:
        with open(path) as f:
            for line in f:
                label, n, ns = line.rstrip("\n").split("\t")
                out[label] = (int(n), int(ns))
    except FileNotFoundError:
        pass
    return out


def report(before: dict, after: dict, writes: int) -> list[str]:
    """Rows for one node: label, calls per write, µs per call, µs per write."""
    lines = []
    for label in sorted(after):
        n = after[label][0] - before.get(label, (0, 0))[0]
        ns = after[label][1] - before.get(label, (0, 0))[1]
        if n:
            lines.append(f"   {label:28s} {n / writes:6.2f}/write {ns / n / 1e3:8.1f} µs/call "
                         f"{ns / writes / 1e3:8.1f} µs/write")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="low-latency", choices=["defaults", "low-latency", "linger-0"])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--wrap", nargs="*", metavar="module:Class.method",
                    help="functions to time instead of the default list")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    wraps = {t: t for t in args.wrap} if args.wrap else DEFAULT_WRAPS
    from tools.server_hooks import load_in_servers, running_cluster
    from tools.write_cpu_profile import write_loop

    site = load_in_servers(__file__, "kraft_event_cpu")
    os.environ[_ENV_WRAPS] = ";".join(f"{k}={v}" for k, v in wraps.items())
    os.environ[_ENV_OUT] = os.path.join(site, "cpu-{pid}.tsv")
    with running_cluster(args.profile) as (cluster, leader, pids):
        asyncio.run(write_loop(cluster.spec(), 1.0))
        time.sleep(0.7)  # a dump after the warm-up
        paths = {i: os.environ[_ENV_OUT].replace("{pid}", str(p)) for i, p in pids.items()}
        before = {i: read_totals(p) for i, p in paths.items()}
        latencies = asyncio.run(write_loop(cluster.spec(), args.seconds))
        time.sleep(0.7)
        after = {i: read_totals(p) for i, p in paths.items()}
    n = len(latencies)
    latencies.sort()
    print(f"{args.profile}: {n} writes in {args.seconds:.0f} s, p50 {latencies[n // 2] * 1e3:.2f} ms "
          f"(one in flight; the timers add their own cost)")
    for i in pids:
        if not after[i]:
            print(f"  node {i}: no figures (did its sitecustomize load?)")
            continue
        print(f"  node {i}{' (leader)' if i == leader else ''}")
        print("\n".join(report(before[i], after[i], n)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
