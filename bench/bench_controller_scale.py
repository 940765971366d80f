"""A million partitions on the quorum controller (issue 38), on 3 real ``kraft server start``
processes and simulated brokers, one cluster, one run:

    PYTHONPATH=$PWD python bench/bench_controller_scale.py            # 10,000 topics x 100, 10 brokers
    PYTHONPATH=$PWD python bench/bench_controller_scale.py --topics 1000 --brokers 5   # a quick look

1. creation: ``--topics`` x ``--partitions`` (RF 3) through CreateTopics of ``--per-request``
   topics, every request in flight at once (200 at full size). Figures: first request to last
   answer (each answer comes once its records committed), to every controller's image holding
   them all (polled on the metrics endpoint once the answers are in), leader changes meanwhile
   (the epoch's growth), the largest uncommitted tail the leader admitted work at
   (``kraft_raft_uncommitted_records_max``) and any error.
2. memory: each controller's RSS (VmRSS, and its peak VmHWM) with that image.
3. fence: once every node is at rest (the creation's snapshots written), broker 1 (with
   ``--brokers 10`` it leads a tenth of the partitions) stops heartbeating and asks to be fenced (BrokerHeartbeat want_fence: the records a lease expiry writes). Figures:
   the heartbeat sent -> the active controller's log line saying every partition it led has a
   new leader, committed (those changes go first); the heartbeat's round trip = also every ISR
   it was in shrunk and the broker fenced, all committed; then applied by every controller (its
   applied offset reached the active one's), and every controller's image statistics showing
   no partition led by a fenced broker.
4. failover: SIGKILL the active controller and send a CreateTopics (1 topic x 100) at once.
   Figure: kill -> that answer (election, a new active controller, the topic committed).
5. snapshot: the snapshots the nodes wrote (from their logs: records, ms off the loop), and the
   killed node restarted: start -> its image holds every partition (latest snapshot loaded + the
   log after it, fetched and replayed).
Not a test: nothing asserts a time. Prints a summary and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

try:
    import kraft  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_controller import (gauges, max_epoch, peak_backlog, raft_gauges, start_brokers,  # noqa: E402
                             stop_brokers, until_all)
from kraft.cli.local_cluster import LocalCluster  # noqa: E402
from kraft.client.controller_client import ControllerClient  # noqa: E402
from kraft.protocol import BrokerHeartbeatRequest  # noqa: E402

SETTINGS = {"controller.quorum.append.linger.ms": "5"}
_LEADERS = re.compile(r"^\[([0-9-]+ [0-9:]+),(\d+)\] INFO \[node (\d+)\] kraft\.controller: node \d+: broker\(s\) "
                      r"\[(\d+)\]: every partition led there has a new leader", re.M)
_SNAPSHOT = re.compile(r"node (\d+)\] kraft\.snapshots: snapshot (\d+)-\d+ written \(([^)]*)\): (\d+) records in "
                       r"(\d+) batches, (\d+) ms off the loop")


def memory(pid: int) -> dict:
    """VmRSS / VmHWM of a process, in MiB."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":")
                    out[key] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return out


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def settle(cluster, timeout: float = 60.0) -> float:
    """Wait until every node is at rest (under 10% of a core over a second): the creation burst
    leaves snapshots being written and images being applied, and a fence measured meanwhile
    measures them too. Returns the seconds waited."""
    t0 = time.perf_counter()
    pids = [cluster.procs[i].pid for i in cluster.ids]
    while time.perf_counter() - t0 < timeout:
        before = [cpu_s(p) for p in pids]
        await asyncio.sleep(1.0)
        if all(cpu_s(p) - b < 0.1 for p, b in zip(pids, before)):
            break
    return time.perf_counter() - t0


