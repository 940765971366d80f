"""Jepsen-style check of consumer groups: real kraft processes, real Kafka clients, faults on
brokers (the group's coordinator included) and on the consumers themselves, then the verdict
of ``tools/group_history.py``: every acknowledged record read at least once, committed offsets
never going backwards, no acknowledged commit lost, offsets in order within each ownership.

The cluster and its broker faults are the replication checker's (``tools/checker_cluster.py``:
SIGKILL, SIGSTOP, SIGTERM-restart of a broker or of the active controller; ``--faults`` adds
whole-cluster ones). Producers are the replication checker's too (acks=all, every delivery
report kept). A group of ``--consumers`` consumer processes (confluent-kafka; classic
members with ``--assignor``, cooperative-sticky by default, or ``--protocol consumer`` for KIP-848,
or ``mixed``)
subscribes to the topic, records every record it reads and every assignment and revocation,
and commits synchronously every ``--commit-every`` records or 500 ms (and before giving up
partitions), recording each acknowledged commit with when it started and ended. A watcher
reads the group's committed offsets every second. The nemesis hits, in turn, the cluster (a
broker, the active controller, or the group's coordinator, found with DescribeGroups) and the
consumers (SIGKILL and a restart, or SIGSTOP for 1-10 s: past the 6 s session a paused member is
a zombie whose late commits must be refused).

At the end: everything healed, producers stopped, the group left to catch up until its
committed offsets reach every partition's high watermark (``--final-settle``), consumers
stopped with SIGTERM, the verdict printed as Markdown.

    python tools/group_checker.py --minutes 30 --interval 6 --seed 1 [--json out.json] [--dir DIR]

Exit status 0 only with a PASS verdict, no process crash and the group caught up.
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
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import group_history as history
from checker_cluster import ONE_NODE, TOPIC, WHOLE_CLUSTER, Run, quiet_logger
from replication_checker import heal_and_stop_producers, read_history, start_producers

GROUP = "checked-group"


# --- consumer process ------------------------------------------------------------------------------
def consume_main(a) -> int:
    """One group member; tab-separated lines in ``out``: ``G t p,p`` assigned, ``R t p,p``
    revoked, ``L t p,p`` lost, ``M p offset t value``, ``C p offset started acked`` per
    acknowledged commit, ``E t error`` for a failed commit."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    out = open(a.out, "a", buffering=1)  # line-buffered: a SIGKILL loses at most the line being written
    conf = {"bootstrap.servers": a.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "client.id": a.name, "logger": quiet_logger(),
            "topic.metadata.refresh.interval.ms": 2000}
    if a.protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
                     "partition.assignment.strategy": a.assignor})
    c = Consumer(conf)
    owned: set[int] = set()

    def commit(partitions) -> None:
        positions = [tp for tp in c.position([TopicPartition(TOPIC, p) for p in sorted(partitions)])
                     if tp.offset >= 0]
        if not positions:
            return
        started = time.time()
        try:
            result = c.commit(offsets=positions, asynchronous=False)
        except KafkaException as e:
            out.write(f"E\t{time.time():.6f}\t{e.args[0].name() if e.args else e}\n")
            return
        acked = time.time()
        for tp in result or ():
            if tp.error is None:
                out.write(f"C\t{tp.partition}\t{tp.offset}\t{started:.6f}\t{acked:.6f}\n")

    def on_assign(consumer, parts):
        owned.update(tp.partition for tp in parts)
        out.write(f"G\t{time.time():.6f}\t{','.join(str(tp.partition) for tp in parts)}\n")

    def on_revoke(consumer, parts):
        commit({tp.partition for tp in parts} & owned)  # what a careful application does
        owned.difference_update(tp.partition for tp in parts)
        out.write(f"R\t{time.time():.6f}\t{','.join(str(tp.partition) for tp in parts)}\n")

    def on_lost(consumer, parts):
        owned.difference_update(tp.partition for tp in parts)
        out.write(f"L\t{time.time():.6f}\t{','.join(str(tp.partition) for tp in parts)}\n")

    c.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    since, last_commit = 0, time.monotonic()
    try:
        while not stop:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                out.write(f"M\t{m.partition()}\t{m.offset()}\t{time.time():.6f}\t{m.value().decode()}\n")
                since += 1
            if owned and (since >= a.commit_every or time.monotonic() - last_commit > 0.5) and since:
                commit(owned)
                since, last_commit = 0, time.monotonic()
        if owned:
            commit(owned)
    finally:
        c.close()
        out.close()
    return 0


