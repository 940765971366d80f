"""How long a classic group of confluent-kafka consumers takes to be stable: ``--consumers``
members over a ``--partitions`` topic on 3 combined nodes (``group.initial.rebalance.delay.ms=0``),
members joining one after another; the time from the last member's ``subscribe()`` until the
assignments of all of them cover every partition exactly once.

    PYTHONPATH=$PWD python bench/bench_group_rebalance.py --consumers 10 --partitions 100

Then the KIP-848 consumer protocol (``group.protocol=consumer``): the same members join one
after another, each once the previous one holds partitions; for each, the time from its
``subscribe()`` until it holds its first partitions (p50 and max), then the time until the group
is balanced (every partition held once, no member with two more than another).

Not a test: nothing asserts a time. Prints a line per strategy and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from confluent_kafka import Consumer, KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench_peers import write_results  # noqa: E402

from kraft.cli.local_cluster import LocalCluster, wait_for  # noqa: E402


def brokers(admin) -> int:
    try:
        return len(admin.list_topics(timeout=2).brokers)
    except KafkaException:
        return 0


def settle(bootstrap: str, topic: str, n: int, partitions: int, strategy: str, group: str) -> float:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "partition.assignment.strategy": strategy,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 250, "log_level": 0}
    consumers = []
    try:
        for _ in range(n):
            c = Consumer(conf)
            c.subscribe([topic])
            consumers.append(c)
            c.poll(0.05)
        last = time.monotonic()
        while time.monotonic() - last < 60:
            for c in consumers:
                c.poll(0.01)
            parts = [tp.partition for c in consumers for tp in c.assignment()]
            if len(parts) == partitions and len(set(parts)) == partitions and all(c.assignment() for c in consumers):
                return time.monotonic() - last
        return float("nan")
    finally:
        for c in consumers:
            c.close()


def first_assignments(bootstrap: str, topic: str, n: int, partitions: int, group: str) -> dict:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer", "log_level": 0}
    consumers, firsts = [], []
    try:
        for _ in range(n):
            c = Consumer(conf)
            began = time.monotonic()
            c.subscribe([topic])
            consumers.append(c)
            while not c.assignment() and time.monotonic() - began < 30:
                for other in consumers:
                    other.poll(0.005)
            firsts.append(time.monotonic() - began if c.assignment() else float("nan"))
        last = time.monotonic()
        balanced = float("nan")
        while time.monotonic() - last < 60:
            for c in consumers:
                c.poll(0.01)
            sizes = [len(c.assignment()) for c in consumers]
            parts = {tp.partition for c in consumers for tp in c.assignment()}
            if sum(sizes) == partitions and len(parts) == partitions and max(sizes) - min(sizes) <= 1:
                balanced = time.monotonic() - last
                break
        firsts.sort()
        return {"first_assignment_s": firsts, "first_assignment_p50_s": firsts[len(firsts) // 2],
                "first_assignment_max_s": firsts[-1], "balanced_after_last_s": balanced}
    finally:
        for c in consumers:
            c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--consumers", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--protocols", default="classic,consumer", help="classic, consumer or both (comma-separated)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a node setting (repeatable)")
    args = ap.parse_args()
    overrides = {"group.initial.rebalance.delay.ms": "0", **dict(kv.split("=", 1) for kv in args.set)}
    cluster = LocalCluster(tempfile.mkdtemp(prefix="bench-rebalance-"), 3, combined=True,
                           overrides=overrides).create()
    cluster.start()
    result = {"consumers": args.consumers, "partitions": args.partitions, "machine_cpus": os.cpu_count(),
              "settings": overrides, "python": sys.version.split()[0]}
    try:
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, "log_level": 0})
        assert wait_for(lambda: brokers(admin) == 3, 60, 0.3)
        for f in admin.create_topics([NewTopic("rebalance", args.partitions, 3)]).values():
            f.result()
        for strategy in ("range", "cooperative-sticky") if "classic" in args.protocols else ():
            t = settle(cluster.broker_bootstrap, "rebalance", args.consumers, args.partitions, strategy,
                       f"g-{strategy}")
            result[strategy] = t
            print(f"{args.consumers} consumers, {args.partitions} partitions, {strategy}: stable {t:.2f} s after "
                  f"the last subscribe()")
        if "consumer" in args.protocols:
            r = first_assignments(cluster.broker_bootstrap, "rebalance", args.consumers, args.partitions,
                                  "g-consumer")
            result["consumer_protocol"] = r
            print(f"{args.consumers} consumers, {args.partitions} partitions, group.protocol=consumer: first "
                  f"assignment p50 {r['first_assignment_p50_s'] * 1000:.0f} ms, "
                  f"max {r['first_assignment_max_s'] * 1000:.0f} ms; balanced {r['balanced_after_last_s']:.2f} s "
                  f"after the last first assignment")
    finally:
        cluster.close()
    print("wrote", write_results("group_rebalance", result))


if __name__ == "__main__":
    main()
