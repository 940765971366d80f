"""Jepsen-style check of exactly-once: real kraft processes, real Kafka clients, consume-
transform-produce copiers between two RF-3 topics under faults on brokers (the transaction
and group coordinators included) and on the copiers themselves, then the verdict of
``tools/eos_history.py``: every acknowledged input copied exactly once into the committed
output, in input order per partition; no read_committed reader ever reads an aborted record;
no committed transaction lost; committed group offsets never going backwards.

The cluster and its broker faults are the replication checker's (``tools/checker_cluster.py``).
The input topic ``checked`` is filled by one idempotent producer (the replication checker's:
unique values, every delivery report kept). ``--copiers`` copier processes (confluent-kafka;
a read_committed Consumer in one group, no auto commit, and a transactional Producer with its
own ``transactional.id``, kept across restarts so a zombie is fenced) loop: consume a batch,
begin a transaction, produce each record to the same partition of ``copied`` as
``attempt|in_partition|in_offset|value``, send the consumed offsets to the transaction,
commit (or, ``--abort-share`` of the time, abort on purpose and rewind: aborted records for the
readers to skip). On an abortable error they abort and rewind to the committed offsets (confluent-kafka's
EOS example); on a fatal one (fenced) the process exits and is started again. Every attempt
and its outcome is written down. A read_committed reader reads ``copied`` during the run; a
fresh one reads it all at the end.

The nemesis hits, in turn, the cluster (a broker, the active controller), the group's
coordinator or a copier's transaction coordinator (found with FindCoordinator), and the
copiers (SIGKILL and a restart, or SIGSTOP for 1-10 s: past the 6 s session a zombie).

    python tools/eos_checker.py --minutes 30 --interval 6 --seed 1 [--json out.json] [--dir DIR]

Exit status 0 only with a PASS verdict, no kraft process crash and the copiers caught up.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import eos_history as history
from checker_cluster import ONE_NODE, TOPIC, WHOLE_CLUSTER, Run, quiet_logger
from group_checker import GROUP, Members, ask_group, coordinator, end_offsets
from replication_checker import heal_and_stop_producers, read_history, start_producers

OUTPUT = "copied"


# --- copier process ---------------------------------------------------------------------------------
def copy_main(a) -> int:
    """One copier; tab-separated lines in ``out``: ``S t`` a new process, ``P attempt n p:off,..``
    produced n records and sent those offsets, ``K attempt t`` commit called, ``C attempt
    started acked`` committed, ``A attempt error`` aborted (abort_transaction returned),
    ``X attempt error`` outcome unknown (also when a transactional call hangs: the process exits)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    out = open(a.out, "a", buffering=1)
    incarnation = f"{a.name}.{os.getpid()}.{int(time.time() * 1000) % 100000000}"
    # --rdkafka-debug: librdkafka's own log of the group (e.g. cgrp; the producer's eos,protocol) on stderr
    logging = {"debug": a.rdkafka_debug} if a.rdkafka_debug else {"logger": quiet_logger()}
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest", "client.id": a.name,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, **logging,
                  "topic.metadata.refresh.interval.ms": 2000})
    p = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": f"copier-{a.name}",
                  "transaction.timeout.ms": 10000, "linger.ms": 5, "request.timeout.ms": 5000,
                  **({"debug": "eos,protocol"} if a.rdkafka_debug else {"logger": quiet_logger()})})
    p.init_transactions(60)
    c.subscribe([TOPIC])

    def rewind():
        assigned = c.assignment()
        if assigned:
            for tp in c.committed(assigned, timeout=30):
                c.seek(TopicPartition(TOPIC, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

    n, rng = 0, random.Random(f"{a.seed}-{incarnation}")
    busy = {"since": None, "attempt": None}

    def watchdog():
        # librdkafka 2.10-2.16 blocks in send_offsets_to_transaction far past its 30 s timeout
        # when the group coordinator's broker left Metadata (fenced while it restarted): it
        # decommissions that broker yet keeps it as the cached coordinator (librdkafka #5511,
        # #5456; docs/reliability.md). Meanwhile the eager rebalance waits for this member's
        # revoke. An application would restart: so do we.
        while True:
            time.sleep(1)
            since = busy["since"]
            if since is not None and time.monotonic() - since > a.stuck_s:
                out.write(f"X\t{busy['attempt']}\tstuck {a.stuck_s:g} s in a transactional call\n")
                out.flush()
                os._exit(4)
    threading.Thread(target=watchdog, daemon=True).start()
    try:
        while not stop:
            busy["since"] = None
            msgs = [m for m in c.consume(a.batch, 0.5) if m.error() is None]
            if not msgs:
                continue
            n += 1
            attempt = f"{incarnation}.{n}"
            busy.update(since=time.monotonic(), attempt=attempt)
            offsets: dict[int, int] = {}
            try:
                p.begin_transaction()
                for m in msgs:
                    p.produce(OUTPUT, history.encode(attempt, m.partition(), m.offset(), m.value()),
                              partition=m.partition())
                    offsets[m.partition()] = m.offset() + 1
                sent = [TopicPartition(TOPIC, q, o) for q, o in sorted(offsets.items())]
                p.send_offsets_to_transaction(sent, c.consumer_group_metadata(), 30)
                out.write(f"P\t{attempt}\t{len(msgs)}\t{','.join(f'{q}:{o}' for q, o in sorted(offsets.items()))}\n")
                if rng.random() < a.abort_share:  # on purpose: aborted records a reader must never see
                    p.abort_transaction(30)
                    out.write(f"A\t{attempt}\tdeliberate\n")
                    rewind()
                    continue
                started = time.time()
                out.write(f"K\t{attempt}\t{started:.6f}\n")
                for tries in range(5):
                    try:
                        p.commit_transaction(30)
                        break
                    except KafkaException as e:
                        if not e.args[0].retriable() or tries == 4:
                            raise
                out.write(f"C\t{attempt}\t{started:.6f}\t{time.time():.6f}\n")
            except KafkaException as e:
                err = e.args[0]
                if err.fatal() or not err.txn_requires_abort():
                    out.write(f"X\t{attempt}\t{err.name()}\n")
                    return 3  # fenced or unknown: a fresh process (init_transactions aborts what is open)
                try:
                    p.abort_transaction(30)
                except KafkaException as e2:
                    out.write(f"X\t{attempt}\tabort failed: {e2.args[0].name()}\n")
                    return 3
                out.write(f"A\t{attempt}\t{err.name()}\n")
                rewind()
    finally:
        c.close()
        out.close()
    return 0


def read_copiers(paths) -> dict:
    attempts: dict[str, history.Attempt] = {}
    for path in paths:
        name = os.path.basename(path)[len("copier-"):-len(".tsv")]
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # the line a SIGKILL cut short
                parts = line.rstrip("\n").split("\t")
                if parts[0] == "S" or len(parts) < 3:
                    continue
                a = attempts.setdefault(parts[1], history.Attempt(parts[1], name))
                if parts[0] == "P" and len(parts) == 4:
                    a.produced = int(parts[2])
                    a.offsets = {int(q): int(o) for q, o in (x.split(":") for x in parts[3].split(",") if x)}
                elif parts[0] == "K":
                    a.started = float(parts[2])
                elif parts[0] == "C" and len(parts) == 4:
                    a.outcome, a.started, a.acked = history.COMMITTED, float(parts[2]), float(parts[3])
                elif parts[0] == "A":
                    a.outcome = history.ABORTED
    return attempts


# --- the run ----------------------------------------------------------------------------------------
class Copiers(Members):
    """The copier processes: started, killed, paused, restarted (the group checker's nemesis)."""

    def __init__(self, run: Run, directory: str):
        self.run, self.directory = run, directory
        self.procs, self.paths, self.crashes = {}, {}, []
        self.kinds = {f"c{i}": "copier" for i in range(run.a.copiers)}

    def start(self, name: str) -> None:
        import subprocess

        from kraft.cli.local_cluster import _die_with_parent
        path = self.paths.setdefault(name, os.path.join(self.directory, f"copier-{name}.tsv"))
        with open(path, "a") as f:
            f.write(f"S\t{time.time():.6f}\n")
        cmd = [sys.executable, os.path.abspath(__file__), "copy", "--bootstrap", self.run.cluster.broker_bootstrap,
               "--name", name, "--out", path, "--batch", str(self.run.a.batch),
               "--abort-share", str(self.run.a.abort_share), "--seed", str(self.run.a.seed)]
        if self.run.a.rdkafka_debug:
            cmd += ["--rdkafka-debug", self.run.a.rdkafka_debug]
        self.procs[name] = subprocess.Popen(cmd, preexec_fn=_die_with_parent, stderr=open(path + ".err", "a"))

    def fault(self) -> str:
        return super().fault().replace("consumer", "copier")

    def check_crashes(self) -> None:  # a fenced copier exits (3) and is started again: counted, no failure
        for name, p in self.procs.items():
            if p.poll() is not None:
                self.crashes.append({"copier": name, "exit": p.returncode})
                self.run.log(f"copier {name} exited with {p.returncode}; starting it again")
                self.start(name)


class Reader(threading.Thread):
    """A read_committed consumer of the whole output topic, from the beginning."""

    def __init__(self, run: Run, group: str):
        super().__init__(daemon=True)
        self.checker, self.group, self.copies, self.stopped = run, group, [], threading.Event()
        self.errors = 0

    def consumer(self):
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.checker.cluster.broker_bootstrap, "group.id": self.group,
                      "enable.auto.commit": False, "isolation.level": "read_committed", "logger": quiet_logger()})
        c.assign([TopicPartition(OUTPUT, q, OFFSET_BEGINNING) for q in range(self.checker.a.partitions)])
        return c

    def take(self, c) -> int:
        got = 0
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                self.copies.append(history.decode(m.partition(), m.offset(), m.value()))
                got += 1
            else:
                self.errors += 1
        return got

    def run(self) -> None:
        c = self.consumer()
        try:
            while not self.stopped.is_set():
                self.take(c)
        finally:
            c.close()

    def read_all(self, timeout: float) -> bool:
        """To the end of every partition (the last stable offset): True if reached."""
        from confluent_kafka import TopicPartition
        c = self.consumer()
        try:
            end_by = time.monotonic() + timeout
            while time.monotonic() < end_by:
                if self.take(c):
                    continue
                try:
                    ends = {q: c.get_watermark_offsets(TopicPartition(OUTPUT, q), timeout=5)[1]
                            for q in range(self.checker.a.partitions)}
                    at = {tp.partition: tp.offset for tp in c.position([TopicPartition(OUTPUT, q) for q in ends])}
                except Exception:
                    continue
                if all(ends[q] == 0 or at.get(q, -1) >= ends[q] for q in ends):
                    return True
            return False
        finally:
            c.close()


