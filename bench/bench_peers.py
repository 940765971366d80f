"""kraft beside ZooKeeper 3.8, etcd 3.4 and PySyncObj, in one run: 3 nodes each on loopback,
every system durable (fsync before ack), 256-byte values, measurements interleaved
(kraft, kraft low-latency, ZooKeeper, etcd, PySyncObj, then again), all driven by the same
multi-process load generator (bench/peers/load.py). Not a test: nothing here asserts a time.

Workloads (--only picks a subset; the floors always run):
  a  one write in flight: p50/p99/p999 latency
  b  one write per request, 256 and 2,000 in flight: writes/s
  c  client batching, 100 writes per request (kraft: one Produce; ZooKeeper: multi; etcd: txn;
     PySyncObj: one replicated command carrying 100 values), 32 requests in flight: writes/s
  d  commit latency at an offered 10,000 writes/s, open loop: p50/p99 (at most 2,000 waiting:
     a write due beyond that is skipped and counted); also at 2,000 writes/s (d'), which every
     system here sustains
  e  failover: SIGKILL of the leader -> first commit of a write sent after it (median, max)
Floors in the same run: fdatasync of 256 bytes on the disk the data dirs are on, and a
loopback TCP echo round trip between two processes. Client and server CPU per write come
from the client processes' process_time and the servers' /proc/PID/stat.

    python bench/bench_peers.py [--seconds 5] [--rounds 2] [--only a,b,c,d,e] [--quick]

Prints a Markdown table (each figure, and kraft / peer) and writes the raw numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import queue
import socket
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.peers import procs  # noqa: E402
from bench.peers.load import failover_once, run_clients  # noqa: E402

SYSTEMS = ("kraft", "kraft-ll", "zookeeper", "etcd", "pysyncobj")  # also available: kraft-l0
PEERS = ("zookeeper", "etcd", "pysyncobj")


def make_cluster(key: str):
    if key.startswith("kraft"):
        from bench.peers.kraft import KraftCluster
        return KraftCluster({"kraft": "defaults", "kraft-ll": "low-latency", "kraft-l0": "linger-0"}[key])
    if key == "zookeeper":
        from bench.peers.zookeeper import ZooKeeperCluster
        return ZooKeeperCluster()
    if key == "etcd":
        from bench.peers.etcd import EtcdCluster
        return EtcdCluster()
    from bench.peers.pysyncobj import PySyncObjCluster
    return PySyncObjCluster()


def pct(sorted_values: list[float], p: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


def write_results(name: str, result: dict) -> str:
    """``result`` with the interpreter that ran, as ``bench/results/<name>-<UTC time>.json``;
    returns the path."""
    import datetime
    directory = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}-{datetime.datetime.now(datetime.timezone.utc):%Y%m%dT%H%M%S}.json")
    with open(path, "w") as f:
        json.dump({"interpreter": interpreter(), **result}, f, indent=1)
    return path


def interpreter() -> dict:
    """The interpreter that runs kraft's servers, PySyncObj's and every client process (they
    start with this one), recorded because it is part of what is measured: builds differ
    (a default pyenv build has a shared libpython and no PGO; Debian's python3 links
    libpython into the executable)."""
    shared = None
    try:
        with open("/proc/self/maps") as f:
            shared = any("libpython" in line for line in f)
    except OSError:
        pass
    link = {True: "shared libpython", False: "libpython linked in", None: "libpython linkage unknown"}[shared]
    version = platform.python_version()
    return {"executable": sys.executable, "version": version, "libpython_shared": shared,
            "describe": f"{platform.python_implementation()} {version} ({sys.executable}, {link})"}


# --- floors ---------------------------------------------------------------------------------

def fdatasync_floor(directory: str, seconds: float) -> list[float]:
    """Append 256 bytes and fdatasync, over and over: what one durable ack costs here."""
    path = os.path.join(directory, "fsync-floor.bin")
    lat = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            os.write(fd, b"v" * 256)
            t = time.perf_counter()
            os.fdatasync(fd)
            lat.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.unlink(path)
    return sorted(lat)


def _echo_server(sock):
    while True:
        conn, _ = sock.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = conn.recv(65536)
            if not data:
                break
            conn.sendall(data)
        conn.close()


def echo_floor(seconds: float) -> list[float]:
    """256 bytes to an echo server in another process and back, one at a time."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    p = multiprocessing.get_context("fork").Process(target=_echo_server, args=(srv,), daemon=True)
    p.start()
    lat = []
    try:
        with socket.create_connection(srv.getsockname()) as c:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                t = time.perf_counter()
                c.sendall(b"v" * 256)
                got = 0
                while got < 256:
                    got += len(c.recv(256 - got))
                lat.append(time.perf_counter() - t)
    finally:
        p.kill()
        p.join()
        srv.close()
    return sorted(lat[100:])


