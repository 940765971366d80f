"""Produce throughput and latency with replication: RF 3 acks=all beside acks=1 on the same
cluster, beside one broker without replication, all in one run.

    PYTHONPATH=$PWD python bench/bench_replication.py [--records 1000000] [--partitions 1] [--rounds 2]

Producer: confluent-kafka (librdkafka), 100-byte records, lz4, batch.size 16 KB, linger 5 ms,
``produce_batch`` in chunks of 10,000 (as ``bench_broker.py``: the Python loop is not what
is measured). One record in ``--sample`` carries a delivery callback; its latency is the
delivery time minus its CreateTime (set by librdkafka when it was queued; 1 ms resolution).

  * raw: one broker process with a static image (``bench_broker.start_broker``), one
    partition, acks=1 — the brokers issue's single-broker figure, measured here again.
  * cluster: three combined ``kraft server start`` nodes (``LocalCluster``), a topic of
    ``--partitions`` partitions, RF 3, ``min.insync.replicas=2``; acks=1 and acks=all runs
    alternate ``--rounds`` times on the same topic.

Two figures per configuration: flood (records queued as fast as librdkafka takes them:
records/s and MB/s; its latency is mostly time queued in the client, as in Kafka's
producer-perf-test with ``--throughput -1``) and paced (``--rate`` records/s, well below every
configuration's flood rate: p50/p99 produce latency without client queueing). The target
"p99 <= 3x the acks=1 p99" is read on the paced figures.

``--producers N`` floods from N producer processes at once (each its share of ``--records``
over every partition; the rate of the paced runs shared among them); MB/s is over the wall
time from the first to the last producer's end. The cluster's nodes tick their event-loop
watchdog every 5 ms (``KRAFT_LOOP_WATCHDOG_MS``), and each flood prints, per node, the longest
tick lateness seen during it and the longest own stall (lateness less the loop thread's wait
for a CPU), as histogram bucket bounds read from the nodes' metrics before and after.
Not a test: nothing asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bench_broker import cpu_seconds, start_broker  # noqa: E402

from kraft.cli.local_cluster import LocalCluster, wait_for  # noqa: E402

RECORD = 100
CHUNK = 10_000
TOPIC = "replicated"


def _quiet():
    import logging
    lg = logging.getLogger("bench-rdkafka")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


def producer(bootstrap: str, acks: str):
    from confluent_kafka import Producer
    return Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "batch.size": 16384, "acks": acks,
                     "linger.ms": 5, "enable.idempotence": False, "queue.buffering.max.messages": 1_000_000,
                     "queue.buffering.max.kbytes": 1 << 20, "logger": _quiet()})


def run_producer(bootstrap: str, topic: str, partitions: int, acks: str, n: int, sample: int,
                 rate: float | None = None, barrier=None, first_partition: int = 0) -> dict:
    """Send ``n`` records (flood when ``rate`` is None, else ``rate`` records/s in 10 ms
    steps) over ``partitions`` partitions; returns seconds, records/s, MB/s, latencies.
    ``barrier``: wait there once connected (several producer processes start together)."""
    p = producer(bootstrap, acks)
    p.list_topics(topic, timeout=10)
    if barrier is not None:
        barrier.wait(60)
    lat, errors = [], []

    def on_sampled(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            lat.append(time.time() * 1000 - msg.timestamp()[1])
    value = os.urandom(RECORD // 2).hex().encode()
    plain = {"value": value}
    chunk = [({"value": value, "callback": on_sampled} if i % sample == 0 else plain) for i in range(CHUNK)]
    step = None if rate is None else max(1, int(rate / 100))
    began, began_at, cpu0 = time.perf_counter(), time.monotonic(), time.process_time()
    left, part = n, first_partition % partitions
    while left:
        size = min(left, CHUNK if step is None else step)
        msgs = chunk[:size]
        try:
            queued = p.produce_batch(topic, msgs, partition=part)
        except BufferError:
            queued = 0
        left -= queued
        part = (part + 1) % partitions
        if step is not None:
            target = began + (n - left) / rate
            while time.perf_counter() < target:
                p.poll(max(0.0, min(0.005, target - time.perf_counter())))
        elif queued < len(msgs):
            p.poll(0.005)
        else:
            p.poll(0)
    unflushed = p.flush(300)
    elapsed = time.perf_counter() - began
    lat.sort()
    return {"records": n, "seconds": elapsed, "records_s": n / elapsed, "mb_s": n * RECORD / elapsed / 1e6,
            "p50_ms": _pct(lat, 0.50), "p99_ms": _pct(lat, 0.99), "samples": len(lat), "errors": len(errors),
            "unflushed": unflushed, "began_at": began_at, "ended_at": time.monotonic(), "latencies": lat,
            "producer_cpu_s": time.process_time() - cpu0}


def _producer_process(queue, barrier, args) -> None:
    try:
        queue.put(run_producer(*args, barrier=barrier))
    except BaseException as exc:  # the parent reports it; a dead child must not hang the barrier
        queue.put({"error": repr(exc)})


def run_producers(count: int, bootstrap: str, topic: str, partitions: int, acks: str, n: int, sample: int,
                  rate: float | None = None) -> dict:
    """``count`` producer processes at once, each ``n / count`` records (and ``rate / count``);
    one producer runs in this process."""
    if count == 1:
        out = run_producer(bootstrap, topic, partitions, acks, n, sample, rate)
        out.pop("latencies")
        return out
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    queue, barrier = ctx.Queue(), ctx.Barrier(count)
    share = n // count
    procs = [ctx.Process(target=_producer_process, args=(queue, barrier, (
        bootstrap, topic, partitions, acks, share, sample, None if rate is None else rate / count)))
        for _ in range(count)]
    for proc in procs:
        proc.start()
    parts = [queue.get(timeout=900) for _ in procs]
    for proc in procs:
        proc.join(60)
    failed = [x["error"] for x in parts if "error" in x]
    if failed:
        raise RuntimeError(f"a producer process failed: {failed[0]}")
    lat = sorted(v for x in parts for v in x["latencies"])
    wall = max(x["ended_at"] for x in parts) - min(x["began_at"] for x in parts)
    total = share * count
    return {"records": total, "seconds": wall, "records_s": total / wall, "mb_s": total * RECORD / wall / 1e6,
            "p50_ms": _pct(lat, 0.50), "p99_ms": _pct(lat, 0.99), "samples": len(lat),
            "errors": sum(x["errors"] for x in parts), "unflushed": sum(x["unflushed"] for x in parts),
            "producers": count, "per_producer_mb_s": [round(x["mb_s"], 1) for x in parts],
            "producer_cpu_s": sum(x["producer_cpu_s"] for x in parts)}


def _pct(s, q):
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def cluster_cpu(cluster) -> dict:
    return {i: cpu_seconds(p.pid) for i, p in cluster.procs.items() if p.poll() is None}


STALL_METRICS = ("kraft_event_loop_lag_ms", "kraft_event_loop_own_stall_ms")


def stall_buckets(ports: dict) -> dict:
    """node -> metric -> {upper bound: cumulative count} from each node's metrics endpoint."""
    import urllib.request
    out = {}
    for node, port in ports.items():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            text = r.read().decode()
        per = out[node] = {m: {} for m in STALL_METRICS}
        for line in text.splitlines():
            for m in STALL_METRICS:
                if line.startswith(m + "_bucket{"):
                    le = line.split('le="', 1)[1].split('"', 1)[0]
                    per[m][float(le)] = int(float(line.rsplit(" ", 1)[1]))
    return out