def read_consumers(paths) -> tuple[list, list]:
    """(reads, commits) from the consumers' files; a read belongs to the ownership period that
    began with the consumer's latest assignment of its partition."""
    reads, commits = [], []
    for path in paths:
        name = os.path.basename(path)[len("consumer-"):-len(".tsv")]
        period: dict[int, int] = {}
        counter = 0
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # the line a SIGKILL cut short
                parts = line.rstrip("\n").split("\t")
                kind = parts[0]
                if kind in ("G", "R", "L") and len(parts) == 3:
                    for p in (int(x) for x in parts[2].split(",") if x):
                        counter += 1
                        period[p] = counter if kind == "G" else -counter
                elif kind == "S":  # a new process of this consumer: nothing is owned any more
                    counter += 1
                    period = {}
                elif kind == "M" and len(parts) == 5:
                    p = int(parts[1])
                    reads.append(history.Read(name, p, int(parts[2]), parts[4].encode(), float(parts[3]),
                                              period.get(p, 0)))
                elif kind == "C" and len(parts) == 5:
                    commits.append(history.Commit(name, int(parts[1]), int(parts[2]), float(parts[3]),
                                                  float(parts[4])))
    return reads, commits


# --- the run ---------------------------------------------------------------------------------------
class Members:
    """The consumer processes: started, killed, paused, restarted."""

    def __init__(self, run: Run, directory: str):
        self.run, self.directory = run, directory
        self.procs: dict[str, subprocess.Popen] = {}
        self.paths: dict[str, str] = {}
        self.crashes: list = []
        a = run.a
        # A classic group's members must share an assignor (else INCONSISTENT_GROUP_PROTOCOL)
        kinds = {"classic": [a.assignor], "consumer": ["consumer"], "mixed": [a.assignor, "consumer"]}[a.protocol]
        self.kinds = {f"c{i}": kinds[i % len(kinds)] for i in range(a.consumers)}

    def start(self, name: str) -> None:
        from kraft.cli.local_cluster import _die_with_parent
        path = self.paths.setdefault(name, os.path.join(self.directory, f"consumer-{name}.tsv"))
        with open(path, "a") as f:
            f.write(f"S\t{time.time():.6f}\n")
        kind = self.kinds[name]
        cmd = [sys.executable, os.path.abspath(__file__), "consume", "--bootstrap", self.run.cluster.broker_bootstrap,
               "--name", name, "--out", path, "--commit-every", str(self.run.a.commit_every),
               "--protocol", "consumer" if kind == "consumer" else "classic",
               "--assignor", "range" if kind == "consumer" else kind]
        self.procs[name] = subprocess.Popen(cmd, preexec_fn=_die_with_parent, stderr=open(path + ".err", "a"))

    def check_crashes(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                self.crashes.append({"consumer": name, "exit": p.returncode})
                self.run.log(f"!! consumer {name} exited on its own with {p.returncode}; restarting it")
                self.start(name)

    def fault(self) -> str:
        rng = self.run.rng
        name = rng.choice(sorted(self.procs))
        p = self.procs[name]
        if rng.random() < 0.5:
            p.kill()
            p.wait()
            time.sleep(rng.uniform(0.5, 3))
            self.start(name)
            return "kill consumer"
        down = rng.uniform(1, 10)
        p.send_signal(signal.SIGSTOP)
        try:
            time.sleep(down)
        finally:
            p.send_signal(signal.SIGCONT)
        return "pause consumer" + (" (zombie)" if down > 6 else "")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


async def _ask_group(bootstrap: list, timeout_s: float = 5.0):
    """(coordinator id, {partition: committed offset}) asked with kraft's own client:
    FindCoordinator at each broker in turn, then OffsetFetch v7 at the coordinator.
    librdkafka's admin client asserted (rd_kafka_enq_once_del_source_return, a process abort)
    when its coordinator-based calls timed out while a coordinator was being killed."""
    from kraft.client.node_client import NodeClient
    from kraft.protocol.messages.group_membership import FindCoordinatorRequest
    from kraft.protocol.messages.group_offsets import OffsetFetchRequest

    async def ask(address, request, version):
        client = NodeClient(*address, client_id="group-checker", request_timeout_ms=int(timeout_s * 1000))
        try:
            return await client.request(request, version)
        finally:
            await client.close()

    for address in bootstrap:
        try:
            found = await ask(address, FindCoordinatorRequest(key=GROUP, key_type=0), 3)
        except Exception:
            continue
        if found.error_code != 0:
            continue
        answer = await ask((found.host, found.port), OffsetFetchRequest(group_id=GROUP, topics=None), 7)
        offsets = {p.partition_index: p.committed_offset for t in answer.topics if t.name == TOPIC
                   for p in t.partitions if p.error_code == 0 and p.committed_offset >= 0}
        return found.node_id, offsets
    raise RuntimeError("no broker named the group's coordinator")


def ask_group(run: Run, timeout_s: float = 5.0):
    import asyncio
    addresses = [run.cluster.broker_address(i) for i in run.cluster.broker_ids]
    run.rng_shuffle = getattr(run, "rng_shuffle", 0) + 1
    rotation = run.rng_shuffle % len(addresses)  # not always the same broker first
    return asyncio.run(_ask_group(addresses[rotation:] + addresses[:rotation], timeout_s))


class Watcher(threading.Thread):
    """Reads the group's committed offsets every second (OffsetFetch at the coordinator)."""

    def __init__(self, run: Run):
        super().__init__(daemon=True)
        self.checker, self.seen, self.stopped = run, [], threading.Event()

    def committed(self, timeout: float = 5):
        started = time.time()
        _, offsets = ask_group(self.checker, timeout)
        return started, offsets

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            try:
                started, offsets = self.committed()
            except Exception:
                continue  # no answer (a coordinator moving): nothing observed
            self.seen.append(history.Observed(started, offsets))


def coordinator(run: Run) -> int | None:
    try:
        return ask_group(run, 3)[0]
    except Exception:
        return None


def one_fault(run: Run, members: Members) -> str | None:
    """One fault, named (None: skipped): on a consumer, the group coordinator or the cluster."""
    r = run.rng.random()
    if r < run.a.consumer_share:
        return members.fault()
    if r < run.a.consumer_share + run.a.coordinator_share:
        return run.role_fault("coordinator", coordinator(run))
    return run.cluster_fault()


def end_offsets(run: Run) -> dict:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec
    futures = run.admin.list_offsets({TopicPartition(TOPIC, p): OffsetSpec.latest() for p in range(run.a.partitions)},
                                     request_timeout=5)
    return {tp.partition: f.result(10).offset for tp, f in futures.items()}


def main(a) -> int:
    directory = a.dir or tempfile.mkdtemp(prefix="group-checker-")
    a.overrides = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": str(a.offsets_partitions)}
    run = Run(a, directory)
    members = Members(run, directory)
    watcher = Watcher(run)
    producers, kinds, caught_up, final = [], {}, False, {}
    try:
        run.start_cluster()
        producers = start_producers(run, directory)
        for name in sorted(members.kinds):
            members.start(name)
        watcher.start()
        kinds = run.fault_loop(lambda: one_fault(run, members), members)
        load_end = heal_and_stop_producers(run, producers)
        run.check_crashes()
        members.check_crashes()
        run.wait(run.isr_full, a.final_settle)
        caught_up, final, ends = run.until_caught_up(lambda: end_offsets(run), lambda: watcher.committed()[1],
                                                     a.final_settle)
        run.log(f"group caught up: {caught_up}; committed {final}, ends {ends}")
        members.stop()
        watcher.stopped.set()
        watcher.join(10)
        try:
            _, final = watcher.committed()
        except Exception:
            pass
        acks, _, load_start, fatal = read_history([out for _, out in producers])
        reads, commits = read_consumers(list(members.paths.values()))
        v = history.verdict([(x.partition, x.offset, x.value) for x in acks], reads, commits, watcher.seen, final)
    finally:
        for p, _ in producers:
            if p.poll() is None:
                p.kill()
        for p in members.procs.values():
            if p.poll() is None:
                p.kill()
        run.cluster.close()
    extra = [("seconds under load", f"{load_end - load_start:.0f}"),
             ("consumers", ", ".join(f"{n} {k}" for n, k in sorted(members.kinds.items()))),
             ("kraft processes that exited on their own", len(run.crashes)),
             ("consumers that exited on their own", len(members.crashes)),
             ("the group caught up with every partition at the end", caught_up)]
    print(history.markdown(v, title=f"Group check: {a.minutes:g} min, seed {a.seed}", faults=kinds, extra_rows=extra))
    passed = v.ok and caught_up and not run.crashes
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"acked": v.acked, "reads": v.reads, "duplicates": v.duplicates, "commits": v.commits,
                       "observations": v.observations, "assignments": v.assignments, "skipped": len(v.skipped),
                       "not_reached": len(v.not_reached), "out_of_order": len(v.out_of_order), "gaps": len(v.gaps),
                       "backwards": len(v.backwards), "lost_commits": len(v.lost_commits), "faults": kinds,
                       "crashes": run.crashes, "consumer_crashes": members.crashes, "caught_up": caught_up,
                       "fatal": fatal, "passed": passed}, f, indent=1)
    if passed and not a.keep and not a.dir:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        print(f"\nlogs and data kept in {directory}")
    return 0 if passed else 1


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    co = sub.add_parser("consume", help="(internal) one group member")
    co.add_argument("--bootstrap", required=True)
    co.add_argument("--name", required=True)
    co.add_argument("--out", required=True)
    co.add_argument("--commit-every", type=int, default=50)
    co.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    co.add_argument("--assignor", default="cooperative-sticky")
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--interval", type=float, default=6.0, help="mean seconds between faults")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--controllers", type=int, default=3)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--combined", action="store_true", help="the controllers are broker,controller nodes")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--rate", type=float, default=100, help="records/s per producer")
    ap.add_argument("--consumers", type=int, default=3)
    ap.add_argument("--protocol", choices=("classic", "consumer", "mixed"), default="classic",
                    help="classic: --assignor members; consumer: KIP-848; mixed: both kinds")
    ap.add_argument("--assignor", default="cooperative-sticky", help="the classic members' assignor")
    ap.add_argument("--commit-every", type=int, default=50)
    ap.add_argument("--offsets-partitions", type=int, default=10, help="offsets.topic.num.partitions")
    ap.add_argument("--faults", dest="fault_kinds", default="kill,pause,restart", type=lambda s: s.split(","))
    ap.add_argument("--consumer-share", type=float, default=0.35, help="fraction of faults on consumers")
    ap.add_argument("--coordinator-share", type=float, default=0.25,
                    help="fraction of faults on the group's coordinator")
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
    a.snapshot_bytes, a.filler_topics, a.filler_partitions = 0, 0, 4  # what checker_cluster.Run reads
    unknown = set(a.fault_kinds or ()) - set(ONE_NODE + WHOLE_CLUSTER)
    if unknown:
        ap.error(f"--faults: unknown kinds {sorted(unknown)}")
    return a


if __name__ == "__main__":
    import faulthandler
    faulthandler.enable()  # a crash inside the client library shows where Python was
    args = parse()
    sys.exit(consume_main(args) if args.cmd == "consume" else main(args))
