"""Transactions on 3 combined nodes (RF 3, Kafka's defaults), measured with confluent-kafka, each
figure beside its anchor in the same run (issue 34's targets):

    PYTHONPATH=$PWD python bench/bench_transactions.py                 # the issue's sizes
    PYTHONPATH=$PWD python bench/bench_transactions.py --transactions 20 --seconds 5   # a quick look

1. throughput: ``--transactions`` transactions of 1,000 x 100 B records over 4 partitions
   (``begin``, produce, ``commit``), against the anchor: the same records from an idempotent,
   non-transactional producer (acks=all, same linger/batch settings), flushed once. Ratio
   transactional / idempotent (target >= 0.7).
2. commit latency: transactions of 10 records paced at ``--rate`` per second (50) for
   ``--seconds``; the time ``commit_transaction()`` takes (EndTxn, the Prepare record durable,
   the answer; the markers follow), p50 / p99 (targets <= 10 / <= 50 ms).
3. read_committed: a topic filled with transactions of 100 records, 10% aborted; a
   read_committed consumer reads it to the end against the anchor of a read_uncommitted
   consumer on the same data (it reads the aborted records too). After one untimed read of
   each (the first read of a topic pays for connections and cold caches: timed first, it
   made the ratio swing 0.83-0.96 between runs), ``--rounds`` rounds in alternating order;
   medians of the ratio of records delivered per second (target >= 0.9) and of the time to
   read the log to its end (both consumers fetch every batch; read_committed drops the
   aborted ones). The committed count checked in every round: read_committed sees exactly
   the committed records.
Not a test: nothing asserts a time. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from confluent_kafka import Consumer, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench_peers import write_results  # noqa: E402

from kraft.cli.local_cluster import LocalCluster, wait_for  # noqa: E402

QUIET = {"log_level": 0}
PRODUCE = {"acks": "all", "linger.ms": 5, "batch.num.messages": 10000, "compression.type": "lz4", **QUIET}
VALUE = b"x" * 100


def _brokers(admin) -> int:
    try:
        return len(admin.list_topics(timeout=2).brokers)
    except KafkaException:
        return 0


def _create(admin, name, partitions=4):
    for f in admin.create_topics([NewTopic(name, partitions, 3)]).values():
        f.result()


def throughput(bootstrap, transactions: int, per_txn: int = 1000, partitions: int = 4) -> dict:
    n = transactions * per_txn
    idem = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **PRODUCE})
    # Both producers are warm before their clocks start: connections, the topic's metadata and
    # the producer id (librdkafka may wait 500 ms for a broker to ask for one). Timed from its
    # construction, the anchor carried ~0.45 s of start-up in 0.62 s and read ~160,000/s
    # instead of ~480,000/s.
    for i in range(partitions):
        idem.produce("tput-idem", VALUE, partition=i)
    assert idem.flush(30) == 0
    t0 = time.perf_counter()
    for i in range(n):
        idem.produce("tput-idem", VALUE, partition=i % partitions)
        if i % 10000 == 0:
            idem.poll(0)
    assert idem.flush(120) == 0
    idem_s = time.perf_counter() - t0

    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-tput", **PRODUCE})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(partitions):
        txn.produce("tput-txn", VALUE, partition=i)
    txn.commit_transaction(60)
    t0 = time.perf_counter()
    took, commits = [], []
    for _ in range(transactions):
        began = time.perf_counter()
        txn.begin_transaction()
        for i in range(per_txn):
            txn.produce("tput-txn", VALUE, partition=i % partitions)
        produced = time.perf_counter()
        txn.commit_transaction(60)
        done = time.perf_counter()
        took.append(done - began)
        commits.append(done - produced)
    txn_s = time.perf_counter() - t0
    # Where a transaction's time goes: the produce() calls, then commit_transaction() (the
    # records' acks=all and EndTxn; AddPartitionsToTxn waits for the previous transaction's
    # markers and its Complete record, so it shows up here too).
    return {"records": n, "idempotent_records_per_s": n / idem_s, "transactional_records_per_s": n / txn_s,
            "ratio": (n / txn_s) / (n / idem_s), "transaction_ms_p50": statistics.median(took) * 1e3,
            "commit_ms_p50": statistics.median(commits) * 1e3,
            "idempotent_ms_per_transaction_size": idem_s / transactions * 1e3}


def _paced_transactions(bootstrap, tid: str, rate: float, seconds: float, lat: list) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, **PRODUCE, "linger.ms": 0})
    p.init_transactions(30)
    start = time.perf_counter()
    k = 0
    while time.perf_counter() - start < seconds:
        due = start + k / rate
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        p.begin_transaction()
        for i in range(10):
            p.produce("latency", VALUE, partition=i % 4)
        p.flush(30)  # the records are written first: commit_transaction() times EndTxn alone
        t = time.perf_counter()
        p.commit_transaction(30)
        lat.append(time.perf_counter() - t)
        k += 1


def commit_latency(bootstrap, rate: float, seconds: float, producers: int) -> dict:
    """``producers`` transactional producers (one thread each) share ``rate``: one alone cannot
    reach 50/s, as each transaction also waits for its records' acks=all before EndTxn."""
    import threading

    lat: list = []
    start = time.perf_counter()
    threads = [threading.Thread(target=_paced_transactions,
                                args=(bootstrap, f"bench-latency-{i}", rate / producers, seconds, lat))
               for i in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lat.sort()

    def q(x):
        return lat[min(len(lat) - 1, int(x * len(lat)))] * 1000
    return {"transactions": len(lat), "producers": producers, "rate_asked": rate,
            "rate_done": len(lat) / (time.perf_counter() - start),
            "p50_ms": q(0.5), "p99_ms": q(0.99), "max_ms": lat[-1] * 1000}


def fill_with_aborts(bootstrap, transactions: int, per_txn: int = 100) -> int:
    """Transactions of ``per_txn`` records, every tenth aborted; returns the committed count."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-fill", **PRODUCE})
    p.init_transactions(30)
    committed = 0
    for t in range(transactions):
        p.begin_transaction()
        for i in range(per_txn):
            p.produce("mixed", VALUE, partition=i % 4)
        if t % 10 == 9:
            # written first: librdkafka purges what it has not sent when a transaction aborts,
            # and the point is aborted records in the log for read_committed to skip
            assert p.flush(60) == 0
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            committed += per_txn
    return committed


def read_all(bootstrap, isolation: str, expected: int) -> tuple[int, float]:
    """Read partitions 0-3 of "mixed" from the start (assigned: no group join in the timing)
    until ``expected`` records came; (records read, seconds from assign to the last)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}", "enable.auto.commit": False,
                  "isolation.level": isolation, "fetch.max.bytes": 52428800, **QUIET})
    t0 = time.perf_counter()
    c.assign([TopicPartition("mixed", p, OFFSET_BEGINNING) for p in range(4)])
    n, idle, last = 0, time.perf_counter(), t0
    while n < expected and time.perf_counter() - idle < 20:
        msgs = c.consume(10000, 0.5)
        got = sum(1 for m in msgs if m.error() is None)
        if got:
            n += got
            idle = last = time.perf_counter()
    elapsed = last - t0
    # a last look: nothing more than expected is readable (read_committed must not see aborts)
    extra = sum(1 for m in c.consume(10000, 2.0) if m.error() is None)
    c.close()
    return n + extra, elapsed


