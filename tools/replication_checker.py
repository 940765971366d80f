"""Jepsen-style check of partition replication: real kraft processes, real Kafka clients,
faults, then every acknowledged write looked up in what a consumer reads and in every
replica's segment files.

The cluster: 3 controller-only and 4 broker-only ``kraft server start`` processes
(LocalCluster, the low-latency Raft profile, ``broker.session.timeout.ms=3000``), so the
active controller and the brokers fail independently; one topic with RF 3, several
partitions and ``min.insync.replicas=2``.

The load: several producer processes (confluent-kafka, acks=all; half with
``enable.idempotence``, half without), each sending unique values round-robin over the
partitions and recording every delivery report: (partition, offset, value, time) when
acknowledged, an indeterminate write otherwise (an error or a timeout: it may be in the log
or not; never retried by us).

The nemesis (tools/checker_cluster.py): every ``--interval`` seconds or so, one fault on a
random broker or on the active controller (found with DescribeQuorum): SIGKILL then a
restart 1-4 s later, SIGSTOP for 1-6 s then SIGCONT, or a clean restart (SIGTERM:
controlled shutdown); with ``--faults`` naming them, whole-cluster faults too: a rolling
restart, every node SIGTERMed at once, every node SIGKILLed at once. After each fault the
nemesis waits (up to ``--settle`` s) until every replica is back in the ISR. A process that
exits on its own is a finding: logged with its last lines and restarted.

Restarts at scale (``--restarts``: 3 combined nodes and 2 broker-only nodes, 250 filler
topics x 4 partitions so the metadata log spans snapshots, every fault kind): no partition
directory may be renamed ``-stray`` or disappear, on top of the verdict below.

The end: everything healed, producers stopped, every replica back in the ISR; a consumer
reads every partition up to its high watermark; the cluster is stopped and each broker's
partition logs are read from disk with kraft's own log reader. The verdict
(tools/replication_history.py): acked, lost, divergent, duplicates, indeterminate found or
missing, longest unavailability per partition, printed as Markdown.

    python tools/replication_checker.py --minutes 30 --interval 4 --seed 1 [--json out.json] [--dir DIR]
    python tools/replication_checker.py --restarts --minutes 20   # the restart torture run
    python tools/replication_checker.py --analyse DIR   # the verdict again from a kept run's disks

Exit status 0 only with nothing lost, nothing divergent, no idempotent duplicate, no value
nobody sent, no process crash and every partition back to a full ISR. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import replication_history as history
from checker_cluster import ONE_NODE, TOPIC, WHOLE_CLUSTER, Run, quiet_logger as _quiet_logger


# --- producer process ----------------------------------------------------------------------------


def produce_main(a) -> int:
    """One producer: unique values ``<name>-<seq>`` round-robin over the partitions at about
    ``rate``/s, every delivery report appended to ``out`` (tab-separated lines: ``S t``
    when it starts trying, ``A partition offset t value``, ``I partition t error value``)."""
    from confluent_kafka import Producer

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    out = open(a.out, "w", buffering=1 << 16)
    pending: dict[str, int] = {}
    fatal: list[str] = []

    def on_error(err):
        if err.fatal():
            fatal.append(f"{err.name()}: {err.str()}")

    def new_producer():
        return Producer({"bootstrap.servers": a.bootstrap, "acks": "all", "enable.idempotence": a.idempotent,
                         "linger.ms": 5, "message.timeout.ms": 20000, "request.timeout.ms": 5000,
                         "retry.backoff.ms": 50, "retry.backoff.max.ms": 500,
                         "queue.buffering.max.messages": 20000, "logger": _quiet_logger(),
                         "compression.type": a.compression, "error_cb": on_error})
    producer = new_producer()
    out.write(f"S\t{time.time():.3f}\n")
    try:
        _produce_until_stopped(a, producer, new_producer, pending, fatal, out, stop)
    finally:
        for v, p in pending.items():  # no answer at all: as unknown as a timeout
            out.write(f"I\t{p}\t{time.time():.3f}\tNO_ANSWER\t{v}\n")
        out.close()
    return 0


def _produce_until_stopped(a, producer, new_producer, pending, fatal, out, stop) -> None:
    from confluent_kafka import KafkaException

    report = report_to(out, pending)
    seq, t0 = 0, time.monotonic()
    while not stop:
        due = int((time.monotonic() - t0) * a.rate)
        try:
            while seq < due and len(pending) < a.max_pending and not stop:
                v = f"{a.name}-{seq}"
                try:
                    producer.produce(TOPIC, value=v.encode(), partition=seq % a.partitions, on_delivery=report)
                except BufferError:
                    break
                pending[v] = seq % a.partitions
                seq += 1
            producer.poll(0.01)
        except KafkaException as e:  # the idempotent producer's fatal error surfaces here too
            fatal.append(str(e))
        if fatal:  # librdkafka's idempotent producer gave up (e.g. a sequence it cannot explain)
            out.write(f"F\t{time.time():.3f}\t{fatal.pop()}\n")
            fatal.clear()
            producer = _replace(producer, pending, out, new_producer)
    try:
        producer.flush(30)
    except KafkaException:
        pass


def report_to(out, pending):
    def report(err, msg):
        v = msg.value().decode()
        pending.pop(v, None)
        if err is None:
            out.write(f"A\t{msg.partition()}\t{msg.offset()}\t{time.time():.3f}\t{v}\n")
        else:
            out.write(f"I\t{msg.partition()}\t{time.time():.3f}\t{err.name()}\t{v}\n")
    return report


def _replace(producer, pending, out, new_producer):
    try:
        producer.flush(5)
    except Exception:
        pass
    for v, p in list(pending.items()):
        out.write(f"I\t{p}\t{time.time():.3f}\tFATAL\t{v}\n")
    pending.clear()
    return new_producer()


def read_history(paths) -> tuple[list, list, float, list]:
    """(acks, indeterminate, when the last producer started trying, fatal errors)."""
    acks, indeterminate, starts, fatal = [], [], [], []
    for path in paths:
        reported: dict[int, int] = {}  # seq -> partition, of every value with a delivery report
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if parts[0] in "AI" and len(parts) == 5:
                    reported[int(parts[4].rsplit("-", 1)[1])] = int(parts[1])
                if parts[0] == "A" and len(parts) == 5:
                    # No offset (None): librdkafka acknowledged it implicitly (a later request of the
                    # producer succeeded, or DUPLICATE_SEQUENCE_NUMBER): -1, checked by value only.
                    offset = int(parts[2]) if parts[2].lstrip("-").isdigit() else -1
                    acks.append(history.Ack(int(parts[1]), offset, parts[4].encode(), float(parts[3])))
                elif parts[0] == "I" and len(parts) == 5:
                    indeterminate.append(history.Indeterminate(int(parts[1]), parts[4].encode(), parts[3]))
                elif parts[0] == "S":
                    starts.append(float(parts[1]))
                elif parts[0] == "F":
                    fatal.append(parts[2:])
        # A producer enqueues seq n only after n-1 was enqueued, so every seq below its highest
        # was produced; librdkafka gave no delivery report at all for one message of a batch that a
        # fatal idempotence error cut short (seed 20261128): produced, outcome unknown.
        if reported:
            name = os.path.basename(path)[len("producer-"):-len(".tsv")]
            n_partitions = max(reported.values()) + 1  # values go round robin over the partitions
            for seq in sorted(set(range(max(reported))) - reported.keys()):
                indeterminate.append(history.Indeterminate(seq % n_partitions, f"{name}-{seq}".encode(),
                                                           "NO_DELIVERY_REPORT"))
    return acks, indeterminate, max(starts, default=time.time()), fatal


def start_producers(run: Run, directory: str) -> list[tuple[subprocess.Popen, str]]:
    from kraft.cli.local_cluster import _die_with_parent

    procs = []
    for i in range(run.a.producers):
        idempotent = i % 2 == 0
        name = f"{'i' if idempotent else 'n'}{i}"
        out = os.path.join(directory, f"producer-{name}.tsv")
        cmd = [sys.executable, os.path.abspath(__file__), "produce", "--bootstrap", run.cluster.broker_bootstrap,
               "--partitions", str(run.a.partitions), "--name", name, "--rate", str(run.a.rate), "--out", out,
               "--compression", ["none", "lz4"][i // 2 % 2]] + (["--idempotent"] if idempotent else [])
        procs.append((subprocess.Popen(cmd, preexec_fn=_die_with_parent, stderr=open(out + ".err", "w")), out))
    return procs


def heal_and_stop_producers(run: Run, producers) -> float:
    """Every fault undone, then the producers told to stop (SIGTERM) and waited for: when the load ended."""
    run.log("healing; stopping the producers")
    run.heal()
    load_end = time.time()
    for p, _ in producers:
        p.send_signal(signal.SIGTERM)
    for p, _ in producers:
        p.wait(120)
    return load_end


def read_back(run: Run) -> tuple[dict, dict]:
    """Every partition from the beginning to its high watermark: ({partition: {offset: value}},
    {partition: high watermark})."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": run.cluster.broker_bootstrap, "group.id": "checker",
                         "enable.auto.commit": False, "fetch.max.bytes": 8 << 20, "logger": _quiet_logger()})
    try:
        hw = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
              for p in range(run.a.partitions)}
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(run.a.partitions)])
        consumed: dict[int, dict[int, bytes]] = {p: {} for p in hw}
        todo = {p for p, h in hw.items() if h > 0}
        idle_until = time.monotonic() + 60
        while todo and time.monotonic() < idle_until:
            for m in consumer.consume(10000, 1.0):
                if m.error() is not None:
                    continue
                idle_until = time.monotonic() + 60
                if m.offset() < hw[m.partition()]:
                    consumed[m.partition()][m.offset()] = m.value()
                if m.offset() >= hw[m.partition()] - 1:
                    todo.discard(m.partition())
        if todo:
            run.log(f"!! the consumer did not reach the high watermark of partitions {sorted(todo)}")
        return consumed, hw
    finally:
        consumer.close()


