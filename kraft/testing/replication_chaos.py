"""The replication simulator: brokers running the real replication cores
(``replication_broker``), a controller running the real lifecycle and AlterPartition handlers
(``replication_controller``), producers writing with acks=all and acks=1, and a random fault
schedule per seed, all on one virtual clock (``EventQueue``) and a ``SimulatedNetwork``.

Per seed: 3-5 brokers, 1-3 partitions of replication factor 3 (or all brokers), ELR and
``min.insync.replicas`` chosen at random; crashes are process kills (the page cache
survives) or, in power-loss seeds (with ELR on and min ISR 2, Kafka's answer to lost
unflushed data), power losses that drop every log's unflushed tail. Faults: crashes and
restarts, controlled shutdowns (leadership moved off first) and restarts, pauses (SIGSTOP)
past the session timeout or not, a broker cut off from everyone,
from the controller only, or from one peer, lossy and reordering links. After the fault
window everything heals and must converge: each partition acknowledges a new acks=all
write, then every replica holds the same log up to the HW (liveness and convergence).
Invariants (``replication_checks``) run after every event. A workload of
``kraft.testing.chaos``, which names the replay command of a failed seed:

    python -m kraft.testing.chaos --mode replication --seed 1234 --profile ci
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kraft.errors import ErrorCode
from kraft.testing.chaos import ChaosProfile, Workload
from kraft.testing.network import NetworkFaults, SimulatedNetwork
from kraft.testing.replication_broker import SimBroker
from kraft.testing.replication_checks import ReplicationChecks
from kraft.testing.replication_controller import TOPIC, SimController
from kraft.testing.scheduler import EventQueue

CONTROLLER = 0
PRODUCER = 100
CONTROLLER_TICK_MS = 50


#: liveness: after healing, every partition must acknowledge a write within the timeout
PROFILES = {
    "quick": ChaosProfile(duration_ms=6_000, fault_gap_ms=(200, 1_500), liveness_timeout_ms=60_000),
    "ci": ChaosProfile(duration_ms=12_000, fault_gap_ms=(200, 2_000), liveness_timeout_ms=60_000),
    "soak": ChaosProfile(duration_ms=60_000, fault_gap_ms=(200, 3_000), liveness_timeout_ms=60_000),
}


@dataclass(frozen=True)
class ReplicationResult:
    seed: int
    brokers: int
    partitions: int
    power_loss: bool
    elr: bool
    events: int
    faults: int
    acked: int
    leader_changes: int
    isr_changes: int
    controlled_shutdowns: int
    offline: int  # partitions left leaderless by KIP-966 (see ReplicationWorkload._online)
    simulated_ms: int


class SimProducer:
    """Writes unique values to each partition's leader as the controller's image names it
    (a client with fresh metadata) or, a ``stale_share`` of the time, to any replica (a client
    with stale metadata), at most ``max_in_flight`` requests out."""

    def __init__(self, sim, rng, *, acks_all_share: float, stale_share: float, max_in_flight: int = 8,
                 timeout_ms: int = 3_000):
        self.sim, self.rng = sim, rng
        self.stale_share = stale_share
        self.acks_all_share = acks_all_share
        self.max_in_flight = max_in_flight
        self.timeout_ms = timeout_ms
        self.next_value = 0
        self.next_request = 0
        self.in_flight: dict = {}  # request id -> (tp, values, acks, sent at)
        self.enabled = True
        self.acked_after: dict = {}  # tp -> acks=all writes acknowledged after ``mark``
        self.mark = None

    def tick(self) -> None:
        sim = self.sim
        now = sim.queue.now
        for rid, (_, _, _, sent) in list(self.in_flight.items()):
            if now - sent > self.timeout_ms + 2_000:  # lost on the way: the client gives up
                del self.in_flight[rid]
        if self.enabled and len(self.in_flight) < self.max_in_flight:
            topic = sim.controller.image.topics.by_name.get(TOPIC)
            if topic is not None:
                pid = self.rng.choice(sorted(topic.partitions))
                leader = topic.partitions[pid].leader
                if self.rng.random() < self.stale_share:  # a client with stale metadata
                    leader = self.rng.choice(topic.partitions[pid].replicas)
                if leader >= 0:
                    n = self.rng.randint(1, 3)
                    values = [f"v{self.next_value + i}".encode() for i in range(n)]
                    self.next_value += n
                    self.next_request += 1
                    acks = -1 if self.rng.random() < self.acks_all_share else 1
                    self.in_flight[self.next_request] = ((TOPIC, pid), values, acks, now)
                    sim.network.send(PRODUCER, leader, ("produce", self.next_request, (TOPIC, pid), values, acks,
                                                        self.timeout_ms))
        sim.queue.at(now + self.rng.randint(5, 40), ("producer",))

    def on_message(self, src: int, msg: tuple) -> None:
        _, rid, code, base = msg
        req = self.in_flight.pop(rid, None)
        if req is None:
            return
        tp, values, acks, _ = req
        if code == int(ErrorCode.NONE) and acks == -1:
            self.sim.checks.acked(tp, base, values, self.sim.brokers.values())
            if self.mark is not None:
                self.acked_after[tp] = self.acked_after.get(tp, 0) + 1


class ReplicationWorkload(Workload):
    PROFILES = PROFILES
    first_fault_ms = (1_000, 2_500)

    def __init__(self, seed: int, profile: ChaosProfile):
        self.seed = seed
        self.profile = profile
        rng = self.rng = random.Random(seed)
        self.queue = EventQueue()
        n = rng.randint(3, 5)
        self.power_loss = rng.random() < 0.3
        elr = self.power_loss or rng.random() < 0.3
        min_isr = 2 if self.power_loss else rng.choice([1, 2])
        self.session_timeout_ms = rng.choice([1_000, 2_000, 3_000])
        lag_max_ms = rng.choice([500, 1_000, 3_000])
        fetch_max_bytes = rng.choice([200, 1_000, 1 << 20])
        faults = NetworkFaults.random(rng)
        faults.duplicate_rate = 0.0  # requests are not idempotent here; links are TCP-like
        self.network = SimulatedNetwork(self.queue, rng, faults)
        settings = {"min.insync.replicas": str(min_isr), "unclean.leader.election.enable": "false",
                    "eligible.leader.replicas.enable": "true" if elr else "false"}
        self.checks = ReplicationChecks(power_loss=self.power_loss, elr=elr)
        self.controller = SimController(range(1, n + 1), partitions=rng.randint(1, 3),
                                        replication_factor=min(3, n), settings=settings,
                                        session_timeout_ms=self.session_timeout_ms, rng=rng)
        self.brokers = {b: SimBroker(self, b, lag_max_ms=lag_max_ms, session_timeout_ms=self.session_timeout_ms,
                                     min_isr=min_isr, flush_interval_ms=rng.randint(20, 400),
                                     fetch_max_bytes=fetch_max_bytes)
                        for b in range(1, n + 1)}
        self.producer = SimProducer(self, rng, acks_all_share=rng.choice([0.5, 0.9, 1.0]),
                                    stale_share=rng.choice([0.0, 0.1, 0.3]))
        self.events = 0
        self.elr = elr
        self.min_isr = min_isr
        self.controlled_shutdowns = 0
        self.offline: set = set()  # partitions KIP-966 leaves without a leader (see _online)

    @property
    def now(self) -> int:
        return self.queue.now

    # --- the event loop --------------------------------------------------------------------------
    def run_until(self, t_ms: int, until=None) -> bool:
        q = self.queue
        while q.peek_time() is not None and q.peek_time() <= t_ms:
            self.step(q.pop())
            if until is not None and until():
                return True
        q.now = max(q.now, t_ms)
        return False

    def step(self, event) -> None:
        self.events += 1
        kind = event[0]
        if kind == "deliver":
            _, src, dst, msg = event
            if not self.network.can_reach(src, dst):
                return  # cut while in flight
            if dst == CONTROLLER:
                self._controller_message(src, msg)
            elif dst == PRODUCER:
                self.producer.on_message(src, msg)
            else:
                b = self.brokers[dst]
                if not b.alive:
                    return
                if b.paused_until > self.now:
                    self.queue.at(b.paused_until, event)  # waits in the socket buffer
                    return
                b.on_message(src, msg)
        elif kind == "timer":
            _, bid, incarnation, what, args = event
            b = self.brokers[bid]
            if not b.alive or b.incarnation != incarnation:
                return
            if b.paused_until > self.now:
                self.queue.at(b.paused_until, event)
                return
            b.on_timer(what, args)
        elif kind == "ctick":
            self.controller.tick(self.now)
            self.queue.at(self.now + CONTROLLER_TICK_MS, ("ctick",))
        elif kind == "producer":
            self.producer.tick()
        elif kind == "call":
            event[1]()
        elif kind == "restart":
            b = self.brokers[event[1]]
            if not b.alive:
                b.start()
        self.checks.after_event(self)

    def _controller_message(self, src: int, msg: tuple) -> None:
        kind = msg[0]
        if kind == "creq":
            _, token, serial, req = msg
            resp = self.controller.handle(req, self.now)
            self.network.send(CONTROLLER, src, ("cresp", token, serial, resp))
        elif kind == "mfetch":
            _, token, offset = msg
            records = self.controller.records
            self.network.send(CONTROLLER, src, ("mrecords", token, offset, records[offset:offset + 200],
                                                len(records)))

    def schedule(self, at_ms: int, fn) -> None:
        self.queue.at(at_ms, ("call", fn))

    # --- faults ----------------------------------------------------------------------------------
    def inject(self) -> None:
        rng, now = self.rng, self.now
        ids = sorted(self.brokers)
        b = self.brokers[rng.choice(ids)]
        leaders = self._leaders()
        if leaders and rng.random() < 0.5:
            b = self.brokers[rng.choice(leaders)]  # the interesting one
        r = rng.random()
        if r < 0.25:
            if b.alive:
                b.crash(self.power_loss)
                self.queue.at(now + rng.randint(50, 3 * self.session_timeout_ms), ("restart", b.id))
        elif r < 0.4:
            b.paused_until = now + rng.randint(50, 2 * self.session_timeout_ms)
        elif r < 0.55:
            self.network.isolate(b.id, [CONTROLLER, PRODUCER] + ids)
        elif r < 0.65:
            self.network.cut(b.id, CONTROLLER)
        elif r < 0.75:
            other = rng.choice([i for i in ids if i != b.id])
            self.network.cut(b.id, other)
        elif r < 0.88:
            self.network.heal()
        elif r < 0.94:
            if b.alive and b.lifecycle.registered:
                b.lifecycle.begin_controlled_shutdown()
                self.controlled_shutdowns += 1
        else:
            self.network.faults.drop_rate = rng.choice([0.0, 0.01, 0.05, 0.2])

    def stopped(self, broker) -> None:
        """A broker finished a controlled shutdown: it comes back after a while."""
        self.queue.at(self.now + self.rng.randint(50, 2 * self.session_timeout_ms), ("restart", broker.id))

    def _leaders(self) -> list:
        topic = self.controller.image.topics.by_name.get(TOPIC)
        if topic is None:
            return []
        return sorted({r.leader for r in topic.partitions.values() if r.leader > 0})

    # --- a run -----------------------------------------------------------------------------------
    def start(self) -> None:
        self.changes = changes = {"leader": 0, "isr": 0}

        def count(records):
            for r in records:
                if type(r).__name__ == "PartitionChangeRecord":
                    if r.leader != -2:
                        changes["leader"] += 1
                    if r.isr is not None:
                        changes["isr"] += 1
        self.controller.on_records = count
        for b in self.brokers.values():
            b.start()
        self.queue.at(0, ("ctick",))
        self.queue.at(self.rng.randint(0, 100), ("producer",))

    def heal(self) -> None:
        """Every link, every broker up and running, no loss."""
        self.network.heal()
        self.network.faults.drop_rate = 0.0
        for b in self.brokers.values():
            b.paused_until = 0
            if not b.alive:
                b.start()

    def converge(self, timeout_ms: int) -> None:
        """Each partition acknowledges a new acks=all write; then, writes stopped, every replica
        holds the same log up to the HW."""
        healed_at = self.now
        producer = self.producer
        producer.mark = healed_at
        ok = self.run_until(healed_at + timeout_ms,
                            lambda: all(producer.acked_after.get((TOPIC, q), 0) >= 1 for q in self._online()))
        if not ok:
            topic = self.controller.image.topics.by_name.get(TOPIC)
            partitions = sorted(topic.partitions) if topic is not None else []
            raise AssertionError(f"liveness: after healing at {healed_at} ms, partitions "
                                 f"{[q for q in partitions if not producer.acked_after.get((TOPIC, q))]} "
                                 f"acknowledged no acks=all write within {timeout_ms} ms"
                                 f"{self._describe()}")
        producer.enabled = False
        quiet_at = self.now
        self.run_until(quiet_at + timeout_ms, self._settled)
        if not self._settled():
            raise AssertionError(f"convergence: replicas still differ {timeout_ms} ms after the "
                                 f"writes stopped{self._describe()}")
        self.checks.converged(self)

    def result(self, faults: int) -> ReplicationResult:
        topic = self.controller.image.topics.by_name.get(TOPIC)
        partitions = sorted(topic.partitions) if topic is not None else []
        return ReplicationResult(self.seed, len(self.brokers), len(partitions), self.power_loss, self.elr,
                                 self.events, faults, self.checks.acked_count, self.changes["leader"],
                                 self.changes["isr"], self.controlled_shutdowns, len(self.offline), self.now)

    def _online(self) -> list:
        """The partitions that can have a leader: all but those whose ISR and ELR are both
        empty under ELR (every eligible replica restarted uncleanly; KIP-966 keeps such a
        partition offline until an unclean election, which is off here)."""
        topic = self.controller.image.topics.by_name.get(TOPIC)
        if topic is None:
            return [None]
        out = []
        for pid, reg in sorted(topic.partitions.items()):
            if self.elr and reg.leader < 0 and not reg.isr and not reg.elr:
                self.offline.add(pid)
            else:
                out.append(pid)
        return out

    def _settled(self) -> bool:
        """Every partition has a leader, all replicas in the ISR, every LEO = the leader's HW,
        and no producer waits."""
        topic = self.controller.image.topics.by_name.get(TOPIC)
        if topic is None or self.producer.in_flight:
            return False
        for pid, reg in topic.partitions.items():
            if self.elr and reg.leader < 0 and not reg.isr and not reg.elr:
                # Offline since the liveness check, by ``_online``'s rule: the last ISR member
                # was a killed broker whose lease outlived it, and its restart was unclean
                # (seed 207393, min ISR 1: the others left the ISR without becoming eligible).
                self.offline.add(pid)
            if pid in self.offline:
                continue
            if reg.leader < 0 or sorted(reg.isr) != sorted(reg.replicas):
                return False
            hw = self.brokers[reg.leader].logs.get(TOPIC, pid).high_watermark
            for r in reg.replicas:
                plog = self.brokers[r].logs.get(TOPIC, pid)
                if plog is None or plog.log.end_offset != hw or plog.high_watermark != hw:
                    return False
        return True

    def _describe(self) -> str:
        topic = self.controller.image.topics.by_name.get(TOPIC)
        lines = [f"power_loss={self.power_loss} elr={self.elr} min_isr={self.min_isr} "
                 f"session={self.session_timeout_ms}ms"]
        if topic is not None:
            for pid, reg in sorted(topic.partitions.items()):
                ends = {r: (self.brokers[r].logs.get(TOPIC, pid).log.end_offset,
                            self.brokers[r].logs.get(TOPIC, pid).high_watermark)
                        if self.brokers[r].logs.get(TOPIC, pid) is not None else None for r in reg.replicas}
                lines.append(f"p{pid}: leader {reg.leader} epoch {reg.leader_epoch} isr {list(reg.isr)} "
                             f"elr {list(reg.elr)} (leo, hw) {ends}")
        brokers = self.controller.image.cluster.brokers
        lines.append("brokers: " + ", ".join(f"{b}{' fenced' if r.fenced else ''}" for b, r in sorted(brokers.items())))
        return "\n  " + "\n  ".join(lines)

