"""What authorization costs a broker on the produce path: broker CPU per record with
StandardAuthorizer and 10,000 ACLs against the same broker without an authorizer, in one run.

    PYTHONPATH=$PWD python bench/bench_authz_produce.py [--records 200000] [--rounds 3]

Two one-node combined clusters run side by side: A without an authorizer (the anchor), B with
``StandardAuthorizer`` and ``--acls`` ACLs for other principals (a tenth of them prefixed) plus
the one that lets the producer in (ALLOW WRITE on the topic prefix ``bench-``, so every check
goes through the ACL index and finds a prefixed match). The producer (confluent-kafka, acks=1,
100-byte values) sends ``--records`` records over 100 partitions (of ``--topics`` topics, 1 by
default: "a Produce to 100 partitions") by explicit partition, so each Produce request carries
batches of up to 100 partitions (one check per topic per request). Both brokers are left to
settle first (under 5% of a CPU for 2 s: B has just written 10,000 ACL records). Rounds
alternate A, B, A, B...; for each, the broker process's CPU time (its threads' /proc schedstat
run time) while the round ran, per record. Prints the median CPU per record of each and B/A. Not a test: writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kraft.cli.local_cluster import LocalCluster, wait_for  # noqa: E402

_SILENT = logging.getLogger("kraft-bench-authz-produce")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False
TOPICS: list = []
VALUE = b"v" * 100


def cpu_s(pid: int) -> float:
    """CPU seconds the process's threads have run (schedstat: nanoseconds, not 10 ms ticks)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total / 1e9


def start(folder: str, authorize: bool) -> LocalCluster:
    overrides = {"controller.quorum.append.linger.ms": "0"}
    if authorize:
        overrides.update({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          "allow.everyone.if.no.acl.found": "true"})
    cluster = LocalCluster(folder, 1, combined=True, overrides=overrides).create()
    cluster.start()
    return cluster


def prepare(cluster: LocalCluster, acls: int) -> None:
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                       ResourcePatternType, ResourceType)
    admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, "logger": _SILENT})

    def created():
        futures = admin.create_topics([NewTopic(t, 100 // len(TOPICS), 1) for t in TOPICS])
        for f in futures.values():
            try:
                f.result(10)
            except Exception as exc:  # noqa: BLE001 (already exists on a retry)
                if "already exists" not in str(exc):
                    return False
        return True
    assert wait_for(created, 60, 0.5), "topics not created"
    if not acls:
        return
    bindings = [AclBinding(ResourceType.TOPIC, "bench-", ResourcePatternType.PREFIXED, "User:ANONYMOUS", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)]
    for i in range(acls):
        prefixed = i % 10 == 0
        bindings.append(AclBinding(ResourceType.TOPIC, f"p{i}-" if prefixed else f"topic-{i}",
                                   ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
                                   f"User:u{i % 100}", "*", AclOperation.READ, AclPermissionType.ALLOW))
    for i in range(0, len(bindings), 1000):
        for f in admin.create_acls(bindings[i:i + 1000]).values():
            f.result(60)


def settle(cluster: LocalCluster, limit_s: float = 120.0) -> float:
    """Wait until the broker uses under 5% of a CPU over 2 s; the seconds waited."""
    pid, start = cluster.procs[1].pid, time.monotonic()
    while time.monotonic() - start < limit_s:
        before = cpu_s(pid)
        time.sleep(2.0)
        if cpu_s(pid) - before < 0.1:
            break
    return time.monotonic() - start


def produce(cluster: LocalCluster, records: int) -> tuple[float, float]:
    """(broker CPU seconds, wall seconds) for ``records`` acknowledged records."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": cluster.broker_bootstrap, "acks": 1, "linger.ms": 5,
                  "batch.num.messages": 10_000, "queue.buffering.max.messages": 1_000_000, "logger": _SILENT})
    p.list_topics(timeout=10)
    acked = [0]

    def done(err, msg):
        if err is None:
            acked[0] += 1
    pid = cluster.procs[1].pid
    cpu0, t0 = cpu_s(pid), time.perf_counter()
    n, per = len(TOPICS), 100 // len(TOPICS)
    for i in range(records):
        while True:
            try:
                p.produce(TOPICS[i % n], VALUE, partition=(i // n) % per, on_delivery=done)
                break
            except BufferError:
                p.poll(0.005)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    cpu1, t1 = cpu_s(pid), time.perf_counter()
    if acked[0] != records:
        raise SystemExit(f"{acked[0]} of {records} acknowledged")
    return cpu1 - cpu0, t1 - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--acls", type=int, default=10_000)
    ap.add_argument("--topics", type=int, default=1, help="the 100 partitions spread over this many topics")
    args = ap.parse_args()
    TOPICS[:] = [f"bench-{i}" for i in range(args.topics)]
    per = {"plain": [], "authorized": []}
    with tempfile.TemporaryDirectory() as folder:
        clusters = {"plain": start(os.path.join(folder, "a"), False),
                    "authorized": start(os.path.join(folder, "b"), True)}
        try:
            prepare(clusters["plain"], 0)
            prepare(clusters["authorized"], args.acls)
            for name, c in clusters.items():
                produce(c, args.records // 10)  # warm-up: connections, page cache, first checks
            settled = {name: settle(c) for name, c in clusters.items()}
            for _ in range(args.rounds):
                for name, c in clusters.items():
                    cpu, wall = produce(c, args.records)
                    per[name].append(cpu / args.records * 1e6)
        finally:
            for c in clusters.values():
                c.close()
    med = {k: statistics.median(v) for k, v in per.items()}
    result = {
        "records": args.records, "rounds": args.rounds, "acls": args.acls + 1, "topics": args.topics,
        "settled_s": settled,
        "broker_cpu_us_per_record": per, "median_us_per_record": med,
        "authorized_over_plain": med["authorized"] / med["plain"],
        "interpreter": sys.version.split()[0], "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "loadavg": os.getloadavg(), "command": "python bench/bench_authz_produce.py " + " ".join(sys.argv[1:]),
    }
    print(f"broker CPU per record, produce to {args.topics} topic(s), 100 partitions: no authorizer {med['plain']:.2f} us, "
          f"StandardAuthorizer with {args.acls + 1:,} ACLs {med['authorized']:.2f} us "
          f"(ratio {result['authorized_over_plain']:.3f}; rounds {per}); load {os.getloadavg()[0]:.1f}")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                       f"bench_authz_produce-{datetime.datetime.now().strftime('%Y%m%dT%H%M%S')}.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
