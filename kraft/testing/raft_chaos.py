"""The simulator's Raft mode (a workload of ``kraft.testing.chaos``): a cluster built from the
seed (1-5 voters, 0-2 observers, network faults, snapshot interval, chunk size), clients
proposing, and faults: crashes, restarts, partitions (one node, the leader, minority/majority,
ring) and at most one disk wipe; with ``membership``, voters added, removed and reassigned
(KIP-853) as well. After healing, a leader must commit a new proposal within the liveness
timeout. Safety invariants are checked after every event (``SimCluster``).

    python -m kraft.testing.chaos --mode raft --seed 1234 --profile ci
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kraft.raft import RaftConfig, ReplicaKey
from kraft.testing.chaos import ChaosProfile, ClusterWorkload
from kraft.testing.cluster import SimCluster
from kraft.testing.network import NetworkFaults

PROFILES = {
    "quick": ChaosProfile(duration_ms=8_000, fault_gap_ms=(300, 2_500), liveness_timeout_ms=30_000),
    "ci": ChaosProfile(duration_ms=20_000, fault_gap_ms=(300, 3_000), liveness_timeout_ms=30_000),
    "soak": ChaosProfile(duration_ms=120_000, fault_gap_ms=(200, 4_000), liveness_timeout_ms=30_000),
    "ci-wire": ChaosProfile(duration_ms=20_000, fault_gap_ms=(300, 3_000), liveness_timeout_ms=30_000,
                            wire_codec=True),
    "ci-membership": ChaosProfile(duration_ms=20_000, fault_gap_ms=(300, 3_000), liveness_timeout_ms=30_000,
                                  max_observers=3, membership=True),
    "soak-membership": ChaosProfile(duration_ms=120_000, fault_gap_ms=(200, 4_000), liveness_timeout_ms=30_000,
                                    max_observers=3, membership=True),
}


@dataclass
class ChaosResult:
    seed: int
    voters: int
    observers: int
    events: int
    committed: int
    faults: int
    simulated_ms: int


def build_cluster(seed: int, profile: ChaosProfile) -> SimCluster:
    rng = random.Random(seed)
    voters = rng.choice([v for v in (1, 2, 3, 3, 3, 4, 5, 5) if v <= profile.max_voters])
    observers = rng.choice([o for o in (0, 0, 0, 1, 2) if o <= profile.max_observers])
    if profile.membership:
        observers = rng.choice([1, 2, 2, 3])  # someone to add
    config = RaftConfig(
        cluster_id="sim",
        append_linger_ms=rng.choice([0, 5, 25]),
        fetch_snapshot_max_bytes=rng.choice([64, 256, 1 << 20]),
        fetch_max_bytes=rng.choice([256, 4096, 1 << 20]),
    )
    return SimCluster(seed, voters, observers, config=config, faults=NetworkFaults.random(rng),
                      snapshot_interval=rng.choice([0, 0, 10, 40, 200]), max_flush_ms=rng.choice([0, 2, 10]),
                      wire_codec=profile.wire_codec, dynamic=profile.membership)


class RaftWorkload(ClusterWorkload):
    PROFILES = PROFILES

    def __init__(self, seed: int, profile: ChaosProfile):
        self.profile = profile
        self.cluster = build_cluster(seed, profile)
        self.rng = random.Random(seed * 7 + 3)
        self.wiped = False
        self.wiped_at = None

    def start(self) -> None:
        self.cluster.start_all()
        self.cluster.schedule(self.rng.randint(0, 200), self.client)

    def client(self) -> None:
        c = self.cluster
        if self.rng.random() < 0.8:
            c.propose([c.next_value() for _ in range(self.rng.randint(1, 3))])
        c.schedule(c.now + self.rng.randint(10, 150), self.client)

    def inject(self) -> None:
        c, rng = self.cluster, self.rng
        ids = sorted(c.nodes)
        kinds = ["crash", "crash", "partition", "partition", "heal", "wipe", "crash_leader"]
        if self.profile.membership:
            kinds += ["add", "add", "remove", "remove", "reassign", "reassign", "cancel"]
        kind = rng.choice(kinds)
        if kind in ("crash", "crash_leader"):
            self.crash_one(ids, kind == "crash_leader", 6_000)
        elif kind == "partition":
            c.heal()
            how = rng.choice(["one", "leader", "split", "ring"])
            if how == "one":
                c.isolate(rng.choice(ids))
            elif how == "leader":
                leader = c.leader()
                if leader is not None:
                    c.isolate(leader.id)
            elif how == "split":
                self.split(ids)
            else:
                shuffled = ids[:]
                rng.shuffle(shuffled)
                c.network.ring(shuffled)
            c.schedule(c.now + rng.randint(500, 8_000), c.heal)
        elif kind == "heal":
            c.heal()
        elif kind in ("add", "remove"):
            self.change_voters(kind)
        elif kind in ("reassign", "cancel"):
            self.reassign(kind == "cancel")
        elif kind == "wipe" and self.profile.membership and not self.wiped:
            victim = rng.choice(ids)
            if all(self._healthy_majority(vs, lost=victim) for vs in self._voter_sets()) and not self._reassigning():
                self.wiped = True
                self.wiped_at = c.now
                c.wipe(victim)
                c.schedule(c.now + rng.randint(0, 3_000), c.restart, victim)
        elif kind == "wipe" and not self.wiped:
            # One disk loss per run, and only where a majority of voters survives it.
            candidates = list(c.observer_ids) + (list(c.voter_ids) if len(c.voter_ids) >= 3 else [])
            if candidates:
                self.wiped = True
                victim = rng.choice(candidates)
                c.wipe(victim)
                c.schedule(c.now + rng.randint(0, 3_000), c.restart, victim)

    # --- membership (profile.membership) ---------------------------------------------------
    def _voter_sets(self):
        """The latest voter set of every live node (they differ while a change is uncommitted)."""
        return [n.core.voters for n in self.cluster.alive_nodes()]

    def _healthy_majority(self, voters, lost=None, extra=()) -> bool:
        """Would the voters whose disks still hold their replica (and ``extra``) be a
        majority of ``voters``? An operator never makes a change (or loses a disk) that leaves
        the quorum without one: liveness would be gone for good, not a protocol bug."""
        nodes = self.cluster.nodes
        keys = list(voters.keys()) + list(extra)
        healthy = sum(1 for k in keys if k.id != lost and k.id in nodes and k.directory_id == nodes[k.id].directory_id)
        return healthy >= len(keys) // 2 + 1

    def _reassigning(self) -> bool:
        return any(n.core.target_voters is not None for n in self.cluster.alive_nodes())

    def change_voters(self, kind: str) -> None:
        c, rng = self.cluster, self.rng
        leader = c.leader()
        if leader is None:
            return
        voters = leader.core.voters
        sets = self._voter_sets()
        if kind == "add":
            outside = [n for n in c.alive_nodes() if n.id not in voters.ids]
            if not outside:
                return
            node = rng.choice(outside)
            key = ReplicaKey(node.id, node.directory_id)
            if all(self._healthy_majority(vs, extra=[key]) for vs in sets):
                c.admin("add", key)
        else:
            keys = voters.keys()
            if len(keys) < 2:
                return
            key = rng.choice(keys)
            if all(self._healthy_majority(vs.without_voter(key)) for vs in sets):
                c.admin("remove", key)

    def reassign(self, cancel: bool) -> None:
        """Seed 002's target voters: a random target (ids, or now and then the exact replica
        keys of the nodes' current disks), or a cancel. No operator check here: the leader
        takes a step only while caught-up voters are a majority of the set it makes. The
        operator's one rule: no reassignment while a lost disk may still look caught up (one
        fetch timeout: the leader cannot tell a just-wiped voter from a live one sooner), and
        no disk lost while a reassignment runs — either could let a step shrink the voters
        to a set whose majority includes the lost replica (liveness lost for good, as when
        an operator removes the wrong voter; safety is checked regardless)."""
        c, rng = self.cluster, self.rng
        if cancel:
            c.reassign([], cancel=True)
            return
        if self.wiped_at is not None and c.now < self.wiped_at + 2 * c.config.fetch_timeout_ms:
            return
        ids = sorted(c.nodes)
        chosen = rng.sample(ids, rng.randint(1, min(5, len(ids))))
        if rng.random() < 0.3:
            chosen = [ReplicaKey(i, c.nodes[i].directory_id) for i in chosen]
        c.reassign(chosen)

    def converge(self, timeout_ms: int) -> None:
        c = self.cluster
        healed_at = c.now
        try:
            c.commit(timeout_ms=timeout_ms)
        except AssertionError as exc:
            raise AssertionError(f"liveness: no commit within {timeout_ms} ms after healing at "
                                 f"{healed_at} ms: {exc}") from None

    def result(self, faults: int) -> ChaosResult:
        c = self.cluster
        committed = max((n.core.high_watermark for n in c.alive_nodes()), default=0)
        return ChaosResult(c.seed, len(c.voter_ids), len(c.observer_ids), c.events, committed, faults, c.now)
