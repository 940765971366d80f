"""Offset commits and coordinator failover on 3 combined nodes (Kafka's defaults except
``group.initial.rebalance.delay.ms=0``), measured with confluent-kafka clients.

    PYTHONPATH=$PWD python bench/bench_offset_commits.py --clients 8 --seconds 10

Phase 1: ``--clients`` threads, each a confluent-kafka Consumer of its own group (so the
commits spread over the __consumer_offsets partitions and their three leaders) committing
one partition synchronously in a loop (acks=all semantics: the answer waits for the high
watermark); commits/s and latency percentiles. Phase 2: SIGKILL the node coordinating one
group while its client commits, and measure from the kill until a commit succeeds again
(Kafka's target: within its defaults, about the broker session timeout), then check that
the last acknowledged commit before the kill is what the group reads back.
Not a test: nothing asserts a time. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import psutil  # noqa: E402
from confluent_kafka import Consumer, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench_peers import write_results  # noqa: E402

from kraft.cli.local_cluster import LocalCluster, wait_for  # noqa: E402
from kraft.coordinator.group_records import OFFSETS_TOPIC, partition_for  # noqa: E402

TOPIC = "bench-commits"
SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


def client(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "log_level": 0})


def commit_loop(bootstrap, group, partition, stop, out):
    c = client(bootstrap, group)
    lat, n = [], 0
    try:
        while not stop.is_set():
            n += 1
            t = time.perf_counter()
            c.commit(offsets=[TopicPartition(TOPIC, partition, n)], asynchronous=False)
            lat.append(time.perf_counter() - t)
    finally:
        c.close()
    out.append(lat)


def async_commit_loop(bootstrap, group, partition, stop, out, window=64):
    """Asynchronous commits, at most ``window`` unanswered (librdkafka pipelines them on the
    coordinator connection); the latency of each is from its commit() to its callback."""
    lat, sent, inflight = [], {}, [0]

    def done(err, parts):
        inflight[0] -= 1
        if err is None:
            lat.append(time.perf_counter() - sent.pop(parts[0].offset, time.perf_counter()))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, "log_level": 0,
                  "on_commit": done})
    n = 0
    try:
        while not stop.is_set():
            if inflight[0] >= window:
                c.poll(0.001)
                continue
            n += 1
            sent[n] = time.perf_counter()
            inflight[0] += 1
            c.commit(offsets=[TopicPartition(TOPIC, partition, n)], asynchronous=True)
            c.poll(0)
        end = time.monotonic() + 5
        while inflight[0] > 0 and time.monotonic() < end:
            c.poll(0.01)
    finally:
        c.close()
    out.append(lat)


def pct(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--async", dest="asynchronous", action="store_true",
                    help="pipelined asynchronous commits (--window in flight per client) instead of synchronous ones")
    ap.add_argument("--window", type=int, default=64, help="with --async: commits in flight per client at most")
    ap.add_argument("--victim", choices=("any", "controller", "other"), default="any",
                    help="the coordinator killed: of group 'failover' (any), or of a group chosen so that its "
                         "coordinator is (or is not) the active controller")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-commits-")
    cluster = LocalCluster(d, 3, combined=True, overrides=SETTINGS).create()
    cluster.start()
    result = {"clients": args.clients, "seconds": args.seconds, "asynchronous": args.asynchronous,
              "window": args.window if args.asynchronous else 1,
              "machine_cpus": os.cpu_count()}
    try:
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, "log_level": 0})
        assert wait_for(lambda: _brokers(admin) == 3, 60, 0.3)
        for f in admin.create_topics([NewTopic(TOPIC, args.clients, 3)]).values():
            f.result()
        warm = client(cluster.broker_bootstrap, "warm-up")
        assert wait_for(lambda: _try_commit(warm), 60, 0.3), "no coordinator"
        warm.close()
        # Where the groups' coordinators are (Kafka's hash of the group id picks the partition,
        # the controller its leader): an uneven split, or the active controller coordinating
        # more of them, moves the figures from run to run.
        md = admin.list_topics(OFFSETS_TOPIC, timeout=10)
        offsets = md.topics[OFFSETS_TOPIC].partitions
        leaders = [offsets[partition_for(f"bench-{i}", len(offsets))].leader for i in range(args.clients)]
        result["coordinators"] = {str(n): leaders.count(n) for n in sorted(set(leaders))}
        result["active_controller"] = md.controller_id
        stop, out = threading.Event(), []
        loop = functools.partial(async_commit_loop, window=args.window) if args.asynchronous else commit_loop
        threads = [threading.Thread(target=loop, args=(cluster.broker_bootstrap, f"bench-{i}", i, stop, out))
                   for i in range(args.clients)]
        servers = [psutil.Process(p.pid) for p in cluster.procs.values()]
        cpu0 = [_cpu(s) for s in servers], _cpu(psutil.Process())
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join()
        cpu1 = [_cpu(s) for s in servers], _cpu(psutil.Process())
        lat = sorted(x for one in out for x in one)
        result.update(commits=len(lat), commits_per_s=len(lat) / args.seconds, p50_ms=pct(lat, 0.5),
                      p99_ms=pct(lat, 0.99), max_ms=lat[-1] * 1000,
                      server_cpu_s=sum(cpu1[0]) - sum(cpu0[0]), client_cpu_s=cpu1[1] - cpu0[1])
        result["server_cpu_us_per_commit"] = result["server_cpu_s"] / max(1, len(lat)) * 1e6
        mode = f"async (window {args.window})" if args.asynchronous else "sync"
        print(f"{args.clients} clients, {mode} commits: {result['commits_per_s']:.0f}/s, "
              f"p50 {result['p50_ms']:.1f} ms, "
              f"p99 {result['p99_ms']:.1f} ms, max {result['max_ms']:.1f} ms; CPU: servers "
              f"{result['server_cpu_s'] / args.seconds:.2f} cores "
              f"({result['server_cpu_us_per_commit']:.0f} us/commit), "
              f"client process {result['client_cpu_s'] / args.seconds:.2f} cores; groups per coordinator "
              f"{result['coordinators']} (active controller: node {result['active_controller']})")
        # Failover: kill the coordinator of one group, time until its commits succeed again.
        md = admin.list_topics(OFFSETS_TOPIC, timeout=10)
        parts = md.topics[OFFSETS_TOPIC].partitions
        controller = md.controller_id
        group = "failover"
        for k in range(1000):
            if args.victim == "any":
                break
            leader = parts[partition_for(group, len(parts))].leader
            if (leader == controller) == (args.victim == "controller"):
                break
            group = f"failover-{k}"
        c = client(cluster.broker_bootstrap, group)
        last = 0
        for n in range(1, 50):
            c.commit(offsets=[TopicPartition(TOPIC, 0, n)], asynchronous=False)
            last = n
        md = admin.list_topics(OFFSETS_TOPIC, timeout=10).topics[OFFSETS_TOPIC]
        victim = md.partitions[partition_for(group, len(md.partitions))].leader
        killed = time.monotonic()
        cluster.kill(victim)
        n = last
        while True:
            n += 1
            try:
                c.commit(offsets=[TopicPartition(TOPIC, 0, n)], asynchronous=False)
                break
            except KafkaException:
                time.sleep(0.05)
        recovered = time.monotonic() - killed
        got = c.committed([TopicPartition(TOPIC, 0)], timeout=10)[0].offset
        c.close()
        result.update(failover_s=recovered, failover_last_acked_before_kill=last, failover_read_back=got,
                      failover_next_commit=n, failover_victim_was_controller=victim == controller)
        role = "also the active controller" if victim == controller else "not the active controller"
        print(f"coordinator (node {victim}, {role}) SIGKILLed: commits succeed again after {recovered:.2f} s; "
              f"read back {got} (last acknowledged {n})")
    finally:
        cluster.close()
    print("wrote", write_results("offset_commits", result))


def _brokers(admin) -> int:
    try:
        return len(admin.list_topics(timeout=2).brokers)
    except KafkaException:
        return 0


def _cpu(p) -> float:
    t = p.cpu_times()
    return t.user + t.system


def _try_commit(c) -> bool:
    try:
        c.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
        return True
    except KafkaException:
        return False


if __name__ == "__main__":
    main()