def replica_records(path: str):
    """(offset, value) of every data record in one replica's segment files, in log order."""
    from kraft.log import LogConfig, SegmentedLog
    from kraft.records import iter_batches

    log = SegmentedLog.open(path, LogConfig(background_flush=False))
    try:
        pos = log.start_offset
        while pos < log.end_offset:
            data = log.read(pos, 1 << 20)
            if not data:
                break
            for b in iter_batches(data):
                if not b.is_control:
                    for r in b:
                        yield r.offset, r.value
                pos = b.next_offset
    finally:
        log.close()


def replica_dirs(directory: str) -> dict[int, dict[int, str]]:
    """partition -> broker -> the directory of its replica, for every one under ``directory``
    (a LocalCluster's: ``node-<id>/logs/<topic>-<p>``)."""
    out: dict[int, dict[int, str]] = {}
    for name in sorted(os.listdir(directory)):
        logs = os.path.join(directory, name, "logs")
        if name.startswith("node-") and os.path.isdir(logs):
            for entry in os.listdir(logs):
                topic, _, p = entry.rpartition("-")
                if topic == TOPIC and p.isdigit():
                    out.setdefault(int(p), {})[int(name[5:])] = os.path.join(logs, entry)
    return out


class ProducerEpochs:
    """(producer id, producer epoch) of the batch holding an offset, from one replica's
    segments: tells a duplicate the client resent under a new epoch from one the broker
    accepted twice."""

    def __init__(self, dirs: dict[int, dict[int, str]]):
        self.dirs, self.logs = dirs, {}

    def __call__(self, partition: int, offset: int):
        from kraft.log import LogConfig, SegmentedLog
        from kraft.records import iter_batches

        if partition not in self.logs:
            path = next(iter(self.dirs.get(partition, {}).values()), None)
            self.logs[partition] = path and SegmentedLog.open(path, LogConfig(background_flush=False))
        log = self.logs[partition]
        if not log or not log.start_offset <= offset < log.end_offset:
            return None
        b = next(iter_batches(log.read(offset, 1)), None)
        return None if b is None else (b.producer_id, b.producer_epoch)

    def close(self) -> None:
        for log in self.logs.values():
            if log:
                log.close()


