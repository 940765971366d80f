"""Leader failover of a broker leading 1,000 partitions (RF 3), seen by a real client.

    PYTHONPATH=$PWD python bench/bench_failover_partitions.py [--partitions 1000] [--session-ms 3000]
        [--heartbeat-ms 500] [--interval 2.0]

Three combined ``kraft server start`` nodes (``LocalCluster``). Brokers A and B are the two
nodes that are not the active controller; one topic of ``--partitions`` partitions, every
replica list ``[A, B, C]``, so A leads them all. A confluent-kafka producer (acks=all, linger
5 ms) sends one record to every partition each ``--interval`` s for the whole run and follows
Metadata as librdkafka does (retries, leader changes).

(1) SIGKILL A (``broker.session.timeout.ms`` = ``--session-ms``). Figures, from the kill:
    * clients: when every partition has acknowledged (acks=all) a record produced after the
      kill (p50 and max over the partitions);
    * brokers' view: when no surviving broker's Metadata answer names A as a leader;
    * controller's view: the append time (batch timestamp in ``__cluster_metadata``) of the
      FenceBrokerRecord for A and of the last PartitionChangeRecord that moved a leader off A.
(2) Restart A, wait until it is back in every ISR and one broker (B, or A after the
    preferred-leader rebalance, every 5 s here) leads everything; SIGTERM it (a controlled
    shutdown). Figures: time until no Metadata answer names B, B's exit code and
    time to exit, delivery errors the client saw (the target: none), librdkafka's internal
    retries, and the longest time any partition went without an acknowledgement.

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from kraft.cli.local_cluster import LocalCluster, wait_for  # noqa: E402
from kraft.client.node_client import NodeClient  # noqa: E402
from kraft.client.quorum import QuorumClient  # noqa: E402
from kraft.log.replicated_log import METADATA_DIR  # noqa: E402
from kraft.metadata.records import FenceBrokerRecord, PartitionChangeRecord  # noqa: E402
from kraft.metadata.serde import decode_record  # noqa: E402
from kraft.protocol import MetadataRequest  # noqa: E402
from kraft.records import iter_batches  # noqa: E402

TOPIC = "failover"


# --- observing ------------------------------------------------------------------------------------


def leaders(address, topic: str):
    """partition -> (leader, isr) in one broker's Metadata answer, or None if it did not answer."""
    async def ask():
        client = NodeClient(*address, client_id="bench-failover", request_timeout_ms=2000)
        try:
            return await client.request(MetadataRequest(topics=[MetadataRequest.Topic(name=topic)]), 9)
        finally:
            await client.close()
    try:
        md = asyncio.run(ask())
    except Exception:
        return None
    for t in md.topics:
        if t.name == topic and t.error_code == 0:
            return {p.partition_index: (p.leader_id, sorted(p.isr_nodes)) for p in t.partitions}
    return None


def active_controller(cluster) -> int:
    async def ask():
        client = QuorumClient([cluster.address(i) for i in cluster.controller_ids])
        try:
            return await client.describe(30)
        finally:
            await client.close()
    return asyncio.run(ask()).leader_id


def metadata_events(cluster, node: int, since_ms: int, victim: int):
    """(fence append ms, append ms of the last leader move before it) from ``node``'s
    metadata log, for batches stamped at or after ``since_ms``. Read from the segment files of a running node
    (only complete batches are decoded)."""
    fence = moved = None
    files = sorted(glob.glob(os.path.join(cluster.data_dir(node), METADATA_DIR, "*.log")))
    for name in files:
        with open(name, "rb") as f:
            data = f.read()
        try:
            batches = list(iter_batches(data))
        except Exception:  # a batch being written at the end
            batches = []
            pos = 0
            while True:
                try:
                    b = next(iter_batches(data, pos))
                except Exception:
                    break
                batches.append(b)
                pos += b.size
        for b in batches:
            if b.max_timestamp < since_ms or b.is_control:
                continue
            for value in b.values():
                rec = decode_record(value).record
                if isinstance(rec, FenceBrokerRecord) and rec.id == victim:
                    return b.max_timestamp, moved  # the moves of its fencing come before it
                if isinstance(rec, PartitionChangeRecord) and rec.leader not in (-2, victim):
                    moved = b.max_timestamp
    return fence, moved