def sample(cluster, directory: str, what: str) -> list:
    """py-spy on every node (collapsed stacks in DIRECTORY/WHAT-node-N.txt) until interrupted."""
    import subprocess
    os.makedirs(directory, exist_ok=True)
    return [subprocess.Popen(["py-spy", "record", "--pid", str(cluster.procs[i].pid), "--rate", "200", "--format",
                              "raw", "--nonblocking", "--output", os.path.join(directory, f"{what}-node-{i}.txt")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in cluster.running()]


def leaders_moved_at(cluster, broker_id: int, after: float) -> float | None:
    """When (wall clock) a node logged that every partition ``broker_id`` led had a new leader
    committed (the first such line after ``after``)."""
    for i in cluster.ids:
        try:
            with open(cluster.log_path(i), errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        for m in _LEADERS.finditer(text):
            if int(m[4]) != broker_id:
                continue
            ts = time.mktime(time.strptime(m[1], "%Y-%m-%d %H:%M:%S")) + int(m[2]) / 1000
            if ts >= after:
                return ts
    return None


def active_controller(cluster) -> int | None:
    for i in cluster.running():
        if raft_gauges(cluster, i).get("kraft_is_leader") == 1:
            return i
    return None


async def create(client, names, partitions, per_request) -> tuple[float, list]:
    groups = [names[i:i + per_request] for i in range(0, len(names), per_request)]
    start = time.perf_counter()
    answers = await asyncio.gather(*(client.create_topics([(n, partitions, 3) for n in g], deadline_s=120)
                                     for g in groups))
    took = time.perf_counter() - start
    return took, [t for a in answers for t in a.topics if t.error_code != 0]


async def run(args, out) -> None:
    d = args.dir or tempfile.mkdtemp(prefix="bench-scale-")
    cluster = LocalCluster(d, 3, overrides=SETTINGS, metrics=True).create()
    cluster.start()
    client = ControllerClient([cluster.address(i) for i in cluster.ids], client_id="admin")
    brokers = []
    total = args.topics * args.partitions
    try:
        brokers = await start_brokers(cluster, args.brokers)
        # 1. creation
        before = await asyncio.to_thread(max_epoch, cluster)
        names = [f"t{i:05d}" for i in range(args.topics)]
        committed, errors = await create(client, names, args.partitions, args.per_request)
        applied = committed + await until_all(cluster, lambda g: g.get("global_partition_count") == total,
                                              timeout=300)
        leader_changes = await asyncio.to_thread(max_epoch, cluster) - before
        peak = await asyncio.to_thread(peak_backlog, cluster)
        out["create"] = {"partitions": total, "topics": args.topics, "per_request": args.per_request,
                         "requests": -(-args.topics // args.per_request), "committed_s": committed,
                         "applied_everywhere_s": applied, "errors": len(errors), "first_errors": [
                             f"{t.name}: {t.error_code} {t.error_message}" for t in errors[:3]],
                         "leader_changes": leader_changes, "peak_uncommitted_records": peak}
        print(f"1. creation: {total:,} partitions ({args.topics:,} topics x {args.partitions}, RF 3, "
              f"{out['create']['requests']} requests in flight): all committed {committed:.2f} s, in every "
              f"controller's image {applied:.2f} s; {len(errors)} errors, {leader_changes} leader changes, "
              f"peak uncommitted {peak:,} records", flush=True)
        # 2. memory
        out["rss_mib"] = {i: memory(cluster.procs[i].pid) for i in cluster.ids}
        print("2. memory: " + ", ".join(f"node {i} RSS {m.get('VmRSS', 0):.0f} MiB (peak {m.get('VmHWM', 0):.0f})"
                                        for i, m in out["rss_mib"].items()), flush=True)
        # 3. fence broker 1, with the cluster at rest (a fence comes at any time, but the figure
        # is the fence's, not that of the creation burst's snapshots still being written)
        settled = await settle(cluster)
        out["settled_before_fence_s"] = settled
        victim = brokers[0]
        await victim.stop()
        spies = sample(cluster, args.py_spy, "fence") if args.py_spy else []
        req = BrokerHeartbeatRequest(broker_id=victim.broker_id, broker_epoch=victim.epoch,
                                     current_metadata_offset=1 << 40, want_fence=True, want_shut_down=False)
        t0, wall0 = time.perf_counter(), time.time()
        resp = await client.call(req, deadline_s=60)
        fence_s = time.perf_counter() - t0
        assert resp.error_code == 0 and resp.is_fenced, resp
        for spy in spies:
            spy.send_signal(2)
            spy.wait(30)
        moved = leaders_moved_at(cluster, victim.broker_id, wall0 - 1)
        leaders_s = None if moved is None else moved - wall0
        # Every controller applied the fence: its applied offset reached the active one's (the
        # offset gauges are current; image statistics may trail a change this large).
        leader = await asyncio.to_thread(active_controller, cluster)
        target = (await asyncio.to_thread(gauges, cluster, leader)).get("last_applied_offset", 0)
        everywhere = fence_s + await until_all(cluster, lambda g: g.get("last_applied_offset", -1) >= target,
                                               timeout=120)
        stats_ok = await until_all(cluster, lambda g: g.get("fenced_broker_count") == 1
                                   and g.get("partitions_led_by_fenced_brokers") == 0, timeout=300)
        led = total // args.brokers
        out["fence"] = {"broker": victim.broker_id, "led_about": led, "new_leaders_committed_s": leaders_s,
                        "commit_s": fence_s, "applied_everywhere_s": everywhere,
                        "no_fenced_leader_in_every_image_stats_s": everywhere + stats_ok}
        print(f"3. fence: broker {victim.broker_id} (leads ~{led:,} of {total:,}) fenced: decision -> every "
              f"partition it led has a new leader, committed {leaders_s if leaders_s is None else round(leaders_s, 2)}"
              f" s (the active controller's log line); with the ISRs it was in shrunk, all committed "
              f"{fence_s:.2f} s (heartbeat round trip); in every controller's image {everywhere:.2f} s "
              f"(nodes at rest {settled:.0f} s after the creation)", flush=True)
        # 4. failover
        leader = await asyncio.to_thread(active_controller, cluster)
        t0 = time.perf_counter()
        cluster.kill(leader)
        took, errs = await create(client, ["after-failover"], args.partitions, 1)
        failover_s = time.perf_counter() - t0
        assert not errs, errs
        out["failover"] = {"killed": leader, "next_create_answered_s": failover_s}
        print(f"4. failover: SIGKILL of the active controller (node {leader}) -> the next CreateTopics "
              f"answered {failover_s:.2f} s", flush=True)
        # 5. snapshot: written ones, and the killed node's restart
        t0 = time.perf_counter()
        cluster.start(leader)
        want = total + args.partitions

        def caught_up(node=leader):
            return gauges(cluster, node).get("global_partition_count") == want
        while not await asyncio.to_thread(caught_up):
            await asyncio.sleep(0.1)
            if time.perf_counter() - t0 > 300:
                raise TimeoutError("the restarted node did not catch up")
        restart_s = time.perf_counter() - t0
        snapshots = []
        for i in cluster.ids:
            with open(cluster.log_path(i), errors="replace") as f:
                for m in _SNAPSHOT.finditer(f.read()):
                    snapshots.append({"node": int(m[1]), "offset": int(m[2]), "why": m[3], "records": int(m[4]),
                                      "ms_off_loop": int(m[6])})
        largest = max(snapshots, key=lambda s: s["records"], default=None)
        out["snapshot"] = {"written": snapshots, "restart_to_full_image_s": restart_s,
                           "rss_after_restart_mib": memory(cluster.procs[leader].pid)}
        print(f"5. snapshot: {len(snapshots)} written, the largest {largest['records']:,} records in "
              f"{largest['ms_off_loop']} ms off the loop (node {largest['node']}); node {leader} restarted -> its "
              f"image holds all {want:,} partitions {restart_s:.2f} s" if largest else
              f"5. snapshot: none written; restart {restart_s:.2f} s", flush=True)
        out["rss_end_mib"] = {i: memory(cluster.procs[i].pid) for i in cluster.running()}
    finally:
        await stop_brokers(brokers)
        await client.close()
        cluster.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--per-request", type=int, default=50)
    ap.add_argument("--brokers", type=int, default=10)
    ap.add_argument("--dir", default=None, help="keep the cluster's directory (its logs) here")
    ap.add_argument("--json", default=None)
    ap.add_argument("--py-spy", default=None, metavar="DIR",
                    help="sample every node with py-spy during the fence (DIR/fence-node-N.txt, collapsed stacks)")
    args = ap.parse_args()
    out = {"args": vars(args), "machine": {"cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}}
    asyncio.run(run(args, out))
    out["machine"]["loadavg_end"] = os.getloadavg()
    path = args.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                     f"bench_controller_scale-{time.strftime('%Y-%m-%d')}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