def verdict_of(directory: str, acks, indeterminate, consumed, hw, load_window):
    dirs = replica_dirs(directory)
    epochs = ProducerEpochs(dirs)
    try:
        return history.check(acks, indeterminate, consumed, hw,
                             {p: {n: replica_records(d) for n, d in nodes.items()} for p, nodes in dirs.items()},
                             idempotent=lambda v: v.startswith(b"i"), load_window=load_window,
                             producer_epoch=epochs)
    finally:
        epochs.close()


def analyse_main(a) -> int:
    """The verdict again from a stopped run's directory (``--dir``) alone: producer histories
    and segment files; each partition's HW from the brokers' replication-offset-checkpoint
    (written at their clean stop), the read back from the replica that holds it."""
    import glob

    from kraft.log.checkpoint import OffsetCheckpointFile

    directory = a.analyse
    acks, indeterminate, load_start, _ = read_history(sorted(glob.glob(os.path.join(directory, "producer-*.tsv"))))
    hw: dict[int, tuple[int, int]] = {}
    for path in glob.glob(os.path.join(directory, "node-*", "logs", "replication-offset-checkpoint")):
        node = int(path.split(os.sep)[-3][5:])
        for (topic, p), offset in OffsetCheckpointFile(path).read().items():
            if topic == TOPIC and offset >= hw.get(p, (-1, 0))[0]:
                hw[p] = (offset, node)
    dirs = replica_dirs(directory)
    consumed = {p: {off: v for off, v in replica_records(dirs[p][node]) if off < h} for p, (h, node) in hw.items()}
    load_end = max((x.t for x in acks), default=load_start)
    v = verdict_of(directory, acks, indeterminate, consumed, {p: h for p, (h, _) in hw.items()}, (load_start, load_end))
    print(history.markdown(v, title=f"Replication check of {directory} (from disk)", faults={}))
    return 0 if v.ok else 1


