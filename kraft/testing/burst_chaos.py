"""The controller simulator's burst mode (issue 38): many CreateTopics at once, far more records
than the Raft leader's uncommitted bound, on nodes that spend simulated CPU on every record they
propose or replay (``cpu_ms_per_record``), over links that replicate slowly (small Fetch answers,
delays, slow flushes). Proposals outpace replication; back-pressure must absorb the burst.

Profiles: ``calm`` has no faults and asserts what a healthy cluster owes a burst: one leader
(and one epoch) from the first request to the last answer, every request acknowledged, retried
only after a redirect from a node that is not the controller or a REQUEST_TIMED_OUT (some seeds
give requests less time than the burst takes), and the leader's uncommitted records never
beyond the bound plus the one request admitted last.
``stormy`` adds crashes of the active controller and partitions during the burst; there the
clients retry, and what must hold is that nothing is lost or applied twice: a retry never finds
its own request already applied unless an earlier attempt's fate was unknown (a
REQUEST_TIMED_OUT answer always means "not applied"), every acknowledged topic is in the final
image, and the images, snapshots and logs agree (``controller_checks``). Any failure raises
``ChaosFailure`` with its replay command:

    python -m kraft.testing.burst_chaos --seed 7 --profile calm

No real time or I/O; deterministic per (seed, profile).
"""

from __future__ import annotations

import random
import sys
import traceback
from dataclasses import dataclass

from kraft.testing.seed_cli import seed_main
from kraft.errors import ErrorCode
from kraft.protocol.messages.create_topics import CreateTopicsRequest
from kraft.raft import RaftConfig
from kraft.testing.chaos import ChaosFailure
from kraft.testing.controller_checks import TopicLedger
from kraft.testing.controller_chaos import ControllerCluster
from kraft.testing.controller_clients import ADMIN_ID_BASE, BROKER_ID_BASE, SimBroker, SimClient
from kraft.testing.invariants import InvariantViolation
from kraft.testing.network import NetworkFaults

OK = int(ErrorCode.NONE)
NOT_CONTROLLER = int(ErrorCode.NOT_CONTROLLER)
TIMED_OUT = int(ErrorCode.REQUEST_TIMED_OUT)
EXISTS = int(ErrorCode.TOPIC_ALREADY_EXISTS)
BURST_ID_BASE = ADMIN_ID_BASE + 100


@dataclass(frozen=True)
class BurstProfile:
    faults: bool
    fault_window_ms: int = 12_000  # faults from the burst's start for this long, then everything heals
    deadline_ms: int = 120_000  # simulated time from the burst's start by which every request is settled


PROFILES = {"calm": BurstProfile(faults=False), "stormy": BurstProfile(faults=True)}


def replay_command(seed: int, profile: str) -> str:
    return f"python -m kraft.testing.burst_chaos --seed {seed} --profile {profile}"


@dataclass
class BurstResult:
    seed: int
    voters: int
    requests: int
    records: int  # records the burst writes
    bound: int  # the leader's max_uncommitted_records
    peak_backlog: int  # the most uncommitted records an active controller held
    held_back: int  # times an admin request waited for the log to drain
    leaderships: int  # (leader, epoch) pairs seen from the burst's start to its end
    timed_out: int  # REQUEST_TIMED_OUT answers (never applied)
    retries: int
    simulated_ms: int


class BurstClient(SimClient):
    """One CreateTopics of ``topics``, retried until it is settled: NOT_CONTROLLER and no answer
    make its fate unknown, REQUEST_TIMED_OUT says it was not applied."""

    def __init__(self, client_id, cluster, rng, timeout_ms, topics, partitions, rf, request_timeout_ms, ledger):
        super().__init__(client_id, cluster, rng, timeout_ms)
        self.topics, self.partitions, self.rf = topics, partitions, rf
        self.request_timeout_ms = request_timeout_ms
        self.ledger = ledger
        self.entries: list[int] = []
        self.attempts = self.timed_out = self.redirects = 0
        self.indeterminate = False
        # Calm runs have one leadership throughout (checked): a NOT_CONTROLLER there comes from a
        # node that is not the controller, and says "not applied" as surely as a timeout does.
        self.redirects_are_definite = False
        self.outcome: str | None = None

    @property
    def records(self) -> int:
        return len(self.topics) * (self.partitions + 1)

    def begin(self) -> None:
        self.entries = [self.ledger.begin(t, "create", self.partitions) for t in self.topics]
        self._attempt()

    def _attempt(self) -> None:
        self.attempts += 1
        T = CreateTopicsRequest.Topic
        req = CreateTopicsRequest(topics=[T(name=t, num_partitions=self.partitions, replication_factor=self.rf,
                                            assignments=[], configs=[]) for t in self.topics],
                                  timeout_ms=self.request_timeout_ms, validate_only=False)
        self.call(req, self._answered)

    def _retry(self) -> None:
        c = self.cluster
        c.schedule(c.now + self.rng.randint(20, 200), self._attempt)

    def _answered(self, response) -> None:
        if response is None:  # no answer within the client's timeout: it may have been applied
            self.indeterminate = True
            self._retry()
            return
        codes = {t.error_code for t in response.topics}
        if codes == {OK}:
            self._settle("ok")
        elif NOT_CONTROLLER in codes:
            self.redirects += 1
            if not self.redirects_are_definite:
                self.indeterminate = True  # a controller that lost leadership cannot tell
            self._retry()
        elif codes == {TIMED_OUT}:
            self.timed_out += 1
            self._retry()
        elif EXISTS in codes:
            if not self.indeterminate:
                raise InvariantViolation(
                    f"client {self.id}: a retry of CreateTopics {self.topics} found them created, though every "
                    f"earlier attempt was answered as not applied: {response.topics[0].error_message}")
            self._settle("unknown")
        else:  # a definite error (say, too few unfenced brokers after a storm): nothing written
            self._settle("unknown" if self.indeterminate else "error")

    def _settle(self, outcome: str) -> None:
        self.outcome = outcome
        for t, entry in zip(self.topics, self.entries):
            self.ledger.settle(t, entry, outcome)