def txn_coordinator(run: Run, transactional_id: str) -> int | None:
    import asyncio

    from kraft.client.node_client import NodeClient
    from kraft.protocol.messages.group_membership import FindCoordinatorRequest

    async def ask():
        for i in run.cluster.broker_ids:
            client = NodeClient(*run.cluster.broker_address(i), client_id="eos-checker", request_timeout_ms=3000)
            try:
                found = await client.request(FindCoordinatorRequest(key=transactional_id, key_type=1), 3)
            except Exception:
                continue
            finally:
                await client.close()
            if found.error_code == 0:
                return found.node_id
        return None
    return asyncio.run(ask())


def describe_group(run: Run) -> str:
    try:
        d = run.admin.describe_consumer_groups([GROUP])[GROUP].result(20)
    except Exception as e:
        return f"no answer ({e})"
    return f"{d.state.name} coordinator {d.coordinator.id}, members " + \
        ", ".join(f"{m.member_id} ({len(m.assignment.topic_partitions)} partitions)" for m in d.members)


def one_fault(run: Run, copiers: Copiers) -> str | None:
    """One fault, named (None: skipped): on a copier, a coordinator (group or a copier's
    transaction coordinator) or the cluster."""
    r = run.rng.random()
    if r < run.a.copier_share:
        return copiers.fault()
    if r < run.a.copier_share + run.a.coordinator_share:
        role = run.rng.choice(["group coordinator", "txn coordinator"])
        node = coordinator(run) if role == "group coordinator" else \
            txn_coordinator(run, f"copier-{run.rng.choice(sorted(copiers.kinds))}")
        return run.role_fault(role, node)
    return run.cluster_fault()