def main(a) -> int:
    directory = a.dir or tempfile.mkdtemp(prefix="replication-checker-")
    run = Run(a, directory)
    producers = []
    ok_end = False
    try:
        run.start_cluster()
        layout_before, _ = run.replica_layout()
        producers = start_producers(run, directory)
        time.sleep(a.warmup)
        deadline = time.monotonic() + a.minutes * 60
        while time.monotonic() < deadline:
            time.sleep(run.rng.uniform(0.5, 1.5) * a.interval)
            run.check_crashes()
            if time.monotonic() < deadline:
                run.one_fault()
        load_end = heal_and_stop_producers(run, producers)
        run.check_crashes()
        ok_end = run.wait(run.isr_full, a.final_settle)
        run.log(f"every replica in the ISR: {ok_end} {run.partitions()}")
        consumed, hw = read_back(run)
        run.cluster.close()
        layout_after, strays = run.replica_layout()
        dirs_lost = sorted(layout_before - layout_after)
        if strays or dirs_lost:
            run.log(f"!! {len(strays)} partition directories renamed -stray, {len(dirs_lost)} gone: "
                    f"{(strays + [str(d) for d in dirs_lost])[:5]}")
        acks, indeterminate, load_start, fatal = read_history([out for _, out in producers])
        verdict = verdict_of(directory, acks, indeterminate, consumed, hw, (load_start, load_end))
    finally:
        for p, _ in producers:
            if p.poll() is None:
                p.kill()
        run.cluster.close()
    kinds: dict[str, int] = {}
    for f in run.faults:
        key = f"{f['kind']} {f['role'].split()[-1]}"
        kinds[key] = kinds.get(key, 0) + 1
    unsettled = sum(1 for f in run.faults if not f["isr_full"])
    extra = [("seconds under load", f"{load_end - load_start:.0f}"),
             ("faults after which the ISR was not full within --settle", unsettled),
             ("processes that exited on their own", len(run.crashes)),
             ("idempotent producers' fatal errors", len(fatal)),
             ("every replica back in the ISR at the end", ok_end),
             ("partition directories (all topics) renamed -stray / gone", f"{len(strays)} / {len(dirs_lost)}")]
    print(history.markdown(verdict, title=f"Replication check: {a.minutes:g} min, seed {a.seed}",
                           faults=kinds, extra_rows=extra))
    passed = verdict.ok and ok_end and not run.crashes and not strays and not dirs_lost
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"acked": verdict.acked, "lost": len(verdict.lost), "divergent": len(verdict.divergent),
                       "duplicates": len(verdict.duplicates),
                       "idempotent_duplicates": len(verdict.idempotent_duplicates),
                       "epoch_bump_duplicates": len(verdict.epoch_bump_duplicates),
                       "unknown": len(verdict.unknown), "indeterminate_found": verdict.indeterminate_found,
                       "indeterminate_missing": verdict.indeterminate_missing,
                       "unavailable_s": {p: g for p, (g, _) in verdict.unavailable.items()},
                       "faults": kinds, "fault_log": run.faults, "crashes": run.crashes, "fatal": fatal,
                       "isr_full_at_end": ok_end, "records_read": verdict.records_read,
                       "replica_records_checked": verdict.replica_records_checked, "strays": len(strays),
                       "replica_dirs_lost": len(dirs_lost), "replica_dirs": len(layout_before),
                       "passed": passed}, f, indent=1)
    if passed and not a.keep and not a.dir:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        print(f"\nlogs and data kept in {directory}")
    return 0 if passed else 1