def floors() -> dict:
    floor_dir = tempfile.mkdtemp(prefix="bench-peers-floor-")  # same filesystem as the data dirs
    fs = fdatasync_floor(floor_dir, 2.0)
    os.rmdir(floor_dir)
    ec = echo_floor(2.0)
    return {"fdatasync_p50_ms": pct(fs, .5) * 1e3, "fdatasync_p99_ms": pct(fs, .99) * 1e3, "fdatasync_samples": len(fs),
            "tcp_echo_p50_ms": pct(ec, .5) * 1e3, "tcp_echo_p99_ms": pct(ec, .99) * 1e3, "tcp_echo_samples": len(ec)}


# --- workloads ------------------------------------------------------------------------------

def jobs_for(workload: str, seconds: float, clients: int, rate: float = 10_000) -> list[dict]:
    def split(total):
        return [total // clients + (1 if w < total % clients else 0) for w in range(clients)]
    if workload == "a":
        return [{"mode": "closed", "seconds": seconds, "in_flight": 1, "count": 1, "latency": True}]
    if workload in ("b256", "b2000"):
        return [{"mode": "closed", "seconds": seconds, "in_flight": n, "count": 1}
                for n in split(int(workload[1:]))]
    if workload == "c":
        return [{"mode": "closed", "seconds": seconds, "in_flight": n, "count": 100} for n in split(32)]
    if workload in ("d", "dlow"):
        # At most 2,000 writes waiting in all (as in b): beyond that a write is skipped, not queued.
        return [{"mode": "open", "seconds": seconds, "rate": rate / clients, "count": 1, "in_flight": 16,
                 "max_outstanding": n} for n in split(2000)]
    raise ValueError(workload)


def summarize(r: dict) -> dict:
    lat = r.pop("latencies")
    w = max(1, r["writes"])
    r.update(writes_per_s=r["writes"] / r["seconds"],
             server_cpu_us_per_write=r["server_cpu"] / w * 1e6, client_cpu_us_per_write=r["client_cpu"] / w * 1e6,
             server_user_us_per_write=r["server_user_cpu"] / w * 1e6,
             server_system_us_per_write=r["server_system_cpu"] / w * 1e6,
             p50_ms=_ms(pct(lat, 0.5)), p99_ms=_ms(pct(lat, 0.99)), p999_ms=_ms(pct(lat, 0.999)), samples=len(lat))
    return r


def _ms(x):
    return None if x is None else x * 1000


def measure(cluster, workload: str, seconds: float, clients: int, rate: float) -> dict:
    before = cluster.leader() or cluster.wait_ready()
    res = run_clients(cluster.spec([before]), jobs_for(workload, seconds, clients, rate),
                      lambda: procs.cpu_split(cluster.server_pids()))
    res["leader_before"], res["leader_after"] = before, cluster.leader()
    if workload in ("d", "dlow"):
        res["offered_per_s"], res["sent_fraction"] = rate, res["sent"] / (rate * seconds)
    return summarize(res)


def _busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (not idle or waiting on I/O): kernel
    writeback and journal threads count too."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def quiesce(limit_s: float = 5.0, idle_cores: float = 0.15) -> float:
    """Write back every dirty page, then wait (up to ``limit_s``) until the machine is nearly
    idle: the systems measured before leave gigabytes in the page cache (ext4 writes other
    files' dirty data as part of a later fsync's journal commit) and may still be taking a
    snapshot or collecting garbage, all of which would land in the next system's figure.
    Returns the seconds waited."""
    began = time.monotonic()
    os.sync()
    while time.monotonic() - began < limit_s:
        busy0, t0 = _busy_seconds(), time.monotonic()
        time.sleep(0.25)
        if (_busy_seconds() - busy0) / (time.monotonic() - t0) < idle_cores:
            break
    return time.monotonic() - began


def warm_up_zookeeper(cluster, seconds: float, clients: int) -> None:
    """ZooKeeper runs on the JVM: its hot paths are interpreted until the JIT has seen them."""
    left = seconds
    while left > 0:
        chunk = min(left, 10.0)
        for w in ("b256", "c"):
            run_clients(cluster.spec(), jobs_for(w, chunk / 2, clients), lambda: (0.0, 0.0))
        left -= chunk


# --- report ---------------------------------------------------------------------------------

ROWS = [  # (label, workload, field, higher is better)
    ("(a) 1 in flight: p50 latency, ms", "a", "p50_ms", False),
    ("(a) 1 in flight: p99 latency, ms", "a", "p99_ms", False),
    ("(a) 1 in flight: p99.9 latency, ms", "a", "p999_ms", False),
    ("(b) 256 in flight, 1 write/request: writes/s", "b256", "writes_per_s", True),
    ("(b) 2,000 in flight, 1 write/request: writes/s", "b2000", "writes_per_s", True),
    ("(c) 100 writes/request, 32 requests in flight: writes/s", "c", "writes_per_s", True),
    ("(d) open loop, offered {d}/s: share of writes sent (≤ 2,000 waiting)", "d", "sent_fraction", True),
    ("(d) open loop, offered {d}/s: writes/s committed in the window", "d", "writes_per_s", True),
    ("(d) open loop, offered {d}/s: p50 latency from scheduled send, ms", "d", "p50_ms", False),
    ("(d) open loop, offered {d}/s: p99 latency from scheduled send, ms", "d", "p99_ms", False),
    ("(d') open loop, offered {dlow}/s: writes/s committed in the window", "dlow", "writes_per_s", True),
    ("(d') open loop, offered {dlow}/s: p50 latency from scheduled send, ms", "dlow", "p50_ms", False),
    ("(d') open loop, offered {dlow}/s: p99 latency from scheduled send, ms", "dlow", "p99_ms", False),
]
for _w, _name in (("a", "(a)"), ("b256", "(b) 256"), ("b2000", "(b) 2,000"), ("c", "(c)"), ("d", "(d)"),
                  ("dlow", "(d')")):
    ROWS.append((f"{_name}: server CPU µs/write (3 servers)", _w, "server_cpu_us_per_write", False))
    if _w == "a":  # where the time goes at one in flight: the kernel's share and the code's
        ROWS.append(("(a): of which user (the servers' own code)", _w, "server_user_us_per_write", False))
        ROWS.append(("(a): of which system (sockets, wake-ups, fdatasync)", _w, "server_system_us_per_write", False))
    ROWS.append((f"{_name}: client CPU µs/write", _w, "client_cpu_us_per_write", False))


def median_of(results, system, workload, field):
    vals = [r[field] for r in results.get(system, {}).get(workload, []) if r.get(field) is not None]
    return statistics.median(vals) if vals else None


def fmt(v, field=""):
    if v is None:
        return "—"
    if field == "sent_fraction":
        return f"{v:.0%}"
    if "per_s" in field:
        return f"{v:,.0f}"
    return f"{v:,.0f}" if v >= 100 else f"{v:.2f}" if v < 10 else f"{v:.1f}"


def table(results, failovers, systems, names, rates, idle) -> str:
    peers = [s for s in PEERS if s in systems]
    krafts = [s for s in ("kraft", "kraft-ll") if s in systems]
    head = ["measurement"] + [names[s] for s in systems] + [f"kraft / {names[p]}" for p in peers]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, w, field, higher in ROWS:
        vals = {s: median_of(results, s, w, field) for s in systems}
        if all(v is None for v in vals.values()):
            continue
        cells = [label.format(**rates)] + [fmt(vals[s], field) for s in systems]
        kv = {k: vals[k] for k in krafts if vals[k] is not None}
        best = (max if higher else min)(kv, key=kv.get) if kv else None
        for p in peers:
            if best is None or not vals[p]:
                cells.append("—")
            else:
                tag = " (LL)" if best == "kraft-ll" else ""
                cells.append(f"{kv[best] / vals[p]:.2f}×{tag}")
        lines.append("| " + " | ".join(cells) + " |")
    extra = [("server CPU at idle, % of one core (3 servers)", {s: idle.get(s) for s in systems}, False),
             ("measurements during which the leader changed", {s: sum(r["leader_after"] != r["leader_before"]
                                                                      for rs in results.get(s, {}).values() for r in rs)
                                                              for s in systems}, None)]
    if failovers:
        extra.append(("(e) failover: kills with no commit within 60 s",
                      {s: sum(t is None for t in failovers.get(s, [])) for s in systems}, None))
    for label, vals, higher in extra:
        if all(v is None for v in vals.values()):
            continue
        cells = [label] + ["—" if vals[s] is None else f"{vals[s]:.0f}" if isinstance(vals[s], int) else fmt(vals[s])
                           for s in systems]
        kv = {k: vals[k] for k in krafts if vals[k] is not None}
        for p in peers:
            cells.append("—" if higher is None or not kv or not vals[p] else f"{kv[min(kv, key=kv.get)] / vals[p]:.2f}×")
        lines.append("| " + " | ".join(cells) + " |")
    if failovers:
        failovers = {s: [t for t in v if t is not None] for s, v in failovers.items()}
        for stat, fn in (("median", statistics.median), ("max", max)):
            vals = {s: (fn(failovers[s]) * 1000 if failovers.get(s) else None) for s in systems}
            cells = [f"(e) failover, SIGKILL leader → next commit: {stat}, ms"] + [fmt(vals[s]) for s in systems]
            kv = {k: vals[k] for k in krafts if vals[k] is not None}
            for p in peers:
                cells.append(" / ".join(f"{kv[k] / vals[p]:.2f}×{' (LL)' if k == 'kraft-ll' else ''}"
                                        for k in kv) if kv and vals[p] else "—")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- main -----------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per figure")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (figures are medians)")
    ap.add_argument("--only", default="a,b,c,d,e", help="workloads: a,b,c,d,e")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--clients", type=int, default=4, help="client processes for b, c, d")
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--rate", type=float, default=10_000, help="offered writes/s in (d)")
    ap.add_argument("--rate-low", type=float, default=2_000, help="offered writes/s in (d'), below every system's capacity here")
    ap.add_argument("--zk-warmup", type=float, default=30.0, help="seconds of ZooKeeper JIT warm-up load")
    ap.add_argument("--quick", action="store_true", help="~3 minutes: 2 s figures, 1 round, 1 kill, 10 s ZK warm-up")
    ap.add_argument("--json", default=os.path.join(tempfile.gettempdir(), "bench_peers.json"), help="raw numbers go here")
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.rounds, args.kills, args.zk_warmup = 2.0, 1, 1, 10.0
    only = set(args.only.split(","))
    workloads = [w for w, key in (("a", "a"), ("b256", "b"), ("b2000", "b"), ("c", "c"), ("d", "d"), ("dlow", "d"))
                 if key in only]
    systems = [s for s in args.systems.split(",") if s]
    procs.install_cleanup()
    started = time.monotonic()

    def log(msg):
        print(f"[{time.monotonic() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    out = {"args": vars(args), "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "python": interpreter(), "floors": {},
           "results": {}, "failover": {}}
    out["floors"] = floors()
    log(f"floors: {out['floors']}")

    clusters = {}
    try:
        for s in systems:
            clusters[s] = make_cluster(s)
            clusters[s].start()
        names = {s: clusters[s].name for s in systems}
        for s in systems:
            log(f"{names[s]}: leader {clusters[s].wait_ready()}")
        time.sleep(2.0)
        cpu0 = {s: procs.cpu_seconds(clusters[s].server_pids()) for s in systems}
        time.sleep(3.0)
        out["idle_cpu_pct"] = {s: (procs.cpu_seconds(clusters[s].server_pids()) - cpu0[s]) / 3.0 * 100 for s in systems}
        log(f"idle server CPU, % of a core: {out['idle_cpu_pct']}")
        if "zookeeper" in systems and workloads:
            log(f"ZooKeeper JIT warm-up {args.zk_warmup:.0f} s")
            warm_up_zookeeper(clusters["zookeeper"], args.zk_warmup, args.clients)
        for rnd in range(args.rounds):
            for w in workloads:
                for s in systems:
                    waited = quiesce()
                    r = measure(clusters[s], w, args.seconds, args.clients, args.rate_low if w == "dlow" else args.rate)
                    r["quiesce_s"] = waited
                    out["results"].setdefault(s, {}).setdefault(w, []).append(r)
                    log(f"round {rnd + 1} {w:5} {s:9} {r['writes_per_s']:9,.0f} w/s p50 {fmt(r['p50_ms'])} p99 {fmt(r['p99_ms'])} "
                        f"srv {r['server_cpu_us_per_write']:.0f} µs/w ({r['server_user_us_per_write']:.0f} user) cli {r['client_cpu_us_per_write']:.0f} µs/w err {r['errors']}"
                        + (f" {r['error_samples']}" if r["errors"] else "")
                        + (f" LEADER CHANGED {r['leader_before']} -> {r['leader_after']}"
                           if r["leader_after"] != r["leader_before"] else ""))
        for s in clusters:
            if s.startswith("kraft"):
                out.setdefault("kraft_applied_records", {})[s] = clusters[s].applied_records()
        if "e" in only:
            for k in range(args.kills):
                for s in systems:
                    c = clusters[s]
                    c.wait_ready()
                    time.sleep(1.0)  # let the restarted node catch up before the next kill
                    try:
                        leader, took = failover_once(c)
                    except (RuntimeError, OSError, queue.Empty) as exc:
                        log(f"failover {s}: probe failed: {exc!r}")
                        out["failover_errors"] = out.get("failover_errors", []) + [f"{s}: {exc!r}"]
                        for i in c.ids:
                            if i not in c.running():
                                c.start(i)
                        continue
                    out["failover"].setdefault(s, []).append(took)
                    log(f"failover {s}: killed {leader}, next commit after "
                        f"{'never' if took is None else f'{took * 1000:.0f} ms'}")
                    c.start(leader)
    finally:
        for c in clusters.values():
            c.stop()
        procs.cleanup()

    out["floors_end"] = floors()  # the disk is shared: its fsync latency drifts during a run
    out["names"] = names
    out["elapsed_s"] = time.monotonic() - started
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    for when in ("floors", "floors_end"):
        fl = out[when]
        print(f"Floors ({'start' if when == 'floors' else 'end'} of the run): fdatasync of 256 B p50 {fl['fdatasync_p50_ms']:.2f} ms, "
              f"p99 {fl['fdatasync_p99_ms']:.2f} ms; loopback TCP echo round trip (two processes) "
              f"p50 {fl['tcp_echo_p50_ms']:.3f} ms, p99 {fl['tcp_echo_p99_ms']:.3f} ms.")
    print()
    print(table(out["results"], out["failover"], systems, names, {"d": f"{args.rate:,.0f}", "dlow": f"{args.rate_low:,.0f}"}, out["idle_cpu_pct"]))
    print(f"\n{args.rounds} round(s) × {args.seconds:g} s per figure (median of rounds), {args.clients} client processes "
          f"for b/c/d; (d) offers {args.rate:,.0f} writes/s; ratios are kraft / peer using the better kraft profile for that row ((LL) = low-latency). "
          f"Raw numbers: {args.json}. Took {out['elapsed_s']:.0f} s. kraft's servers and every client ran on "
          f"{out['python']['describe']}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
