"""Start-up of a cluster whose nodes hold many partition replicas: how long after a clean
shutdown (SIGTERM to every node) and after a power-loss-like SIGKILL of every node until
each broker is unfenced and the cluster serves again.

    PYTHONPATH=$PWD python bench/bench_restart.py                       # 2,500 topics x 4, RF 3
    PYTHONPATH=$PWD python bench/bench_restart.py --topics 250 --rounds 1   # a quick look

3 combined nodes (``broker,controller``, Kafka's defaults) on loopback; ``--topics`` x
``--partitions`` partitions with RF 3, so every node holds topics x partitions replicas
(10,000 by default), each with ``--records`` acknowledged records. Each round stops every
node (SIGTERM: controlled shutdown, the clean-shutdown marker; or SIGKILL of all at once),
starts them again, and measures from the start:
  * per node, from its own log: partition logs opened, metadata caught up (first image
    published), unfenced (RECOVERY -> RUNNING);
  * the cluster serving: every broker unfenced in Metadata, every partition led, and an
    acks=all write answered by each broker as leader.
Anchor in the same run: the time to open one node's partition logs in this process
(``PartitionLogs.open_all``) after the same kind of stop, so the ratio says how much of a
restart is the logs and how much the quorum, the catch-up and the registration.
Not a test: nothing asserts a time. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

try:
    import kraft  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_peers import interpreter  # noqa: E402

from kraft.cli.local_cluster import LocalCluster, wait_for  # noqa: E402

_QUIET = logging.getLogger("bench-restart-rdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
MARKS = {
    "logs_opened": re.compile(r"partition logs opened after"),
    "caught_up": re.compile(r"caught up with the metadata log at offset"),
    "unfenced": re.compile(r"RECOVERY -> RUNNING"),
}
_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def _stamp(line: str) -> float | None:
    m = _STAMP.match(line)
    if not m:
        return None
    return datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def node_marks(cluster: LocalCluster, node: int, since_offset: int, started: float) -> dict:
    """Seconds from ``started`` to each mark's first line written after ``since_offset``."""
    with open(cluster.log_path(node), "rb") as f:
        f.seek(since_offset)
        text = f.read().decode("utf-8", "replace")
    out = {}
    for line in text.splitlines():
        for name, pattern in MARKS.items():
            if name not in out and pattern.search(line):
                t = _stamp(line)
                if t is not None:
                    out[name] = round(t - started, 2)
    return out


