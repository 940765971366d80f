"""The controller mode of the simulator: random seeds with the quorum controller on every voter,
simulated brokers (register, heartbeat, pause, crash with a new incarnation, controlled
shutdown), admins (CreateTopics / DeleteTopics / CreatePartitions / IncrementalAlterConfigs,
with retries) and faults (crashes and restarts of voters and of the active controller,
partitions that cut clients too, lossy links, at most one disk wipe, snapshots of the image).
After the faults everything is healed and the run must make progress again (liveness: an
active controller, every running broker unfenced, a new topic acknowledged), every node must
catch up, and then the end-of-run invariants are checked (``controller_checks``). Any failure
fails the run (a workload of ``kraft.testing.chaos``, which names the replay command):

    python -m kraft.testing.chaos --mode controller --seed 1234 --profile ci
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

from kraft.raft import RaftConfig
from kraft.testing.chaos import ChaosProfile, ClusterWorkload
from kraft.testing.cluster import SimCluster
from kraft.testing.controller_checks import ControllerChecks, TopicLedger
from kraft.testing.controller_clients import (ADMIN_ID_BASE, BROKER_ID_BASE, ClientLinks, SimAdmin, SimBroker,
                                              SimClient, unregister_request)
from kraft.testing.controller_node import ControllerSimNode
from kraft.testing.invariants import InvariantViolation
from kraft.testing.network import NetworkFaults


PROFILES = {
    "quick": ChaosProfile(duration_ms=6_000, fault_gap_ms=(300, 2_000), liveness_timeout_ms=30_000),
    "ci": ChaosProfile(duration_ms=12_000, fault_gap_ms=(300, 2_500), liveness_timeout_ms=30_000),
    "soak": ChaosProfile(duration_ms=60_000, fault_gap_ms=(200, 3_000), liveness_timeout_ms=30_000),
}


@dataclass
class ControllerChaosResult:
    seed: int
    voters: int
    brokers: int
    admins: int
    events: int
    committed: int
    faults: int
    simulated_ms: int
    acknowledged_creates: int
    answers_checked: int
    snapshots_checked: int
    topics: int
    partitions: int
    activations: int
    snapshots_loaded: int
    fenced_by_expiry: int
    registrations: int
    dropped_uncommitted: int
    mid_transaction_crashes: int
    inherited_transactions: int


class ControllerCluster(SimCluster):
    """A SimCluster of ``ControllerSimNode``s plus clients (``brokers``, ``admins``)."""

    def __init__(self, seed: int, voters: int, *, settings: dict, max_records_per_proposal: int | None = None, **kw):
        self.checks = ControllerChecks()
        self.controller_settings = settings
        self.max_records_per_proposal = max_records_per_proposal
        #: simulated CPU per record proposed or replayed (0: computing takes no time)
        self.cpu_ms_per_record = 0.0
        #: called with the node id when an active controller committed part of a transaction
        self.on_open_transaction = None
        super().__init__(seed, voters, 0, node_class=ControllerSimNode, **kw)
        self.links = ClientLinks(self, random.Random(seed * 13 + 5))
        self.brokers: list[SimBroker] = []
        self.admins: list[SimAdmin] = []

    def add_client(self, client) -> None:
        self.endpoints[client.id] = client

    def active_controller(self):
        leader = self.leader()
        if leader is None or not leader.controller.active or leader.controller.epoch != leader.core.epoch:
            return None
        return leader

    def isolate_with_clients(self, node_id: int) -> None:
        self.network.isolate(node_id, list(self.nodes) + list(self.endpoints))


def build(seed: int) -> tuple[ControllerCluster, random.Random]:
    rng = random.Random(seed)
    voters = rng.choice([1, 3, 3, 3, 5, 2, 4])
    session = rng.choice([1_500, 3_000, 9_000])
    settings = {
        "broker.session.timeout.ms": session,
        "broker.heartbeat.interval.ms": session // rng.choice([4, 6]),
        "default.replication.factor": rng.choice([1, 3]),
        "num.partitions": rng.choice([1, 2]),
        "unclean.leader.election.enable": rng.choice(["false", "false", "false", "true"]),
    }
    # Small proposals and batches in some seeds (production: 10,000 records each): requests then
    # span batches, atomic ones become metadata transactions (Begin/End), and a failover can
    # leave one open for the next controller to abort.
    max_records = rng.choice([None, None, 2, 3, 5])
    config = RaftConfig(cluster_id="sim", append_linger_ms=rng.choice([0, 5, 25]),
                        fetch_snapshot_max_bytes=rng.choice([256, 4096, 1 << 20]),
                        fetch_max_bytes=rng.choice([200, 1024, 1 << 20]))
    if max_records:
        config = dataclasses.replace(config, max_records_per_batch=max_records)
    faults = NetworkFaults.random(rng)
    cluster = ControllerCluster(seed, voters, settings=settings, max_records_per_proposal=max_records,
                                config=config, faults=faults,
                                snapshot_interval=rng.choice([0, 0, 15, 40, 150]), max_flush_ms=rng.choice([0, 2, 10]))
    timeout = rng.choice([1_000, 2_000])
    cluster.operator = SimClient(ADMIN_ID_BASE + 500, cluster, random.Random(seed * 17 + 1), timeout)
    cluster.add_client(cluster.operator)
    for i in range(rng.randint(3, 6)):
        b = SimBroker(BROKER_ID_BASE + i, cluster, random.Random(seed * 101 + i), timeout,
                      settings["broker.heartbeat.interval.ms"], rack=rng.choice([None, f"r{i % 2}"]))
        cluster.brokers.append(b)
        cluster.add_client(b)
    ledger = TopicLedger()
    cluster.ledger = ledger
    for a in range(rng.randint(1, 3)):
        aid = ADMIN_ID_BASE + a
        admin = SimAdmin(aid, cluster, random.Random(seed * 211 + a), timeout,
                         [f"t{a}-{k}" for k in range(rng.randint(2, 6))], ledger)
        cluster.admins.append(admin)
        cluster.add_client(admin)
    return cluster, random.Random(seed * 7 + 3)


class ControllerWorkload(ClusterWorkload):
    PROFILES = PROFILES

    def __init__(self, seed: int, profile: ChaosProfile):
        self.profile = profile
        self.cluster, self.rng = build(seed)
        self.wiped = False
        self.fault_end = profile.duration_ms
        self.cluster.on_open_transaction = self.mid_transaction
        self.mid_transaction_crashes = 0

    def start(self) -> None:
        c = self.cluster
        c.start_all()
        for b in c.brokers:
            c.schedule(self.rng.randint(0, 500), b.start)
        for a in c.admins:
            c.schedule(self.rng.randint(200, 1_000), a.start)

    def mid_transaction(self, node_id: int) -> None:
        """Sometimes crash an active controller whose committed log has a transaction open: the
        next one must abort it (its records never show) and carry on."""
        c = self.cluster
        if c.now < self.fault_end and self.rng.random() < 0.6:
            c.schedule(c.now, self._crash_in_transaction, node_id)

    def _crash_in_transaction(self, node_id: int) -> None:
        c = self.cluster
        node = c.nodes[node_id]
        if not node.alive or not node.controller.open_transaction:
            return  # it committed the rest meanwhile
        self.mid_transaction_crashes += 1
        c.crash(node_id)
        c.schedule(c.now + self.rng.randint(0, 3_000), c.restart, node_id)

    def inject(self) -> None:
        c, rng = self.cluster, self.rng
        ids = sorted(c.nodes)
        alive = c.alive_nodes()
        if alive:  # (a) during the run: one snapshot (or the log) of one node, replayed
            node = rng.choice(alive)
            snapshots = node.log.snapshot_ids()
            c.checks.check_replay(node, rng.choice(snapshots) if snapshots else "all")
        kind = rng.choice(["crash", "crash_leader", "crash_leader", "partition", "partition", "heal", "wipe",
                           "broker", "broker", "broker"])
        if kind in ("crash", "crash_leader"):
            self.crash_one(ids, kind == "crash_leader", 5_000)
        elif kind == "partition":
            c.heal()
            how = rng.choice(["one", "leader", "split"])
            if how == "one":
                c.isolate_with_clients(rng.choice(ids))
            elif how == "leader":
                leader = c.leader()
                if leader is not None:
                    (c.isolate_with_clients if rng.random() < 0.5 else c.isolate)(leader.id)
            else:
                self.split(ids)
            c.schedule(c.now + rng.randint(500, 6_000), c.heal)
        elif kind == "heal":
            c.heal()
        elif kind == "wipe" and not self.wiped and len(c.voter_ids) >= 3:
            self.wiped = True
            victim = rng.choice(ids)
            c.wipe(victim)
            c.schedule(c.now + rng.randint(0, 3_000), c.restart, victim)
        elif kind == "broker":
            self.broker_fault()

    def broker_fault(self) -> None:
        c, rng = self.cluster, self.rng
        b = rng.choice(c.brokers)
        what = rng.choice(["pause", "pause", "crash", "shutdown", "unregister"])
        session = c.controller_settings["broker.session.timeout.ms"]
        if what == "pause" and b.state != "down":
            b.paused = True
            c.schedule(c.now + rng.randint(session // 2, session * 2), self._unpause, b)
        elif what == "crash" and b.state != "down":
            b.stop()
            c.schedule(c.now + rng.randint(0, session * 2), b.start)
        elif what == "shutdown":
            b.controlled_shutdown()
        elif what == "unregister" and b.state == "down" and not c.operator.busy:
            # An operator removes a broker that is gone (it registers afresh when it returns).
            c.operator.call(unregister_request(b.id), lambda response: None)

    @staticmethod
    def _unpause(b: SimBroker) -> None:
        b.paused = False

    def converge(self, timeout_ms: int) -> None:
        c = self.cluster
        healed_at = c.now
        try:
            self.wait_whole(healed_at + timeout_ms)
        except InvariantViolation:
            raise
        except AssertionError as exc:
            raise AssertionError(f"liveness after healing at {healed_at} ms: {exc}\n{c.describe()}") from None

    def heal(self) -> None:
        super().heal()
        c = self.cluster
        for b in c.brokers:
            b.paused = False
            if b.state == "shutting_down":
                continue  # it finishes its shutdown and comes back by itself
            b.start()

    def wait_whole(self, deadline: int) -> None:
        c = self.cluster
        if not c.run_until(deadline, lambda: c.active_controller() is not None):
            raise AssertionError("no active controller")

        def brokers_unfenced():
            active = c.active_controller()
            if active is None:
                return False
            registered = active.controller.image.cluster.brokers
            return all(b.state == "running" and b.id in registered and not registered[b.id].fenced
                       for b in c.brokers)

        if not c.run_until(deadline, brokers_unfenced):
            raise AssertionError("brokers not all registered and unfenced: "
                                 + ", ".join(f"{b.id}:{b.state}" for b in c.brokers))
        for a in c.admins:
            a.running = False
        # A new topic must be acknowledged; a definite error (say, too few unfenced brokers just
        # now: a broker whose heartbeats went to a dead node can lose its lease) is retried.
        probe = SimAdmin(ADMIN_ID_BASE + 999, c, random.Random(c.seed), 2_000, ["liveness"], c.ledger,
                         max_attempts=1_000)
        c.add_client(probe)
        probe.running = True
        while True:
            probe._operate()
            if not c.run_until(deadline, lambda: not probe.in_operation):
                raise AssertionError(f"a new CreateTopics was not acknowledged: {c.ledger.events.get('liveness')}")
            if c.ledger.events["liveness"][-1][1] == "ok":
                break
            c.run_for(200)
        probe.running = False

        def caught_up():
            active = c.active_controller()
            if active is None or any(a.in_operation for a in c.admins):
                return False
            hw = active.core.high_watermark
            return all(n.controller.next_offset == hw for n in c.nodes.values())

        if not c.run_until(deadline, caught_up):
            raise AssertionError("nodes did not all catch up with the leader")

    def result(self, faults: int) -> ControllerChaosResult:
        c = self.cluster
        checks = c.checks
        for n in c.nodes.values():
            checks.check_replay(n)
        active = c.active_controller()
        image = active.controller.image
        c.ledger.check(image)
        for b in c.brokers:  # lease bookkeeping: registered brokers have leases
            if b.id not in image.cluster.brokers:
                raise AssertionError(f"running broker {b.id} not registered at the end")
        return ControllerChaosResult(
            c.seed, len(c.voter_ids), len(c.brokers), len(c.admins), c.events, active.core.high_watermark,
            faults, c.now, c.ledger.acknowledged_creates, checks.answers_checked, checks.snapshots_checked,
            len(image.topics.by_id), image.topics.partition_count, checks.activations, checks.snapshots_loaded,
            checks.fenced_by_expiry, sum(b.registrations for b in c.brokers), checks.dropped_uncommitted,
            self.mid_transaction_crashes, checks.inherited_transactions)

