"""The quorum controller under load, on 3 real ``kraft server start`` processes (one machine).

    PYTHONPATH=$PWD python bench/bench_controller.py                 # both workloads, full size
    PYTHONPATH=$PWD python bench/bench_controller.py --only a --topics 100

(a) 5 simulated brokers register and heartbeat; ``--topics`` x ``--partitions`` partitions
    (RF 3) are created through CreateTopics, ``--per-request`` topics per request, all requests
    in flight at once. Figures: time from the first request to the last answer (the active
    controller answers only once a request's records committed, so this is "all committed"),
    and to every controller's image holding them all (polled on the metrics endpoint).
(b) a fresh cluster where each of 5 brokers leads ``--fence-leaders`` partitions; one broker asks
    to be fenced (BrokerHeartbeat want_fence, the same records a lease expiry writes). Figure: the
    heartbeat's round trip = fence decision -> all new leaders committed (+ one loopback RTT),
    and the records that took. Then every controller's image shows no partition led by a fenced
    broker.
Anchors in the same run (in-process, no Raft, no network): (a) the controller's CPU time for the
same creates plus one standby's replay of them; (b) its time to compute and replay the same
fence for the same image. The ratios say how much is replication, network and the other nodes.
Not a test: nothing asserts a time. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

try:
    import kraft  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kraft.cli.local_cluster import LocalCluster
from kraft.client.controller_client import ControllerClient, SimulatedBroker
from kraft.protocol import BrokerHeartbeatRequest

_GAUGE = re.compile(r"^(kraft_controller_\w+)\{[^}]*\} (\S+)$", re.M)
SETTINGS = {"controller.quorum.append.linger.ms": "5"}


def gauges(cluster, node_id) -> dict:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_ports[node_id]}/metrics", timeout=30) as r:
            text = r.read().decode()
    except OSError:
        return {}
    return {k[len("kraft_controller_"):]: float(v) for k, v in _GAUGE.findall(text)}


async def until_all(cluster, pred, timeout=120.0, interval=0.25) -> float:
    """Seconds until ``pred(gauges)`` holds on every node (polled)."""
    start = time.perf_counter()
    pending = set(cluster.ids)
    while pending and time.perf_counter() - start < timeout:
        for i in list(pending):
            if pred(await asyncio.to_thread(gauges, cluster, i)):
                pending.discard(i)
        if pending:
            await asyncio.sleep(interval)
    if pending:
        raise TimeoutError(f"nodes {sorted(pending)} did not get there in {timeout} s")
    return time.perf_counter() - start


async def start_brokers(cluster, n=5):
    """``n`` simulated brokers on a client of their own (a broker's heartbeats do not queue in
    the admin tool's connection behind its CreateTopics)."""
    client = ControllerClient([cluster.address(i) for i in cluster.ids], client_id="brokers")
    brokers = [SimulatedBroker(client, b, cluster.cluster_id, rack=f"r{b % 3}") for b in range(1, n + 1)]
    for b in brokers:
        await b.register()
        b.start()
    end = time.monotonic() + 30
    while any(b.fenced for b in brokers) and time.monotonic() < end:
        await asyncio.sleep(0.1)
    assert not any(b.fenced for b in brokers), "brokers were not unfenced"
    return brokers


async def stop_brokers(brokers) -> None:
    for b in brokers:
        await b.stop()
    if brokers:
        await brokers[0].client.close()


def raft_gauges(cluster, node_id) -> dict:
    """kraft_current_epoch, kraft_leader_changes_total, kraft_raft_uncommitted_records... of a node."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.metrics_ports[node_id]}/metrics", timeout=30) as r:
            text = r.read().decode()
    except OSError:
        return {}
    return {k: float(v) for k, v in re.findall(r"^(kraft_[a-z_]+)(?:\{[^}]*\})? (\S+)$", text, re.M)}


def max_epoch(cluster) -> int:
    """The highest epoch any running node knows: every election raises it, so its growth over a
    workload counts the leader changes (none: the same leader throughout)."""
    return max(int(raft_gauges(cluster, i).get("kraft_current_epoch", -1)) for i in cluster.running())


def peak_backlog(cluster) -> int:
    """The most uncommitted records any leader saw when admitting work (it keeps the figure: the
    bench does not poll during a workload, a scrape being work for the nodes too)."""
    return max(int(raft_gauges(cluster, i).get("kraft_raft_uncommitted_records_max", 0)) for i in cluster.running())


async def create_all(client, topics, partitions, per_request, prefix="t") -> float:
    names = [f"{prefix}{i:05d}" for i in range(topics)]
    groups = [names[i:i + per_request] for i in range(0, len(names), per_request)]
    start = time.perf_counter()
    answers = await asyncio.gather(*(client.create_topics([(n, partitions, 3) for n in g], deadline_s=120)
                                     for g in groups))
    took = time.perf_counter() - start
    bad = [t for a in answers for t in a.topics if t.error_code != 0]
    assert not bad, bad[:3]
    return took


def workdir(args, name):
    if args.dir:  # kept for a look at the nodes' logs
        path = os.path.join(args.dir, name)
        os.makedirs(path, exist_ok=True)
        return contextlib.nullcontext(path)
    return tempfile.TemporaryDirectory()


async def workload_a(args, out):
    with workdir(args, "a") as d:
        cluster = LocalCluster(d, 3, overrides=SETTINGS, metrics=True).create()
        cluster.start()
        client = ControllerClient([cluster.address(i) for i in cluster.ids])
        brokers = []
        try:
            brokers = await start_brokers(cluster, args.brokers)
            total = args.topics * args.partitions
            spies = []
            if args.py_spy:  # sample every node while it works (collapsed stacks, see --py-spy)
                import subprocess
                for i in cluster.ids:
                    spies.append(subprocess.Popen(["py-spy", "record", "--pid", str(cluster.procs[i].pid), "--rate",
                                                   "200", "--format", "raw", "--output",
                                                   os.path.join(args.py_spy, f"node-{i}.txt"), "--nonblocking"],
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                await asyncio.sleep(1.0)
            started = time.perf_counter()
            epoch_before = max_epoch(cluster)
            committed = await create_all(client, args.topics, args.partitions, args.per_request)
            leader_changes = max_epoch(cluster) - epoch_before
            applied = committed + await until_all(
                cluster, lambda g: g.get("global_partition_count") == total)
            for spy in spies:
                spy.send_signal(2)
                spy.wait(30)
            digests = {i: gauges(cluster, i).get("image_digest") for i in cluster.ids}
            assert len(set(digests.values())) == 1, digests
            fenced = sum(b.errors for b in brokers)
            out["a"] = {"partitions": total, "topics": args.topics, "per_request": args.per_request,
                        "committed_s": committed, "applied_everywhere_s": applied,
                        "broker_heartbeat_errors": fenced, "elapsed_s": time.perf_counter() - started,
                        "leader_changes": leader_changes, "peak_uncommitted_records": peak_backlog(cluster)}
        finally:
            await stop_brokers(brokers)
            await client.close()
            cluster.close()
    # The anchor runs once the cluster is gone: in this process it would stop the simulated
    # brokers' heartbeats (one event loop) for as long as it computes, and their leases expire.
    anchor = out["a"]["anchor"] = create_anchor(args.topics, args.partitions, args.per_request)
    floor = anchor["leader_cpu_s"] + anchor["standby_cpu_s"]
    a = out["a"]
    print(f"(a) {a['partitions']:,} partitions ({args.topics} topics x {args.partitions}, RF 3, "
          f"{args.per_request} topics/request): all committed {a['committed_s']:.2f} s, "
          f"in every controller's image {a['applied_everywhere_s']:.2f} s "
          f"({a['partitions'] / a['committed_s']:,.0f} partitions/s); anchor, in-process controller alone: leader "
          f"{anchor['leader_cpu_s']:.2f} s CPU + one standby's replay {anchor['standby_cpu_s']:.2f} s CPU "
          f"(committed / anchor = {a['committed_s'] / floor:.1f}x); {a['leader_changes']} leader changes, "
          f"peak uncommitted records seen {a['peak_uncommitted_records']:,}", flush=True)


def create_anchor(topics, partitions, per_request) -> dict:
    """In-process: the same creates run by the controller alone (no Raft, no network), plus one
    standby replaying the resulting log: the CPU floor of workload (a)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "controller"))
    from controller_fakes import FakeRaft, active_controller, cluster_of, create_topics, standby
    from kraft.records import iter_batches
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    cluster_of(raft, ctl, 5)
    first = len(raft.batches)
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, topics, per_request):
        ctl.submit(19, create_topics(*[(f"t{j:05d}", partitions, 3) for j in range(i, min(i + per_request, topics))]),
                   7, 0, ("c", i))
    leader_wall, leader_cpu = time.perf_counter() - t0, time.process_time() - c0
    other, _ = standby()
    views = [b for raw in raft.batches for b in iter_batches(raw)]
    t0, c0 = time.perf_counter(), time.process_time()
    other.handle_commit(views)
    return {"leader_wall_s": leader_wall, "leader_cpu_s": leader_cpu, "standby_wall_s": time.perf_counter() - t0,
            "standby_cpu_s": time.process_time() - c0, "batches": len(raft.batches) - first}


