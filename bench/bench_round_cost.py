"""What a replication round costs as a broker holds more partitions: acks=all writes of one
100-byte record at a time (confluent-kafka, ``linger.ms=0``, each flushed) into one RF-3
partition on 3 combined nodes, first with nothing else in the cluster (the anchor), then
beside ``--idle`` more RF-3 partitions that nobody writes, in the same run.

    PYTHONPATH=$PWD python bench/bench_round_cost.py [--idle 1000] [--seconds 5]

Every follower's fetch session toward a leader holds all the partitions they share (a third of
the idle ones here), so a round that reads or builds every partition of the session costs in
proportion to the partitions held, not to the data moved: the ratio idle / anchor of latency
and of server CPU per write shows it (1.0: a round costs only what changed). Server CPU is
user + system of the three server processes from /proc over the timed window.
Not a test: nothing asserts a time. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from confluent_kafka import KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench_peers import write_results  # noqa: E402

from kraft.cli.local_cluster import LocalCluster, wait_for  # noqa: E402


def server_cpu_s(pids) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def measure(bootstrap: str, topic: str, seconds: float, pids) -> dict:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 0})
    value = b"x" * 100
    for _ in range(100):  # warm: metadata, connections, the follower sessions
        p.produce(topic, value)
        p.flush(10)
    lat = []
    cpu0, t0 = server_cpu_s(pids), time.monotonic()
    while time.monotonic() - t0 < seconds:
        t = time.perf_counter()
        p.produce(topic, value)
        if p.flush(10):
            raise RuntimeError("a write was not acknowledged within 10 s")
        lat.append(time.perf_counter() - t)
    cpu = server_cpu_s(pids) - cpu0
    lat.sort()
    return {"writes_per_s": len(lat) / seconds, "p50_ms": lat[len(lat) // 2] * 1000,
            "p99_ms": lat[int(len(lat) * 0.99)] * 1000, "server_cpu_us_per_write": cpu / len(lat) * 1e6}


def _brokers(admin) -> int:
    try:
        return len(admin.list_topics(timeout=2).brokers)
    except KafkaException:
        return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=int, default=1000, help="RF-3 partitions nobody writes, beside the written one")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    cluster = LocalCluster(tempfile.mkdtemp(prefix="bench-round-"), 3, combined=True).create()
    cluster.start()
    result = {"idle_partitions": args.idle, "seconds": args.seconds, "machine_cpus": os.cpu_count()}
    try:
        pids = [proc.pid for proc in cluster.procs.values()]
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, "log_level": 0})
        assert wait_for(lambda: _brokers(admin) == 3, 60, 0.3)
        for f in admin.create_topics([NewTopic("hot", 1, 3)]).values():
            f.result(60)
        result["anchor"] = measure(cluster.broker_bootstrap, "hot", args.seconds, pids)
        for f in admin.create_topics([NewTopic("idle", args.idle, 3)]).values():
            f.result(120)
        time.sleep(3)  # every follower has opened its session over the new partitions
        result["beside_idle"] = measure(cluster.broker_bootstrap, "hot", args.seconds, pids)
    finally:
        cluster.close()
    a, b = result["anchor"], result["beside_idle"]
    result["ratio"] = {k: b[k] / a[k] for k in a}
    print(f"{'':28} {'writes/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'server CPU µs/write':>20}")
    for name, r in (("alone (anchor)", a), (f"beside {args.idle} idle partitions", b), ("ratio", result["ratio"])):
        print(f"{name:28} {r['writes_per_s']:9.2f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} "
              f"{r['server_cpu_us_per_write']:20.2f}")
    print("wrote", write_results("round_cost", result))


if __name__ == "__main__":
    main()
