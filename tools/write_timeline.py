"""Where one write's wall time goes between processes: a 3-node kraft cluster on loopback
(real processes, fsync on), one client writing one 256-byte record at a time, and marks
stamped inside every server (CLOCK_MONOTONIC, shared by all processes) at the points where
the write crosses from one process or thread to the next. Per write the marks are chained
(client send -> leader reads the Produce -> leader starts its fsync -> first follower reads
the Fetch answer -> it starts its fsync -> leader reads a Fetch -> leader writes the Produce
answer -> client has it) and each segment's p50 and p90 printed, with how often the
leader's own fsync rather than a follower's Fetch completed the write, and how busy the
machine's cores were.

    PYTHONPATH=$PWD python tools/write_timeline.py [--seconds 8] [--profile low-latency]

Why: at one write in flight the two cores of the machine this was written on are ~70%
busy (three servers and a client), so a segment is its own Python plus the wait for a core;
taking a thread wake-up off the path only helps where that wait is small. Each mark costs a
wrapper call (~1 µs cold): compare figures within one run only (bench/bench_peers.py is the
benchmark). The servers load this file through a generated ``sitecustomize`` on their
``PYTHONPATH``; nothing in kraft knows about it.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import os
import sys
import threading
import time

_ENV_OUT = "KRAFT_TIMELINE_OUT"  # a path with {pid}
_API = {0: "produce", 1: "fetch"}


def install_from_env() -> None:
    """In a server process: stamp the marks and dump them every half second."""
    out = os.environ.get(_ENV_OUT)
    if not out or "server" not in sys.argv or "start" not in sys.argv:
        return
    import kraft.client.node_client as nc
    import kraft.server.shared_loop_flusher as lf
    import kraft.server.network as net

    now, marks = time.perf_counter_ns, []
    add = marks.append
    answered = [None]  # api key of the last answer encoded by the connection flushing now

    def wrap(owner, name, before=None, after=None):
        fn = getattr(owner, name)

        def marked(*args, **kwargs):
            if before is not None:
                before(*args)
            try:
                return fn(*args, **kwargs)
            finally:
                if after is not None:
                    after(*args)
        setattr(owner, name, marked)

    def read(self, data, *_):
        api = int.from_bytes(bytes(data[4:6]), "big") if len(data) >= 6 else -1
        add((now(), f"{_API.get(api, 'other')} in"))

    def encoded(header, api_key, *_args, **_kw):
        answered[0] = api_key

    def flushed(self):
        if answered[0] is not None:
            add((now(), f"{_API.get(answered[0], 'other')} answer written"))
        answered[0] = None

    wrap(net._Connection, "data_received", read)
    for name in ("encode_response", "encode_response_parts"):
        if hasattr(net, name):
            wrap(net, name, encoded)
    wrap(net._Connection, "_flush", lambda self: answered.__setitem__(0, None), flushed)
    wrap(nc._Reading, "data_received", lambda *a: add((now(), "answer in")))
    wrap(nc.NodeClient, "_send_now", None, lambda *a: add((now(), "request written")))
    wrap(lf.SharedLoopFlusher, "_start", None, lambda *a: add((now(), "fsync submitted")))
    wrap(lf.SharedLoopFlusher, "_synced", lambda *a: add((now(), "fsync done")))
    path = out.replace("{pid}", str(os.getpid()))

    def dump():
        while True:
            time.sleep(0.5)
            with open(path + ".tmp", "w") as f:
                f.writelines(f"{t}\t{label}\n" for t, label in list(marks))
            os.replace(path + ".tmp", path)

    threading.Thread(target=dump, name="timeline-dump", daemon=True).start()


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def chain(writes, events, leader: int) -> tuple[dict, dict]:
    """Segments of each write (lists of ns) and which leader event wrote its answer."""
    ts = [e[0] for e in events]

    def first(after, until, node=None, label=None, leader_only=False):
        j = bisect.bisect_right(ts, after)
        while j < len(events) and events[j][0] <= until:
            t, n, lab = events[j]
            if lab == label and (node is None or n == node) and (not leader_only or n == leader):
                return t, n
            j += 1
        return None

    segs: dict = {}
    by = {"a follower's Fetch": 0, "the leader's own fsync": 0}
    followers = {n for _, n, _ in events if n != leader}
    for a, b in writes:
        p = first(a, b, leader, "produce in")
        fs = p and first(p[0], b, leader, "fsync submitted")
        answers = [x for x in (first(p[0], b, n, "answer in") for n in followers) if x] if p else []
        if not (fs and answers):
            continue
        fa = min(answers)
        ffs = first(fa[0], b, fa[1], "fsync submitted")
        fin = ffs and first(ffs[0], b, leader, "fetch in")
        w0 = fin and first(fin[0], b, leader, "produce answer written")
        if not w0:
            continue
        for name, d in (("client writes -> leader reads the Produce", p[0] - a),
                        ("leader reads it -> leader's fsync starts (append)", fs[0] - p[0]),
                        ("-> first follower reads the Fetch answer", fa[0] - fs[0]),
                        ("-> that follower's fsync starts (append)", ffs[0] - fa[0]),
                        ("-> leader reads a Fetch (fsync, next Fetch)", fin[0] - ffs[0]),
                        ("-> leader writes the Produce answer", w0[0] - fin[0]),
                        ("-> client has the answer", b - w0[0])):
            segs.setdefault(name, []).append(d)
        j = bisect.bisect_left(ts, w0[0]) - 1  # the leader event that wrote the answer
        while j >= 0 and not (events[j][1] == leader and events[j][2] in ("fetch in", "fsync done")):
            j -= 1
        if j >= 0 and events[j][0] >= a:
            by["a follower's Fetch" if events[j][2] == "fetch in" else "the leader's own fsync"] += 1
    return segs, by


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="low-latency", choices=["defaults", "low-latency", "linger-0"])
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tools.server_hooks import load_in_servers, running_cluster
    from tools.write_cpu_profile import write_loop

    os.environ[_ENV_OUT] = os.path.join(load_in_servers(__file__, "kraft_timeline"), "marks-{pid}.tsv")
    with running_cluster(args.profile) as (cluster, leader, pids):
        procs = list(pids.values()) + [os.getpid()]
        before, began, writes = [cpu_seconds(p) for p in procs], time.perf_counter(), []
        asyncio.run(write_loop(cluster.spec(), args.seconds, writes))
        wall = time.perf_counter() - began
        busy = [(cpu_seconds(p) - b) / wall for p, b in zip(procs, before)]
        time.sleep(1.2)  # the last dump
        events = []
        for node, pid in pids.items():
            path = os.environ[_ENV_OUT].replace("{pid}", str(pid))
            with open(path) as f:
                events += [(int(t), node, label) for t, label in (line.rstrip("\n").split("\t") for line in f)]
    events.sort()
    lat = sorted(b - a for a, b in writes)
    segs, by = chain(writes, events, leader)
    print(f"{args.profile}: {len(writes)} writes in {args.seconds:.0f} s, p50 {lat[len(lat) // 2] / 1e3:.0f} µs "
          f"(one in flight, with the marks); cores busy: servers {sum(busy[:-1]):.2f}, client (this process) "
          f"{busy[-1]:.2f}, of {os.cpu_count()}")
    chained = sum(by.values())
    print(f"  {len(next(iter(segs.values()), []))} writes chained; segment p50 / p90, µs:")
    for name, v in segs.items():
        v.sort()
        print(f"   {name:52s} {v[len(v) // 2] / 1e3:6.0f} {v[len(v) * 9 // 10] / 1e3:6.0f}")
    if chained:
        print("  the leader event that wrote the Produce answer: " +
              ", ".join(f"{k} {n / chained:.0%}" for k, n in by.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