def build(seed: int, profile: BurstProfile) -> tuple[ControllerCluster, random.Random, list[BurstClient]]:
    rng = random.Random(seed)
    voters = rng.choice([3, 3, 5, 1]) if profile.faults else rng.choice([3, 3, 5])
    settings = {"broker.session.timeout.ms": 9_000, "broker.heartbeat.interval.ms": 1_500,
                "default.replication.factor": 3, "num.partitions": 1}
    bound = rng.choice([100, 300, 1_000])
    fetch_timeout = rng.choice([500, 1_000, 2_000])
    config = RaftConfig(cluster_id="sim", append_linger_ms=rng.choice([0, 5, 25]),
                        fetch_timeout_ms=fetch_timeout, election_timeout_ms=fetch_timeout,
                        request_timeout_ms=fetch_timeout, fetch_max_wait_ms=fetch_timeout // 4,
                        fetch_max_bytes=rng.choice([1024, 4096, 1 << 20]),
                        max_uncommitted_records=bound,
                        max_uncommitted_bytes=rng.choice([8 * 1024, 64 * 1024, 8 << 20]))
    faults = NetworkFaults(min_delay_ms=rng.randint(0, 2), max_delay_ms=rng.randint(3, 15),
                           drop_rate=0.01 if profile.faults else 0.0)
    cluster = ControllerCluster(seed, voters, settings=settings, config=config, faults=faults,
                                snapshot_interval=rng.choice([0, 500, 2_000]), max_flush_ms=rng.choice([1, 5, 15]))
    cluster.cpu_ms_per_record = rng.choice([0.1, 0.3, 1.0])
    for i in range(rng.randint(3, 5)):
        b = SimBroker(BROKER_ID_BASE + i, cluster, random.Random(seed * 101 + i), 2_000, 1_500, rack=None)
        cluster.brokers.append(b)
        cluster.add_client(b)
    ledger = TopicLedger()
    cluster.ledger = ledger
    burst = []
    n_requests = rng.randint(20, 50)
    per_request, partitions = rng.randint(3, 8), rng.choice([10, 20, 40])
    for k in range(n_requests):
        topics = [f"b{k}-{j}" for j in range(per_request)]
        # The client waits longer than the request's own timeout: the controller answers first. Some
        # seeds have timeouts shorter than the burst, so that requests time out in the queue (and
        # are retried: the retry must not find its first attempt applied).
        timeout = rng.choice([1_000, 3_000, 10_000] if profile.faults else [60_000, 60_000, 1_500])
        c = BurstClient(BURST_ID_BASE + k, cluster, random.Random(seed * 307 + k), timeout + 5_000, topics,
                        partitions, rng.choice([1, 3]) if voters > 1 else 1, timeout, ledger)
        c.redirects_are_definite = not profile.faults
        burst.append(c)
        cluster.add_client(c)
    return cluster, random.Random(seed * 7 + 3), burst