def longest(before: dict, after: dict) -> dict:
    """node -> metric -> the upper bound of the highest bucket that gained an observation
    between the two reads (a stall is at most that long), or 0 when none was seen."""
    out = {}
    for node in after:
        out[node] = {}
        for m in STALL_METRICS:
            b, a = before.get(node, {}).get(m, {}), after[node][m]
            bounds = sorted(a)
            worst, below = 0.0, 0
            for bound in bounds:  # cumulative counts: a bucket's own count is the difference
                gained = (a[bound] - b.get(bound, 0)) - below
                below += gained
                if gained > 0:
                    worst = bound
            out[node][m] = worst
    return out


def measure(label, bootstrap, topic, partitions, acks, args, pids_cpu, stall_ports=None) -> dict:
    before = pids_cpu()
    stalls0 = stall_buckets(stall_ports) if stall_ports else None
    flood = run_producers(args.producers, bootstrap, topic, partitions, acks, args.records, args.sample)
    mid = pids_cpu()
    stalls = longest(stalls0, stall_buckets(stall_ports)) if stall_ports else None
    paced = run_producers(args.producers, bootstrap, topic, partitions, acks, int(args.rate * args.paced_seconds),
                          args.sample, rate=args.rate)
    flood["broker_cpu_s"] = {str(k): round(mid[k] - before.get(k, 0), 2) for k in mid}
    out = {"flood": flood, "paced": paced}
    stall_text = ""
    if stalls is not None:
        flood["loop_stall_ms_at_most"] = {str(n): v for n, v in stalls.items()}
        stall_text = " | loop lag / own stall at most (ms) " + ", ".join(
            f"{n}: {v['kraft_event_loop_lag_ms']:g}/{v['kraft_event_loop_own_stall_ms']:g}" for n, v in stalls.items())
    print(f"{label:14s} flood {flood['mb_s']:6.1f} MB/s {flood['records_s']:10,.0f} rec/s  p50 {flood['p50_ms']:7.1f} "
          f"p99 {flood['p99_ms']:7.1f} ms | paced {args.rate:,.0f}/s p50 {paced['p50_ms']:6.1f} p99 "
          f"{paced['p99_ms']:6.1f} ms | errors {flood['errors'] + paced['errors']} | CPU {flood['broker_cpu_s']}, "
          f"producers {flood['producer_cpu_s']:.2f} s"
          f"{stall_text}", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000, help="records per flood run")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2, help="acks=1 / acks=all alternations on the cluster")
    ap.add_argument("--rate", type=float, default=50_000, help="records/s of the paced runs")
    ap.add_argument("--paced-seconds", type=float, default=5.0)
    ap.add_argument("--sample", type=int, default=100, help="one record in SAMPLE carries a latency callback")
    ap.add_argument("--no-raw", action="store_true")
    ap.add_argument("--producers", type=int, default=1, help="producer processes flooding at once")
    ap.add_argument("--json")
    args = ap.parse_args()
    results: dict = {"args": vars(args), "raw": [], "acks=1": [], "acks=all": []}
    workdir = tempfile.mkdtemp(prefix="bench-replication-")
    try:
        if not args.no_raw:
            os.makedirs(os.path.join(workdir, "raw"))
            proc, bootstrap = start_broker(os.path.join(workdir, "raw"))
            try:
                results["raw"].append(measure("raw 1 broker", bootstrap, "bench", 1, "1", args,
                                              lambda: {0: cpu_seconds(proc.pid)}))
            finally:
                proc.terminate()
                proc.wait(60)
        # Ticks every 5 ms, so a stall of 10 ms cannot fall between two (the nodes inherit it).
        os.environ["KRAFT_LOOP_WATCHDOG_MS"] = "5"
        cluster = LocalCluster(os.path.join(workdir, "cluster"), 3, combined=True, metrics=True).create()
        try:
            cluster.start()
            from confluent_kafka.admin import AdminClient, NewTopic
            admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, "logger": _quiet()})

            def brokers():
                try:
                    return len(admin.list_topics(timeout=5).brokers)
                except Exception:
                    return 0
            assert wait_for(lambda: brokers() == 3, 60, 0.2), "brokers did not register"
            for fut in admin.create_topics([NewTopic(TOPIC, args.partitions, 3, config={"min.insync.replicas": "2"})],
                                           operation_timeout=60).values():
                fut.result(90)

            def full_isr():
                md = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions
                return len(md) == args.partitions and all(len(m.isrs) == 3 and m.leader >= 0 for m in md.values())
            assert wait_for(full_isr, 60, 0.2), "the topic did not get a full ISR"
            for r in range(args.rounds):
                for acks, label in (("1", "acks=1"), ("all", "acks=all")):
                    results[label].append(measure(f"RF3 {label}", cluster.broker_bootstrap, TOPIC, args.partitions,
                                                  acks, args, lambda: cluster_cpu(cluster), cluster.metrics_ports))
        finally:
            cluster.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def rng(label, phase, key):
        vals = [r[phase][key] for r in results[label]]
        return (min(vals), max(vals)) if vals else (float("nan"), float("nan"))
    print(f"\nsummary (ranges over rounds; {args.records:,} x {RECORD} B records per flood run, lz4, "
          f"{args.partitions} partition(s)):")
    for label in ("raw", "acks=1", "acks=all"):
        if not results[label]:
            continue
        mb, rec = rng(label, "flood", "mb_s"), rng(label, "flood", "records_s")
        p50, p99 = rng(label, "paced", "p50_ms"), rng(label, "paced", "p99_ms")
        f50, f99 = rng(label, "flood", "p50_ms"), rng(label, "flood", "p99_ms")
        print(f"  {label:9s} {mb[0]:6.1f}-{mb[1]:6.1f} MB/s  {rec[0]:,.0f}-{rec[1]:,.0f} rec/s  flood p50 "
              f"{f50[0]:.0f}-{f50[1]:.0f} p99 {f99[0]:.0f}-{f99[1]:.0f} ms  paced p50 {p50[0]:.1f}-{p50[1]:.1f} "
              f"p99 {p99[0]:.1f}-{p99[1]:.1f} ms")
    if results["acks=1"] and results["acks=all"]:
        ratio = [a["paced"]["p99_ms"] / max(b["paced"]["p99_ms"], 1e-9)
                 for a, b in zip(results["acks=all"], results["acks=1"])]
        mb = [r["flood"]["mb_s"] for r in results["acks=all"]]
        print(f"  acks=all paced p99 / acks=1 paced p99 per round: {', '.join(f'{x:.2f}' for x in ratio)} "
              f"(target <= 3); acks=all flood {statistics.median(mb):.1f} MB/s median (target >= 50)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