def main(a) -> int:
    directory = a.dir or tempfile.mkdtemp(prefix="eos-checker-")
    a.overrides = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": str(a.offsets_partitions),
                   "transaction.state.log.num.partitions": str(a.offsets_partitions)}
    run = Run(a, directory)
    copiers = Copiers(run, directory)
    reader = Reader(run, "eos-live-reader")
    producers, kinds, caught_up, read_to_end, final, final_at = [], {}, False, False, {}, float("inf")
    try:
        run.start_cluster()
        run.create({OUTPUT: (a.partitions, {"min.insync.replicas": "2"})})
        producers = start_producers(run, directory)
        for name in sorted(copiers.kinds):
            copiers.start(name)
        reader.start()
        kinds = run.fault_loop(lambda: one_fault(run, copiers), copiers)
        load_end = heal_and_stop_producers(run, producers)
        run.check_crashes()
        copiers.check_crashes()
        run.wait(run.isr_full, a.final_settle)
        caught_up, final, ends = run.until_caught_up(lambda: end_offsets(run), lambda: ask_group(run, 5)[1],
                                                     a.final_settle, copiers)
        run.log(f"copiers caught up: {caught_up}; committed {final}, input ends {ends}")
        if not caught_up:
            group_state = describe_group(run)
            run.log(f"the group as its coordinator describes it: {group_state}")
        copiers.stop()
        reader.stopped.set()
        reader.join(10)
        try:
            final_at = time.time()
            _, final = ask_group(run, 5)
        except Exception:
            final_at = float("inf")
        end_reader = Reader(run, "eos-final-reader")
        read_to_end = end_reader.read_all(a.final_settle)
        acks, _, load_start, fatal = read_history([out for _, out in producers])
        attempts = read_copiers(list(copiers.paths.values()))
        v = history.verdict([(x.partition, x.offset, x.value) for x in acks], attempts, reader.copies,
                            end_reader.copies, final, final_at)
    finally:
        for p, _ in producers:
            if p.poll() is None:
                p.kill()
        for p in copiers.procs.values():
            if p.poll() is None:
                p.kill()
        run.cluster.close()
    extra = [("seconds under load", f"{load_end - load_start:.0f}"),
             ("kraft processes that exited on their own", len(run.crashes)),
             ("copier processes that exited (fenced or failed)", len(copiers.crashes)),
             ("the copiers caught up with every input partition", caught_up),
             ("the final reader reached the end of the output", read_to_end)]
    print(history.markdown(v, title=f"Exactly-once check: {a.minutes:g} min, seed {a.seed}", faults=kinds,
                           extra_rows=extra))
    passed = v.ok and caught_up and read_to_end and not run.crashes
    if a.json:
        with open(a.json, "w") as f:
            json.dump({**v.summary(), "faults": kinds, "seed": a.seed, "crashes": run.crashes,
                       "copier_exits": copiers.crashes, "caught_up": caught_up, "read_to_end": read_to_end,
                       "fatal": fatal, "examples": {k: getattr(v, k)[:5] for k in v.ANOMALIES},
                       "passed": passed}, f, indent=1)
    if passed and not a.keep and not a.dir:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        print(f"\nlogs and data kept in {directory}")
    return 0 if passed else 1


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    co = sub.add_parser("copy", help="(internal) one copier")
    co.add_argument("--bootstrap", required=True)
    co.add_argument("--name", required=True)
    co.add_argument("--out", required=True)
    co.add_argument("--batch", type=int, default=100)
    co.add_argument("--abort-share", type=float, default=0.1)
    co.add_argument("--seed", type=int, default=1)
    co.add_argument("--rdkafka-debug", default="")
    co.add_argument("--stuck-s", type=float, default=45.0)
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--interval", type=float, default=6.0, help="mean seconds between faults")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--controllers", type=int, default=3)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--combined", action="store_true", help="the controllers are broker,controller nodes")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rate", type=float, default=100, help="input records/s")
    ap.add_argument("--copiers", type=int, default=3)
    ap.add_argument("--batch", type=int, default=100, help="records per transaction at most")
    ap.add_argument("--abort-share", type=float, default=0.1,
                    help="fraction of transactions the copiers abort on purpose (then copy again)")
    ap.add_argument("--rdkafka-debug", default="", help="librdkafka debug contexts for the copiers (e.g. cgrp)")
    ap.add_argument("--offsets-partitions", type=int, default=6,
                    help="offsets.topic.num.partitions and transaction.state.log.num.partitions")
    ap.add_argument("--faults", dest="fault_kinds", default="kill,pause,restart", type=lambda s: s.split(","))
    ap.add_argument("--copier-share", type=float, default=0.35, help="fraction of faults on copiers")
    ap.add_argument("--coordinator-share", type=float, default=0.3,
                    help="fraction of faults on the group's or a copier's transaction coordinator")
    ap.add_argument("--controller-share", type=float, default=0.2,
                    help="of the other broker faults, the fraction on the active controller")
    ap.add_argument("--whole-cluster-share", type=float, default=0.2)
    ap.add_argument("--replica-lag-ms", type=int, default=5000)
    ap.add_argument("--settle", type=float, default=30.0)
    ap.add_argument("--final-settle", type=float, default=120.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    a.snapshot_bytes, a.filler_topics, a.filler_partitions, a.producers = 0, 0, 4, 1  # what Run reads
    unknown = set(a.fault_kinds or ()) - set(ONE_NODE + WHOLE_CLUSTER)
    if unknown:
        ap.error(f"--faults: unknown kinds {sorted(unknown)}")
    return a


if __name__ == "__main__":
    import faulthandler
    faulthandler.enable()
    args = parse()
    sys.exit(copy_main(args) if args.cmd == "copy" else main(args))
