"""The cluster and the nemesis of ``tools/replication_checker.py``: real ``kraft server start``
processes (LocalCluster), the checked topic, filler topics that make the metadata log long,
and the faults.

Faults on one process (a broker, or the active controller): ``kill`` (SIGKILL, restarted
1-4 s later), ``pause`` (SIGSTOP for 1-6 s), ``restart`` (SIGTERM: a controlled shutdown,
then a start). Faults on the whole cluster: ``rolling`` (every node stopped with SIGTERM
and started again, one after the other, each back in the ISR before the next), ``term-all``
(every node SIGTERMed at once, then all started: an operator's cluster restart) and
``kill-all`` (every node SIGKILLed at once: a power loss; page cache survives, so what was
written must be found). After each fault the nemesis waits (up to ``--settle`` s, longer for
whole-cluster faults) until every replica of the checked topic is back in the ISR.

With many filler partitions and a small ``--snapshot-bytes``, the metadata log spans
snapshots, so a restart loads a snapshot and replays a log suffix: the case where brokers
once acted on a partial metadata image and renamed live partitions ``-stray``.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

TOPIC = "checked"
ISR_SIZE = 3
ONE_NODE = ("kill", "pause", "restart")
WHOLE_CLUSTER = ("rolling", "term-all", "kill-all")
FILLER_PREFIX = "filler-"


def quiet_logger():
    import logging

    quiet = logging.getLogger("replication-checker-rdkafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    return quiet


class Run:
    def __init__(self, a, directory: str):
        from confluent_kafka.admin import AdminClient

        from kraft.cli.local_cluster import LOW_LATENCY, LocalCluster

        self.a = a
        self.rng = random.Random(a.seed)
        overrides = {**LOW_LATENCY, "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
                     "replica.lag.time.max.ms": str(a.replica_lag_ms), "replica.fetch.wait.max.ms": "200",
                     "replica.fetch.backoff.ms": "100", "log.segment.bytes": str(1 << 20)}
        overrides.update(getattr(a, "overrides", None) or {})  # a checker's own settings (e.g. groups)
        if a.snapshot_bytes:
            # Snapshots every few KB of metadata, and the log below the older ones deleted: a
            # restart loads a snapshot, then a log suffix.
            overrides.update({"metadata.log.max.record.bytes.between.snapshots": str(a.snapshot_bytes),
                              "metadata.log.segment.bytes": str(max(4 * a.snapshot_bytes, 1 << 16)),
                              "metadata.max.retention.bytes": "1"})
        self.cluster = LocalCluster(directory, a.controllers, brokers=a.brokers, overrides=overrides,
                                    log_level="INFO", combined=a.combined).create()
        self.admin_factory = lambda: AdminClient({"bootstrap.servers": self.cluster.broker_bootstrap,
                                                  "logger": quiet_logger()})
        self.admin = None
        self.faults: list[dict] = []
        self.crashes: list[dict] = []
        self.t0 = time.time()

    def log(self, msg: str) -> None:
        print(f"[{time.time() - self.t0:7.1f}s] {msg}", flush=True)

    # -- observing --
    def active_controller(self) -> int | None:
        from kraft.client.quorum import QuorumClient

        async def ask():
            client = QuorumClient([self.cluster.address(i) for i in self.cluster.controller_ids])
            try:
                return (await client.describe(3)).leader_id
            finally:
                await client.close()
        try:
            leader = asyncio.run(ask())
        except Exception:
            return None
        return leader if leader in self.cluster.controller_ids else None

    def partitions(self):
        """partition -> (leader, isr) as one broker sees it; None if no broker answered."""
        try:
            md = self.admin.list_topics(TOPIC, timeout=3).topics.get(TOPIC)
        except Exception:
            return None
        if md is None or md.error is not None:
            return None
        return {p: (m.leader, sorted(m.isrs)) for p, m in md.partitions.items()}

    def isr_full(self) -> bool:
        parts = self.partitions()
        return bool(parts) and len(parts) == self.a.partitions and all(
            leader >= 0 and len(isr) == ISR_SIZE for leader, isr in parts.values())

    def wait(self, predicate, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return True
            time.sleep(0.25)
        return predicate()

    # -- setting up --
    def create(self, topics: dict, timeout: float = 120) -> None:
        """Create ``topics`` (name -> (partitions, configs)), retrying until every one exists."""
        from confluent_kafka.admin import NewTopic

        end = time.monotonic() + timeout
        todo = dict(topics)
        while todo:
            names = list(todo)[:250]
            futures = self.admin.create_topics([NewTopic(n, todo[n][0], ISR_SIZE, config=todo[n][1]) for n in names],
                                               operation_timeout=60)
            for name, fut in futures.items():
                try:
                    fut.result(120)
                    todo.pop(name)
                except Exception as e:
                    if "TOPIC_ALREADY_EXISTS" in str(e):
                        todo.pop(name)
                    elif time.monotonic() > end:
                        raise RuntimeError(f"could not create {name}: {e}; exits {self.cluster.unexpected_exits()}")
            if todo:
                time.sleep(1)

    def start_cluster(self) -> None:
        self.cluster.start()
        self.admin = self.admin_factory()
        self.create({TOPIC: (self.a.partitions, {"min.insync.replicas": "2"})})
        fillers = {f"{FILLER_PREFIX}{i:04d}": (self.a.filler_partitions, {}) for i in range(self.a.filler_topics)}
        if fillers:
            self.create(fillers, timeout=600)
        if not self.wait(self.isr_full, 120):
            raise RuntimeError(f"the topic never had a full ISR: {self.partitions()}")
        # Brokers make new logs off their event loop: wait until every replica is on disk.
        want = ISR_SIZE * (self.a.partitions + len(fillers) * self.a.filler_partitions)
        if not self.wait(lambda: len(self.replica_layout()[0]) >= want, 120):
            raise RuntimeError(f"only {len(self.replica_layout()[0])} of {want} replica directories were made")
        self.log(f"cluster up: controllers {self.cluster.controller_ids}{' (combined)' if self.a.combined else ''}, "
                 f"brokers {self.cluster.broker_ids}, topic {TOPIC} x{self.a.partitions} RF {ISR_SIZE}, "
                 f"{len(fillers)} filler topics x{self.a.filler_partitions}")

    # -- faults --
    def check_crashes(self) -> None:
        for node, code in self.cluster.unexpected_exits().items():
            tail = self.cluster.log_tail(node, 12)
            self.crashes.append({"t": round(time.time() - self.t0, 1), "node": node, "exit": code, "tail": tail})
            self.log(f"!! node {node} exited on its own with {code}:\n    " + "\n    ".join(tail))
            self.cluster.start(node)

    def pick(self) -> str:
        """A fault kind: a whole-cluster one with probability ``--whole-cluster-share`` when
        both sorts are allowed (they take 20-60 s each), else one of the sort allowed."""
        whole = [k for k in self.a.fault_kinds if k in WHOLE_CLUSTER]
        one = [k for k in self.a.fault_kinds if k in ONE_NODE]
        unknown = set(self.a.fault_kinds) - set(whole) - set(one)
        if unknown:
            raise SystemExit(f"--faults: unknown kinds {sorted(unknown)}; known: {ONE_NODE + WHOLE_CLUSTER}")
        if whole and (not one or self.rng.random() < self.a.whole_cluster_share):
            return self.rng.choice(whole)
        return self.rng.choice(one)

    def one_fault(self) -> None:
        kind = self.pick()
        started = time.time()
        if kind in WHOLE_CLUSTER:
            node, role = None, "cluster"
            down = self._whole_cluster(kind)
            settle = max(self.a.settle, 120)
        else:
            if self.rng.random() < self.a.controller_share:
                node, role = self.active_controller(), "active controller"
                if node is None:
                    self.log("no active controller to hit; skipping")
                    return
            else:
                node, role = self.rng.choice(self.cluster.broker_ids), "broker"
            down = self._one_node(kind, node)
            settle = self.a.settle
        settled = self.wait(self.isr_full, settle)
        fault = {"t": round(started - self.t0, 1), "kind": kind, "node": node, "role": role,
                 "down_s": round(down, 1), "settled_s": round(time.time() - started, 1), "isr_full": settled}
        self.faults.append(fault)
        self.log(f"fault {len(self.faults)}: {kind} {role} {node or ''} down {down:.1f} s; "
                 f"ISR {'full' if settled else 'NOT full'} after {fault['settled_s']} s")

    def role_fault(self, role: str, node: int | None) -> str | None:
        """A one-node fault on ``node``, which plays ``role`` (a coordinator); the fault's kind
        and role, or None when no such node was found (``node`` None or not a broker)."""
        if node is None or node not in self.cluster.broker_ids:
            self.log(f"no {role} found; skipping")
            return None
        fault = self.rng.choice(ONE_NODE)
        down = self._one_node(fault, node)
        settled = self.wait(self.isr_full, self.a.settle)
        self.faults.append({"kind": fault, "role": role, "node": node, "down_s": round(down, 1), "isr_full": settled})
        return f"{fault} {role}"

    def cluster_fault(self) -> str | None:
        """``one_fault`` named as the checkers count it ("kill broker"), None if it was skipped."""
        before = len(self.faults)
        self.one_fault()
        if len(self.faults) == before:
            return None
        f = self.faults[-1]
        return f"{f['kind']} {f['role'].split()[-1]}"

    def fault_loop(self, one_fault, *clients) -> dict:
        """After ``--warmup``, a fault every ``--interval`` s on average for ``--minutes``:
        ``one_fault()`` names the fault it did (None: skipped). Before each, nodes and
        ``clients`` (each with ``check_crashes()``) that exited on their own are restarted.
        Returns {fault name: count}."""
        kinds: dict = {}
        time.sleep(self.a.warmup)
        deadline = time.monotonic() + self.a.minutes * 60
        while time.monotonic() < deadline:
            time.sleep(self.rng.uniform(0.5, 1.5) * self.a.interval)
            self.check_crashes()
            for c in clients:
                c.check_crashes()
            if time.monotonic() < deadline:
                kind = one_fault()
                if kind is not None:
                    kinds[kind] = kinds.get(kind, 0) + 1
                    self.log(f"fault: {kind}")
        return kinds

    def until_caught_up(self, ends, committed, timeout: float, *clients) -> tuple[bool, dict, dict]:
        """Poll until the group's ``committed()`` offsets reach ``ends()`` on every partition, for
        at most ``timeout`` s: (caught up, committed, ends). A failing poll is tried again."""
        end_by, got, last = time.monotonic() + timeout, {}, {}
        while time.monotonic() < end_by:
            for c in clients:
                c.check_crashes()
            try:
                last = ends()
                got = committed()
            except Exception:
                time.sleep(1)
                continue
            if all(got.get(q, -1) >= last[q] for q in last):
                return True, got, last
            time.sleep(1)
        return False, got, last

    def _one_node(self, kind: str, node: int) -> float:
        proc = self.cluster.procs[node]
        started = time.time()
        if kind == "kill":
            down = self.rng.uniform(1, 4)
            self.cluster.kill(node)
            time.sleep(down)
            self.cluster.start(node)
        elif kind == "pause":
            down = self.rng.uniform(1, 6)
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                time.sleep(down)
            finally:
                os.kill(proc.pid, signal.SIGCONT)
        else:  # restart: SIGTERM (a broker's controlled shutdown), then start again
            self.cluster.stop(node, timeout=30)
            down = time.time() - started
            self.cluster.start(node)
        return down

    def _whole_cluster(self, kind: str) -> float:
        cluster = self.cluster
        started = time.time()
        if kind == "rolling":
            for node in cluster.ids:
                cluster.stop(node, timeout=30)
                cluster.start(node)
                if not self.wait(self.isr_full, self.a.settle):
                    self.log(f"rolling restart: ISR not full {self.a.settle} s after node {node}")
            return time.time() - started
        cluster.signal_all(signal.SIGTERM if kind == "term-all" else signal.SIGKILL)
        down = time.time() - started
        time.sleep(self.rng.uniform(0.5, 2))
        cluster.start()
        return down

    def heal(self) -> None:
        for node, p in self.cluster.procs.items():
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
        for node in self.cluster.ids:
            if node not in self.cluster.running():
                self.cluster.start(node)

    def replica_layout(self) -> tuple[set, list]:
        """((node, topic, partition) of every live partition directory, [renamed -stray ones])."""
        from kraft.broker import partition_dir as names

        live, strays = set(), []
        for node in self.cluster.broker_ids:
            logs = self.cluster.partition_dir(node)
            for entry in os.listdir(logs) if os.path.isdir(logs) else []:
                if entry.endswith(names.STRAY_SUFFIX):
                    strays.append(f"node {node}: {entry}")
                    continue
                tp = names.parse_partition_dir(entry)
                if tp is not None and not names.is_deleted_dir(entry):
                    live.add((node, *tp))
        return live, strays
