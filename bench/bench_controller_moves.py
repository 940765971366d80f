"""Leadership moves against ZooKeeper, and controller failover, on real processes (one machine).

    PYTHONPATH=$PWD python bench/bench_controller_moves.py               # both, full size
    PYTHONPATH=$PWD python bench/bench_controller_moves.py --only c --fence-leaders 2000

(c) ZooKeeper comparison, in the same run: the leadership move of a broker leading
    ``--fence-leaders`` partitions. ZooKeeper side (seed 003's controller path, as Kafka's
    ZooKeeper-era controller writes it): a 3-server ZooKeeper 3.8 ensemble (bench/peers), one
    znode per partition at /brokers/topics/<t>/partitions/<p>/state holding Kafka's partition
    state JSON; the move is one conditional setData (expected zkVersion) per partition with the
    new leader, leader epoch and ISR, through kazoo. Two figures: every setData pipelined at once
    (ZooKeeper's best case) and at most 10 in flight (Kafka's ``zookeeper.max.in.flight.requests``
    default). Nothing else Kafka's controller does (reading the states first, LeaderAndIsr to the
    brokers) is counted. Our side: ``bench_controller.py``'s workload (b) — the same broker fenced
    through BrokerHeartbeat(want_fence) on 3 ``kraft server start`` processes, the heartbeat's round
    trip covering the fence decision, the PartitionChangeRecords and their commit.
(d) Controller failover: 3 nodes with default timeouts, 5 simulated brokers, ``--workers``
    concurrent CreateTopics loops (one topic of ``--failover-partitions`` partitions, RF 3, per
    request). After ``--warmup`` s the active controller is SIGKILLed. Figure: from the kill to the
    first CreateTopics answered successfully after it. Then every topic that was acknowledged
    (error 0) must exist: a validate-only CreateTopics of all of them must answer
    TOPIC_ALREADY_EXISTS for each.
Not a test: nothing asserts a time. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_controller as bc  # noqa: E402
from kraft.cli.local_cluster import LocalCluster  # noqa: E402
from kraft.client.controller_client import ControllerClient, NoControllerError  # noqa: E402
from kraft.errors import ErrorCode, KraftError  # noqa: E402
from kraft.protocol import CreateTopicsRequest  # noqa: E402


# --- (c) ZooKeeper ------------------------------------------------------------------------------


def _state(leader: int, leader_epoch: int, isr) -> bytes:
    """Kafka's /brokers/topics/<t>/partitions/<p>/state JSON (TopicPartitionStateZNode)."""
    return json.dumps({"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": leader_epoch,
                       "isr": list(isr)}, separators=(",", ":")).encode()


def _wait_all(results) -> None:
    for r in results:
        r.get(timeout=120)


def zk_layout(zk, topics: int, partitions: int) -> list[str]:
    """Create the partition state znodes (leader 1, ISR 1,2,3); returns their paths."""
    zk.ensure_path("/brokers/topics")
    paths, pending = [], []
    for t in range(topics):
        tx = zk.transaction()
        base = f"/brokers/topics/t{t:05d}"
        tx.create(base, b"{}")
        tx.create(base + "/partitions", b"")
        for p in range(partitions):
            tx.create(f"{base}/partitions/{p}", b"")
            tx.create(f"{base}/partitions/{p}/state", _state(1, 0, (1, 2, 3)))
            paths.append(f"{base}/partitions/{p}/state")
        pending.append(tx.commit_async())
        if len(pending) >= 20:
            _wait_all(pending)
            pending = []
    _wait_all(pending)
    return paths


def zk_move(zk, paths, payload: bytes, version: int, window: int | None) -> float:
    """Seconds to setData(``payload``, expected ``version``) on every path, at most ``window`` in
    flight (None: all at once). Raises if any write failed."""
    done = threading.Event()
    lock = threading.Lock()
    state = {"next": 0, "finished": 0, "errors": []}
    n = len(paths)

    def issue():
        with lock:
            i = state["next"]
            if i >= n:
                return
            state["next"] = i + 1
        zk.set_async(paths[i], payload, version=version).rawlink(finished)

    def finished(result):
        try:
            result.get_nowait()
        except Exception as e:  # noqa: BLE001 - reported after the run
            state["errors"].append(e)
        with lock:
            state["finished"] += 1
            last = state["finished"] == n
        if last:
            done.set()
        elif window is not None:
            issue()

    t0 = time.perf_counter()
    for _ in range(n if window is None else min(window, n)):
        issue()
    if not done.wait(300):
        raise TimeoutError("ZooKeeper writes did not finish")
    took = time.perf_counter() - t0
    if state["errors"]:
        raise RuntimeError(f"{len(state['errors'])} setData failed: {state['errors'][0]!r}")
    return took