#: ``--restarts``: the restart torture run (explicit flags still win).
RESTART_PRESET = {"combined": True, "controllers": 3, "brokers": 2, "partitions": 12, "filler_topics": 250,
                  "filler_partitions": 4, "snapshot_bytes": 32768, "interval": 8.0, "whole_cluster_share": 0.3,
                  "fault_kinds": list(ONE_NODE + WHOLE_CLUSTER)}


def parse(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    pr = sub.add_parser("produce", help="(internal) one producer process")
    pr.add_argument("--bootstrap", required=True)
    pr.add_argument("--partitions", type=int, required=True)
    pr.add_argument("--name", required=True)
    pr.add_argument("--rate", type=float, default=100)
    pr.add_argument("--out", required=True)
    pr.add_argument("--idempotent", action="store_true")
    pr.add_argument("--compression", default="none")
    pr.add_argument("--max-pending", type=int, default=2000)
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--interval", type=float, default=4.0, help="mean seconds between faults")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--controllers", type=int, default=3)
    ap.add_argument("--brokers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--rate", type=float, default=100, help="records/s per producer")
    ap.add_argument("--faults", dest="fault_kinds", default="kill,pause,restart",
                    type=lambda s: s.split(","))
    ap.add_argument("--controller-share", type=float, default=0.25,
                    help="fraction of faults that hit the active controller instead of a broker")
    ap.add_argument("--replica-lag-ms", type=int, default=5000)
    ap.add_argument("--settle", type=float, default=30.0, help="max seconds to wait for a full ISR after a fault")
    ap.add_argument("--final-settle", type=float, default=120.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--dir", help="keep the cluster here (default: a temporary directory, removed on success)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--analyse", metavar="DIR", help="no run: the verdict again from a stopped run's --dir")
    ap.add_argument("--combined", action="store_true", help="the controllers are broker,controller nodes")
    ap.add_argument("--filler-topics", type=int, default=0, help="topics created at start (a long metadata log)")
    ap.add_argument("--filler-partitions", type=int, default=4)
    ap.add_argument("--snapshot-bytes", type=int, default=0,
                    help="metadata.log.max.record.bytes.between.snapshots (0: the default)")
    ap.add_argument("--whole-cluster-share", type=float, default=0.3,
                    help="fraction of faults that are whole-cluster ones, when --faults names some")
    ap.add_argument("--restarts", action="store_true", help="the restart torture preset: " + ", ".join(
        f"{k}={v}" for k, v in RESTART_PRESET.items()))
    if "--restarts" in argv:
        ap.set_defaults(**RESTART_PRESET)
    return ap.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    if args.cmd == "produce":
        sys.exit(produce_main(args))
    sys.exit(analyse_main(args) if args.analyse else main(args))