def read_committed_rounds(bootstrap, committed: int, total: int, rounds: int) -> dict:
    """Step 3: an untimed read of each, then ``rounds`` timed pairs in alternating order."""
    read_all(bootstrap, "read_committed", committed)
    read_all(bootstrap, "read_uncommitted", total)
    rc_rates, ru_rates, ratios, time_ratios, rc_counts, ru_counts = [], [], [], [], set(), set()
    for r in range(rounds):
        order = ("read_committed", "read_uncommitted") if r % 2 == 0 else ("read_uncommitted", "read_committed")
        got = {iso: read_all(bootstrap, iso, committed if iso == "read_committed" else total) for iso in order}
        (rc_n, rc_s), (ru_n, ru_s) = got["read_committed"], got["read_uncommitted"]
        rc_counts.add(rc_n)
        ru_counts.add(ru_n)
        rc_rates.append(rc_n / rc_s)
        ru_rates.append(ru_n / ru_s)
        ratios.append(rc_rates[-1] / ru_rates[-1])
        time_ratios.append(ru_s / rc_s)
    return {"records_written": total, "committed": committed, "rounds": rounds,
            "read_committed_read": sorted(rc_counts), "read_uncommitted_read": sorted(ru_counts),
            "read_committed_per_s": statistics.median(rc_rates), "read_uncommitted_per_s": statistics.median(ru_rates),
            "ratios": ratios, "ratio": statistics.median(ratios), "log_time_ratios": time_ratios,
            "log_time_ratio": statistics.median(time_ratios)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transactions", type=int, default=100, help="transactions of 1,000 records in step 1")
    ap.add_argument("--rate", type=float, default=50.0, help="transactions per second in step 2")
    ap.add_argument("--seconds", type=float, default=20.0, help="length of step 2")
    ap.add_argument("--producers", type=int, default=4, help="transactional producers sharing step 2's rate")
    ap.add_argument("--mixed", type=int, default=1000, help="transactions of 100 records in step 3")
    ap.add_argument("--rounds", type=int, default=5, help="timed read pairs in step 3")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-txn-")
    cluster = LocalCluster(d, 3, combined=True, overrides={"group.initial.rebalance.delay.ms": "0"}).create()
    cluster.start()
    result = {"args": vars(args), "machine_cpus": os.cpu_count(), "loadavg_start": list(os.getloadavg())}
    try:
        admin = AdminClient({"bootstrap.servers": cluster.broker_bootstrap, **QUIET})
        assert wait_for(lambda: _brokers(admin) == 3, 60, 0.3)
        for name in ("tput-idem", "tput-txn", "latency", "mixed"):
            _create(admin, name)
        boot = cluster.broker_bootstrap
        result["throughput"] = tp = throughput(boot, args.transactions)
        print(f"1. throughput ({tp['records']:,} x 100 B, 4 partitions, RF 3, lz4): transactional "
              f"{tp['transactional_records_per_s']:,.0f}/s vs idempotent {tp['idempotent_records_per_s']:,.0f}/s: "
              f"ratio {tp['ratio']:.2f} (target >= 0.7); a transaction p50 {tp['transaction_ms_p50']:.2f} ms "
              f"(commit_transaction() {tp['commit_ms_p50']:.2f}) against "
              f"{tp['idempotent_ms_per_transaction_size']:.2f} ms per 1,000 idempotent records", flush=True)
        result["commit_latency"] = cl = commit_latency(boot, args.rate, args.seconds, args.producers)
        print(f"2. commit_transaction() at {cl['rate_done']:.0f} transactions/s ({cl['transactions']}, "
              f"{cl['producers']} producers): "
              f"p50 {cl['p50_ms']:.1f} ms, p99 {cl['p99_ms']:.1f} ms, max {cl['max_ms']:.1f} ms "
              f"(targets 10 / 50 ms)", flush=True)
        committed = fill_with_aborts(boot, args.mixed)
        total = args.mixed * 100
        result["read_committed"] = rc = read_committed_rounds(boot, committed, total, args.rounds)
        print(f"3. read_committed over {total:,} records (10% in aborted transactions), {args.rounds} rounds: "
              f"{rc['read_committed_read']} read (committed {committed:,}) at median "
              f"{rc['read_committed_per_s']:,.0f}/s vs read_uncommitted {rc['read_uncommitted_read']} at "
              f"{rc['read_uncommitted_per_s']:,.0f}/s: ratio {rc['ratio']:.3f} (target >= 0.9; rounds "
              f"{', '.join(f'{r:.3f}' for r in rc['ratios'])}); time to read the log to its end, "
              f"read_uncommitted / read_committed: {rc['log_time_ratio']:.3f}", flush=True)
        result["loadavg_end"] = list(os.getloadavg())
    finally:
        cluster.close()
    print("wrote", write_results("transactions", result))


if __name__ == "__main__":
    main()