def fence_anchor(n_brokers, topics, partitions) -> dict:
    """In-process: same image, the fence computed and replayed by the controller alone."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "controller"))
    from controller_fakes import FakeRaft, active_controller, cluster_of, create_topics, heartbeat
    raft = FakeRaft()
    ctl, _ = active_controller(raft)
    epochs = cluster_of(raft, ctl, n_brokers)
    for i in range(0, topics, 50):
        ctl.submit(19, create_topics(*[(f"t{j:05d}", partitions, 3) for j in range(i, min(i + 50, topics))]),
                   7, 0, ("c", i))
        raft.commit(ctl)
    led = sum(1 for t in ctl.image.topics.by_id.values() for p in t.partitions.values() if p.leader == 1)
    before, end_before = len(raft.batches), raft.end
    t0, c0 = time.perf_counter(), time.process_time()
    ctl.submit(63, heartbeat(1, epochs[1], raft.end, want_fence=True), 1, 0, "fence")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    proposals, records = len(raft.batches) - before, raft.end - end_before
    raft.commit(ctl)
    return {"led": led, "compute_wall_s": wall, "compute_cpu_s": cpu, "proposals": proposals, "records": records}


async def workload_b(args, out):
    per_broker = args.fence_leaders
    topics = per_broker * 5 // args.partitions
    with workdir(args, "b") as d:
        cluster = LocalCluster(d, 3, overrides=SETTINGS, metrics=True).create()
        cluster.start()
        client = ControllerClient([cluster.address(i) for i in cluster.ids])
        brokers = []
        try:
            brokers = await start_brokers(cluster, args.brokers)
            await create_all(client, topics, args.partitions, args.per_request)
            total = topics * args.partitions
            await until_all(cluster, lambda g: g.get("global_partition_count") == total)
            victim = brokers[0]
            await victim.stop()  # no heartbeat of its own in between
            req = BrokerHeartbeatRequest(broker_id=victim.broker_id, broker_epoch=victim.epoch,
                                         current_metadata_offset=1 << 40, want_fence=True, want_shut_down=False)
            t0 = time.perf_counter()
            resp = await client.call(req)
            fence_s = time.perf_counter() - t0
            assert resp.error_code == 0 and resp.is_fenced, resp
            everywhere = fence_s + await until_all(
                cluster, lambda g: g.get("fenced_broker_count") == 1 and g.get("partitions_led_by_fenced_brokers") == 0)
            anchor = fence_anchor(5, topics, args.partitions)
            print(f"(b) broker leading {anchor['led']:,} partitions ({total:,} in all) fenced: decision -> all new "
                  f"leaders committed {fence_s * 1000:.0f} ms (heartbeat round trip); in every controller's image "
                  f"{everywhere * 1000:.0f} ms; anchor, same fence computed in-process without Raft: "
                  f"{anchor['compute_wall_s'] * 1000:.0f} ms wall / {anchor['compute_cpu_s'] * 1000:.0f} ms CPU "
                  f"(ratio {fence_s / anchor['compute_wall_s']:.1f}x)", flush=True)
            out["b"] = {"led_by_fenced": anchor["led"], "partitions": total, "fence_commit_s": fence_s,
                        "fence_applied_everywhere_s": everywhere, "anchor": anchor}
        finally:
            await stop_brokers(brokers)
            await client.close()
            cluster.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="a,b")
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--per-request", type=int, default=50)
    ap.add_argument("--brokers", type=int, default=5)
    ap.add_argument("--fence-leaders", type=int, default=10_000)
    ap.add_argument("--json", default=None)
    ap.add_argument("--dir", default=None, help="keep the clusters' directories (logs) under DIR")
    ap.add_argument("--py-spy", default=None, metavar="DIR",
                    help="(a) only: sample each node with py-spy into DIR/node-N.txt (collapsed stacks)")
    args = ap.parse_args()
    out = {"args": vars(args)}
    if "a" in args.only:
        asyncio.run(workload_a(args, out))
    if "b" in args.only:
        asyncio.run(workload_b(args, out))
    path = args.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                     f"bench_controller-{time.strftime('%Y-%m-%d')}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