class _Burst:
    def __init__(self, seed: int, profile: BurstProfile):
        self.profile = profile
        self.cluster, self.rng, self.burst = build(seed, profile)
        self.bound = self.cluster.config.max_uncommitted_records
        self.peak = 0
        self.leaderships: set = set()
        self.largest = max(c.records for c in self.burst) + 2  # (+ Begin/EndTransaction)
        self.fault_end = 0
        self.healed = False

    def observe(self) -> bool:
        """After every event (a ``run_until`` stop predicate that never stops)."""
        c = self.cluster
        active = c.active_controller()
        if active is not None:
            self.leaderships.add((active.id, active.core.epoch))
            records = active.core.uncommitted()[0]
            self.peak = max(self.peak, records)
            if not self.profile.faults and records > self.bound + self.largest:
                raise InvariantViolation(f"node {active.id} holds {records} uncommitted records, past the bound "
                                         f"{self.bound} plus one request ({self.largest})")
        return False

    def run(self) -> BurstResult:
        c, p = self.cluster, self.profile
        c.start_all()
        for b in c.brokers:
            c.schedule(self.rng.randint(0, 300), b.start)

        def brokers_unfenced():
            active = c.active_controller()
            if active is None:
                return False
            registered = active.controller.image.cluster.brokers
            return all(b.id in registered and not registered[b.id].fenced for b in c.brokers)

        if not c.run_until(30_000, brokers_unfenced):
            raise AssertionError("brokers were not registered and unfenced before the burst")
        start = c.now
        for client in self.burst:  # all at once, as 200 requests in flight from one admin tool
            client.begin()
        if p.faults:
            self.fault_end = start + p.fault_window_ms
            c.schedule(start + self.rng.randint(0, 1_500), self.fault)
        settled = lambda: self.observe() or all(b.outcome is not None for b in self.burst)  # noqa: E731
        if not c.run_until(start + p.deadline_ms, settled):
            pending = [b.id for b in self.burst if b.outcome is None]
            raise AssertionError(f"burst requests not settled by {p.deadline_ms} ms: {pending}\n{c.describe()}")
        if not p.faults:
            self.calm_checks()
        self.heal_and_catch_up()
        return self.final_checks(c.now - start)

    def fault(self) -> None:
        c, rng = self.cluster, self.rng
        if c.now >= self.fault_end or all(b.outcome is not None for b in self.burst):
            if not self.healed:
                self.healed = True
                c.network.faults.drop_rate = 0.0
                c.heal()
                for nid in sorted(c.nodes):
                    c.restart(nid)
            return
        leader = c.leader()
        kind = rng.choice(["crash_leader", "crash_leader", "isolate_leader", "crash"])
        if kind == "crash_leader" and leader is not None:
            c.crash(leader.id)
            c.schedule(c.now + rng.randint(200, 3_000), c.restart, leader.id)
        elif kind == "isolate_leader" and leader is not None:
            c.isolate_with_clients(leader.id)
            c.schedule(c.now + rng.randint(500, 4_000), c.heal)
        else:
            victim = rng.choice(sorted(c.nodes))
            c.crash(victim)
            c.schedule(c.now + rng.randint(200, 3_000), c.restart, victim)
        c.schedule(c.now + rng.randint(1_000, 4_000), self.fault)

    def calm_checks(self) -> None:
        if len(self.leaderships) != 1:
            raise InvariantViolation(f"leadership changed during the burst: {sorted(self.leaderships)}")
        for b in self.burst:
            if b.outcome != "ok" or b.attempts != 1 + b.redirects + b.timed_out:
                raise InvariantViolation(f"client {b.id}: outcome {b.outcome} after {b.attempts} attempts "
                                         f"({b.timed_out} timed out, {b.redirects} redirected)")

    def heal_and_catch_up(self) -> None:
        c = self.cluster
        c.heal()
        for nid in sorted(c.nodes):
            c.restart(nid)

        def caught_up():
            active = c.active_controller()
            if active is None:
                return False
            hw = active.core.high_watermark
            return all(n.controller.next_offset == hw for n in c.nodes.values())

        if not c.run_until(c.now + 120_000, caught_up):
            raise AssertionError(f"nodes did not all catch up with the leader\n{c.describe()}")

    def final_checks(self, took_ms: int) -> BurstResult:
        c = self.cluster
        for n in c.nodes.values():
            c.checks.check_replay(n)
        active = c.active_controller()
        c.ledger.check(active.controller.image)
        held_back = sum(n.queue.held_back for n in c.nodes.values() if n.alive)
        return BurstResult(c.seed, len(c.voter_ids), len(self.burst), sum(b.records for b in self.burst), self.bound,
                           self.peak, held_back, len(self.leaderships), sum(b.timed_out for b in self.burst),
                           sum(b.attempts - 1 for b in self.burst), took_ms)


def run_burst(seed: int, profile: str = "calm") -> BurstResult:
    """One burst; raises ChaosFailure (with the replay command) on any failure."""
    try:
        return _Burst(seed, PROFILES[profile]).run()
    except Exception as exc:  # invariant violations, liveness, and bugs alike need the seed
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        raise ChaosFailure(f"burst seed {seed} failed: {detail}\n  replay: {replay_command(seed, profile)}") from exc


def main(argv=None) -> int:
    return seed_main(argv, prog="python -m kraft.testing.burst_chaos", doc=__doc__, profiles=PROFILES, default="calm",
                     run=run_burst, failure=ChaosFailure)


if __name__ == "__main__":
    sys.exit(main())