class Prober:
    """One record to every partition each ``interval`` s from a confluent-kafka producer
    (acks=all), on its own thread; delivery reports are collected per partition."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval: float):
        from confluent_kafka import Producer
        self.topic, self.n, self.interval = topic, partitions, interval
        self.stats = {}
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                  "message.timeout.ms": 120_000, "statistics.interval.ms": 500,
                                  "stats_cb": self._on_stats, "logger": _quiet_logger()})
        self.mark = time.monotonic()
        self.first_after = [None] * partitions  # first ack of a record produced after ``mark``
        self.last_ack = [None] * partitions
        self.max_gap = [0.0] * partitions  # longest time between two acks, since ``mark``
        self.errors: list = []
        self.latency: list = []  # seconds from produce() to the ack, since ``mark``
        self.sent = self.acked = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_stats(self, text: str) -> None:
        data = json.loads(text)
        retries = sum(b.get("txretries", 0) for b in data.get("brokers", {}).values())
        errs = sum(b.get("txerrs", 0) for b in data.get("brokers", {}).values())
        self.stats = {"txretries": retries, "txerrs": errs}

    def set_mark(self) -> float:
        self.mark = time.monotonic()
        self.first_after = [None] * self.n
        self.max_gap = [0.0] * self.n
        self.errors = []
        self.latency = []
        self.last_ack = [self.mark] * self.n
        return self.mark

    def _delivered(self, p: int, sent_at: float):
        def cb(err, msg):
            now = time.monotonic()
            if err is not None:
                self.errors.append((p, str(err), now - self.mark))
                return
            self.acked += 1
            if sent_at >= self.mark:
                self.latency.append(now - sent_at)
            if sent_at >= self.mark and self.first_after[p] is None:
                self.first_after[p] = now
            last = self.last_ack[p]
            if last is not None:
                self.max_gap[p] = max(self.max_gap[p], now - max(last, self.mark))
            self.last_ack[p] = now
        return cb

    def _run(self) -> None:
        value = b"x" * 100
        nxt = time.monotonic()
        while not self.stop.is_set():
            now = time.monotonic()
            for p in range(self.n):
                while True:
                    try:
                        self.producer.produce(self.topic, value, partition=p, on_delivery=self._delivered(p, now))
                        break
                    except BufferError:
                        self.producer.poll(0.01)
                self.sent += 1
            nxt += self.interval
            while True:
                left = nxt - time.monotonic()
                self.producer.poll(max(0.0, min(left, 0.02)))
                if left <= 0:
                    break

    def all_acked_after_mark(self) -> bool:
        return all(t is not None for t in self.first_after)

    def close(self) -> int:
        self.stop.set()
        self.thread.join()
        return self.producer.flush(60)


_LOGGER = None


def _quiet_logger():
    global _LOGGER
    if _LOGGER is None:
        import logging
        _LOGGER = logging.getLogger("bench-rdkafka")
        _LOGGER.addHandler(logging.NullHandler())
        _LOGGER.propagate = False
    return _LOGGER


def wait_view(cluster, nodes, topic: str, ok, timeout: float, interval: float = 0.05):
    """Poll each node's Metadata until ``ok(view)`` holds for all; returns node -> seconds
    (monotonic) when it first held, missing nodes never held."""
    began = time.monotonic()
    seen = {}
    while time.monotonic() - began < timeout and len(seen) < len(nodes):
        for n in nodes:
            if n in seen:
                continue
            view = leaders(cluster.broker_address(n), topic)
            if view is not None and ok(view):
                seen[n] = time.monotonic()
        time.sleep(interval)
    return seen


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


# --- the run --------------------------------------------------------------------------------------


def run(args) -> dict:
    workdir = args.dir or tempfile.mkdtemp(prefix="bench-failover-")
    overrides = {"broker.session.timeout.ms": str(args.session_ms),
                 "broker.heartbeat.interval.ms": str(args.heartbeat_ms),
                 # preferred leaders (A, the first replica) come back within 5 s after a fence
                 "auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "5"}
    cluster = LocalCluster(workdir, 3, combined=True, overrides=overrides).create()
    out: dict = {"args": vars(args)}
    prober = None
    try:
        cluster.start()
        active = active_controller(cluster)
        a, b = [i for i in cluster.ids if i != active]
        c = active
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, "logger": _quiet_logger()})
        wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 60, 0.2)
        n = args.partitions
        for fut in admin.create_topics([NewTopic(TOPIC, num_partitions=n, replica_assignment=[[a, b, c]] * n)],
                                       operation_timeout=60).values():
            fut.result(90)
        full = wait_view(cluster, [a, b, c], TOPIC, lambda v: len(v) == n and all(
            ld == a and len(isr) == 3 for ld, isr in v.values()), 60)
        if len(full) < 3:  # a broker fenced while it made 1,000 logs: the rebalance gives A its leaderships back
            full = wait_view(cluster, [a, b, c], TOPIC, lambda v: len(v) == n and all(
                ld == a and len(isr) == 3 for ld, isr in v.values()), 180)
        assert len(full) == 3, "the topic did not get A as leader with a full ISR everywhere"
        print(f"cluster up: active controller {c}, A={a} leads {n} partitions, B={b}", flush=True)
        prober = Prober(cluster.broker_bootstrap, TOPIC, n, args.interval)
        prober.set_mark()
        assert wait_for(prober.all_acked_after_mark, 60, 0.1), "warm-up: not every partition acknowledged"
        prober.set_mark()
        time.sleep(max(args.settle, 3 * args.interval))
        out["steady"] = {"ack_p50_s": pct(prober.latency, 0.5), "ack_p99_s": pct(prober.latency, 0.99),
                         "acks": len(prober.latency)}
        print("steady state before the kill:", json.dumps(out["steady"]), flush=True)

        # (1) SIGKILL A.
        t0 = prober.set_mark()
        wall0_ms = int(time.time() * 1000)
        cluster.kill(a)
        seen = wait_view(cluster, [b, c], TOPIC, lambda v: len(v) == n and all(ld not in (a, -1) for ld, _ in v.values()),
                         60, 0.02)
        wait_for(prober.all_acked_after_mark, 60, 0.02)
        acks = [t - t0 for t in prober.first_after if t is not None]
        fence_ms, moved_ms = metadata_events(cluster, c, wall0_ms - 1, a)
        out["kill"] = {
            "partitions_acked": len(acks), "ack_all_s": max(acks) if len(acks) == n else None,
            "ack_p50_s": statistics.median(acks) if acks else None,
            "brokers_view_s": {str(k): v - t0 for k, v in seen.items()},
            "controller_fence_s": None if fence_ms is None else (fence_ms - wall0_ms) / 1000,
            "controller_moved_s": None if moved_ms is None else (moved_ms - wall0_ms) / 1000,
            "client_errors": len(prober.errors)}
        print("SIGKILL:", json.dumps(out["kill"]), flush=True)

        # (2) Restart A, wait until it is in every ISR again and one broker leads every
        # partition (B, or A again once the preferred-leader rebalance ran), then SIGTERM it.
        cluster.start(a)
        one = lambda v: len(v) == n and all(len(isr) == 3 for _, isr in v.values()) and len({ld for ld, _ in v.values()}) == 1
        back = wait_view(cluster, [b, c], TOPIC, one, 180)
        assert len(back) == 2, "A did not rejoin every ISR"
        time.sleep(args.settle + 6)  # past one rebalance interval: leadership stays where it is now
        wait_view(cluster, [b, c], TOPIC, one, 60)
        b = next(iter(leaders(cluster.broker_address(c), TOPIC).values()))[0]
        a_or_c = [i for i in cluster.ids if i != b]
        t1 = prober.set_mark()
        retries0 = dict(prober.stats)
        cluster._expected_exit.add(b)
        cluster.procs[b].send_signal(signal.SIGTERM)
        seen = wait_view(cluster, a_or_c, TOPIC, lambda v: len(v) == n and all(ld not in (b, -1) for ld, _ in v.values()),
                         60, 0.02)
        code = cluster.procs[b].wait(120)
        exited = time.monotonic() - t1
        time.sleep(args.after)
        acks = [t - t1 for t in prober.first_after if t is not None]
        out["sigterm"] = {
            "broker": b, "moved_view_s": {str(k): v - t1 for k, v in seen.items()}, "exit_code": code, "exit_s": exited,
            "client_errors": len(prober.errors), "error_examples": prober.errors[:3],
            "librdkafka_retries": prober.stats.get("txretries", 0) - retries0.get("txretries", 0),
            "max_ack_gap_s": max(prober.max_gap), "ack_all_s": max(acks) if len(acks) == n else None}
        print("SIGTERM:", json.dumps(out["sigterm"]), flush=True)
        unflushed = prober.close()
        prober = None
        out["unflushed"] = unflushed
    finally:
        if prober is not None:
            prober.close()
        cluster.close()
        if not args.dir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--session-ms", type=int, default=3000)
    ap.add_argument("--heartbeat-ms", type=int, default=500,
                    help="broker.heartbeat.interval.ms (Kafka's default 2000 is for its 9000 ms session)")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between rounds of one record per partition")
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--after", type=float, default=3.0, help="seconds of producing after B exited")
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    out = run(args)
    k, s = out["kill"], out["sigterm"]
    st = out["steady"]
    print(f"\nbefore: one acks=all record per partition every {args.interval} s, ack latency p50 "
          f"{st['ack_p50_s']:.3f} s p99 {st['ack_p99_s']:.3f} s")
    print(f"SIGKILL of the leader of {args.partitions} partitions (session {args.session_ms} ms, "
          f"heartbeat {args.heartbeat_ms} ms):")
    print(f"  every partition acked a record produced after the kill: {k['ack_all_s']} s "
          f"(p50 {k['ack_p50_s']:.2f} s; target <= 5 s)")
    print(f"  brokers' Metadata without the victim: {k['brokers_view_s']}")
    print(f"  controller: fence appended at {k['controller_fence_s']} s, last leader move at {k['controller_moved_s']} s")
    print(f"SIGTERM (controlled shutdown) of the leader of {args.partitions} partitions:")
    print(f"  Metadata moved: {s['moved_view_s']}, exit code {s['exit_code']} after {s['exit_s']:.2f} s")
    print(f"  client delivery errors: {s['client_errors']} (target 0); librdkafka retries {s['librdkafka_retries']}; "
          f"longest gap between acks of one partition {s['max_ack_gap_s']:.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