class Bench:
    def __init__(self, a, directory: str):
        from confluent_kafka.admin import AdminClient

        self.a = a
        self.cluster = LocalCluster(directory, 3, combined=True).create()
        self.admin_of = lambda: AdminClient({"bootstrap.servers": self.cluster.broker_bootstrap, "logger": _QUIET})

    def create(self) -> float:
        from confluent_kafka.admin import NewTopic

        t0 = time.monotonic()
        admin = self.admin_of()
        todo = [f"t{i:05d}" for i in range(self.a.topics)]
        while todo:  # in steps, each led everywhere before the next: setting up, not measured
            step, todo = todo[:self.a.create_step], todo[self.a.create_step:]
            while step:
                futures = admin.create_topics([NewTopic(n, self.a.partitions, 3) for n in step],
                                              operation_timeout=120)
                failed = []
                for name, fut in futures.items():
                    try:
                        fut.result(300)
                    except Exception as e:  # a retry of a request whose first attempt was applied
                        if "TOPIC_ALREADY_EXISTS" not in str(e):
                            failed.append(name)
                step = failed
                if failed:
                    time.sleep(2)
            assert wait_for(self.led, 300, 0.5), "new partitions were not all led"
        return time.monotonic() - t0

    def led(self) -> bool:
        try:
            md = self.admin_of().list_topics(timeout=10)
        except Exception:
            return False
        return len(md.brokers) == 3 and all(p.leader >= 0 for t in md.topics.values() for p in t.partitions.values())

    def fill(self) -> int:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.cluster.broker_bootstrap, "acks": "all", "linger.ms": 20,
                             "queue.buffering.max.messages": 1_000_000, "logger": _QUIET})
        errors = []
        for i in range(self.a.topics):
            for p in range(self.a.partitions):
                for r in range(self.a.records):
                    producer.produce(f"t{i:05d}", value=b"r%d" % r, partition=p,
                                     on_delivery=lambda e, m: errors.append(e) if e else None)
            producer.poll(0)
        assert producer.flush(300) == 0 and not errors, errors[:3]
        return self.a.topics * self.a.partitions * self.a.records

    def serving(self) -> bool:
        """Every broker in Metadata, every partition led, an acks=all write answered by every
        broker that leads a partition."""
        from confluent_kafka import Producer

        try:
            md = self.admin_of().list_topics(timeout=5)
        except Exception:
            return False
        if sorted(md.brokers) != sorted(self.cluster.broker_ids):
            return False
        led: dict[int, tuple[str, int]] = {}
        count = 0
        for t in md.topics.values():
            if t.topic.startswith("__"):
                continue
            for p in t.partitions.values():
                if p.leader < 0:
                    return False
                led.setdefault(p.leader, (t.topic, p.id))
                count += 1
        if count < self.a.topics * self.a.partitions:
            return False  # (leadership stays where a controlled shutdown moved it: not every broker leads)
        producer = Producer({"bootstrap.servers": self.cluster.broker_bootstrap, "acks": "all",
                             "message.timeout.ms": 5000, "logger": _QUIET})
        errors = []
        for topic, p in led.values():
            producer.produce(topic, value=b"probe", partition=p, on_delivery=lambda e, m: errors.append(e) if e else None)
        return producer.flush(10) == 0 and not errors

    def registered(self) -> bool:
        try:
            return len(self.admin_of().list_topics(timeout=5).brokers) == 3
        except Exception:
            return False

    def healthy(self) -> bool:
        try:
            md = self.admin_of().list_topics(timeout=5)
        except Exception:
            return False
        return all(len(p.isrs) == 3 for t in md.topics.values() for p in t.partitions.values())

    def restart(self, kind: str) -> dict:
        cluster = self.cluster
        assert wait_for(self.healthy, 300, 1), "the ISR never became full before the stop"
        t0 = time.monotonic()
        if kind == "sigterm":
            codes = cluster.stop(timeout=120)
            assert set(codes.values()) == {0}, codes
        else:
            cluster._expected_exit.update(cluster.ids)
            for i in cluster.ids:
                cluster.procs[i].send_signal(signal.SIGKILL)
            for i in cluster.ids:
                cluster.procs[i].wait()
        stop_s = time.monotonic() - t0
        anchor_s = self.anchor(kind)
        offsets = {i: os.path.getsize(cluster.log_path(i)) for i in cluster.ids}
        started = time.time()
        t0 = time.monotonic()
        cluster.start()
        ok = wait_for(self.serving, self.a.timeout, 0.5)
        serving_s = time.monotonic() - t0
        nodes = {i: node_marks(cluster, i, offsets[i], started) for i in cluster.ids}
        return {"kind": kind, "stop_s": round(stop_s, 2), "serving_s": round(serving_s, 2) if ok else None,
                "nodes": nodes, "anchor_open_logs_s": anchor_s,
                "max_unfenced_s": max((n.get("unfenced", float("inf")) for n in nodes.values()), default=None)}

    def anchor(self, kind: str) -> float:
        """Open a copy of node 1's partition logs in this process, as they were left by the
        stop (the copy keeps the marker, or its absence)."""
        from kraft.broker.partition_logs import PartitionLogs
        from kraft.config import NodeConfig, load_properties
        from kraft.log import LogConfig

        src = self.cluster.partition_dir(1)
        copy = src + ".anchor"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(src, copy)
        cfg = NodeConfig.from_properties(load_properties(self.cluster.config_path(1)))
        logs = PartitionLogs([copy], LogConfig(segment_bytes=cfg.values["log.segment.bytes"], max_batch_bytes=None))
        t0 = time.monotonic()
        logs.open_all(threads=cfg.values["num.recovery.threads.per.data.dir"])
        took = time.monotonic() - t0
        logs.close()
        shutil.rmtree(copy, ignore_errors=True)
        os.sync()
        return round(took, 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=2500)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--records", type=int, default=2, help="acknowledged records per partition")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of (SIGTERM restart, SIGKILL restart)")
    ap.add_argument("--create-step", type=int, default=50, help="topics per CreateTopics while setting up")
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--dir")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    directory = a.dir or tempfile.mkdtemp(prefix="bench-restart-")
    bench = Bench(a, directory)
    bench.cluster.start()
    results = {"interpreter": interpreter(), "topics": a.topics, "partitions": a.partitions,
               "replicas_per_node": a.topics * a.partitions, "records_per_partition": a.records, "rounds": []}
    try:
        assert wait_for(bench.registered, 120, 1), "the cluster did not come up"
        results["create_s"] = round(bench.create(), 1)
        results["records"] = bench.fill()
        print(f"{a.topics * a.partitions} partitions (RF 3) created in {results['create_s']} s; "
              f"{results['records']} records acknowledged", flush=True)
        for _ in range(a.rounds):
            for kind in ("sigterm", "sigkill"):
                r = bench.restart(kind)
                results["rounds"].append(r)
                print(json.dumps(r), flush=True)
    finally:
        bench.cluster.close()
    print(markdown(results))
    path = a.json or os.path.join(os.path.dirname(__file__), "results",
                                  f"bench_restart-{datetime.date.today().isoformat()}.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    print(f"\nwritten to {path}")
    if not a.dir:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


def markdown(results: dict) -> str:
    lines = [f"Restart of 3 combined nodes, {results['replicas_per_node']:,} partition replicas each "
             f"({results['topics']:,} topics x {results['partitions']}, RF 3, {results['records_per_partition']} "
             f"records each); {results['interpreter']['describe']}",
             "",
             "| stop | logs opened (s, slowest node) | caught up | unfenced | cluster serving | anchor: open one node's logs in-process |",
             "|---|---|---|---|---|---|"]
    for r in results["rounds"]:
        worst = {k: max((n.get(k, float("nan")) for n in r["nodes"].values())) for k in MARKS}
        lines.append(f"| {r['kind']} | {worst['logs_opened']} | {worst['caught_up']} | {worst['unfenced']} | "
                     f"{r['serving_s']} | {r['anchor_open_logs_s']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