def zookeeper_side(n_partitions: int) -> dict:
    from kazoo.client import KazooClient

    from bench.peers.zookeeper import ZooKeeperCluster
    zkc = ZooKeeperCluster(3)
    zkc.start()
    try:
        leader = zkc.wait_ready()
        zk = KazooClient(hosts=zkc.hosts([leader]), timeout=30.0)
        zk.start(timeout=60)
        try:
            per_topic = 100
            topics = max(1, n_partitions // per_topic)
            t0 = time.perf_counter()
            paths = zk_layout(zk, topics, per_topic)
            layout_s = time.perf_counter() - t0
            pipelined = zk_move(zk, paths, _state(2, 1, (2, 3)), 0, None)
            windowed = zk_move(zk, paths, _state(3, 2, (3,)), 1, 10)
            data, stat = zk.get(paths[-1])
            assert json.loads(data)["leader"] == 3 and stat.version == 2, (data, stat)
        finally:
            zk.stop()
            zk.close()
    finally:
        zkc.stop()
    return {"partitions": len(paths), "layout_s": layout_s, "pipelined_s": pipelined, "window10_s": windowed}


async def workload_c(args, out):
    ours: dict = {}
    await bc.workload_b(args, ours)
    b = ours["b"]
    zk = await asyncio.to_thread(zookeeper_side, b["led_by_fenced"])
    r1, r2 = zk["pipelined_s"] / b["fence_commit_s"], zk["window10_s"] / b["fence_commit_s"]
    print(f"(c) leadership move of {b['led_by_fenced']:,} partitions: kraft {b['fence_commit_s'] * 1000:.0f} ms "
          f"(fence decision -> all PartitionChangeRecords committed); ZooKeeper 3.8 x3 + kazoo, one conditional "
          f"setData per partition: {zk['pipelined_s'] * 1000:.0f} ms all pipelined ({r1:.1f}x ours), "
          f"{zk['window10_s'] * 1000:.0f} ms at 10 in flight as Kafka's default ({r2:.1f}x ours)", flush=True)
    out["c"] = {"kraft": b, "zookeeper": zk, "zk_pipelined_over_kraft": r1, "zk_window10_over_kraft": r2}


# --- (d) failover -------------------------------------------------------------------------------


async def _active(cluster) -> int | None:
    for i in cluster.running():
        g = await asyncio.to_thread(bc.gauges, cluster, i)
        if g.get("active_controller_count") == 1:
            return i
    return None


async def workload_d(args, out):
    with tempfile.TemporaryDirectory() as d:
        cluster = LocalCluster(d, 3, metrics=True).create()  # default timeouts
        cluster.start()
        client = ControllerClient([cluster.address(i) for i in cluster.ids])
        brokers = []
        answers: list = []  # (monotonic time answered, name, error code)
        stop = asyncio.Event()
        try:
            brokers = await bc.start_brokers(cluster, client)

            async def worker(w):
                n = 0
                while not stop.is_set():
                    name = f"f{w:02d}-{n:06d}"
                    n += 1
                    try:
                        resp = await client.create_topics([(name, args.failover_partitions, 3)], deadline_s=30)
                    except (NoControllerError, KraftError):
                        continue
                    answers.append((time.monotonic(), name, resp.topics[0].error_code))

            tasks = [asyncio.get_running_loop().create_task(worker(w)) for w in range(args.workers)]
            await asyncio.sleep(args.warmup)
            victim = await _active(cluster)
            assert victim is not None, "no active controller"
            before = len(answers)
            killed = time.monotonic()
            await asyncio.to_thread(cluster.kill, victim)
            dead = time.monotonic()  # the victim has exited: any later answer is another node's
            while not any(t > dead and e == 0 for t, _, e in answers[before:]):
                if time.monotonic() - killed > 60:
                    raise TimeoutError("no CreateTopics answered within 60 s of the kill")
                await asyncio.sleep(0.005)
            recovered = min(t for t, _, e in answers[before:] if t > dead and e == 0) - killed
            await asyncio.sleep(args.after)
            stop.set()
            await asyncio.gather(*tasks)
            acked = [n for _, n, e in answers if e == 0]
            missing = await _missing(client, acked)
            new_active = await _active(cluster)
            print(f"(d) failover: SIGKILL of active controller {victim} under CreateTopics load "
                  f"({args.workers} in flight): next CreateTopics answered {recovered * 1000:.0f} ms later "
                  f"(new active: {new_active}); acknowledged topics {len(acked):,}, lost {len(missing)}",
                  flush=True)
            out["d"] = {"victim": victim, "new_active": new_active, "recovered_s": recovered,
                        "acknowledged": len(acked), "lost": missing[:20], "lost_count": len(missing),
                        "answers": len(answers)}
        finally:
            stop.set()
            for b in brokers:
                await b.stop()
            await client.close()
            cluster.close()


async def _missing(client, names) -> list[str]:
    """Acknowledged topic names the controller does not know (validate-only CreateTopics)."""
    T = CreateTopicsRequest.Topic
    missing = []
    for i in range(0, len(names), 500):
        chunk = names[i:i + 500]
        req = CreateTopicsRequest(topics=[T(name=n, num_partitions=1, replication_factor=1) for n in chunk],
                                  timeout_ms=30000, validate_only=True)
        resp = await client.call(req, deadline_s=30)
        missing += [t.name for t in resp.topics if t.error_code != ErrorCode.TOPIC_ALREADY_EXISTS]
    return missing


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="c,d")
    ap.add_argument("--fence-leaders", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=100, help="(c) partitions per topic on our side")
    ap.add_argument("--per-request", type=int, default=50)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--failover-partitions", type=int, default=10)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--after", type=float, default=3.0)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    out = {"args": vars(args)}
    if "c" in args.only:
        asyncio.run(workload_c(args, out))
    if "d" in args.only:
        asyncio.run(workload_d(args, out))
    path = args.json or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                     f"bench_controller_moves-{time.strftime('%Y-%m-%d')}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
