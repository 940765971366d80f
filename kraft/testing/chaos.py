"""One fault-injection driver for the simulator's three modes, each a workload:

* ``raft`` (``raft_chaos.RaftWorkload``): the Raft quorum alone, clients proposing;
* ``controller`` (``controller_chaos.ControllerWorkload``): a quorum controller on every voter,
  simulated brokers and admins;
* ``replication`` (``replication_chaos.ReplicationWorkload``): the brokers' replication cores
  under a simulated controller, acks=all and acks=1 producers.

Per (mode, seed, profile) the driver starts the workload, injects one of its faults at random
gaps for ``duration_ms`` of simulated time, then heals everything and asks the workload to
converge within ``liveness_timeout_ms`` (liveness) and to run its end-of-run checks. Invariants
run after every event (the workload's). Any failure raises :class:`ChaosFailure` whose message
ends with the one-line command that replays it:

    python -m kraft.testing.chaos --mode controller --seed 1234 --profile ci

No real time or I/O; deterministic per (mode, seed, profile). ``tools/seed_soak.py --mode``
runs many seeds on several processes.
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import traceback
from dataclasses import dataclass

from kraft.testing.seed_cli import seed_main


@dataclass(frozen=True)
class ChaosProfile:
    duration_ms: int  # simulated time with faults
    fault_gap_ms: tuple[int, int]  # time between fault events
    liveness_timeout_ms: int  # after healing, the workload must make progress within this
    # Raft mode only:
    max_voters: int = 5
    max_observers: int = 2
    wire_codec: bool = False  # every message through the real codec (see SimCluster)
    membership: bool = False  # a dynamic quorum whose voters are added, removed and reassigned under faults


class ChaosFailure(AssertionError):
    pass


class Workload:
    """What a mode brings to the driver. ``rng`` is the fault schedule's (the workload draws
    its faults from it, the driver the gaps between them); ``PROFILES`` its named profiles."""

    PROFILES: dict = {}
    first_fault_ms: tuple[int, int] = (1_000, 3_000)
    rng: random.Random

    @property
    def now(self) -> int:
        raise NotImplementedError

    def start(self) -> None:
        """Start the nodes and clients (no fault yet)."""
        raise NotImplementedError

    def schedule(self, at_ms: int, fn) -> None:
        raise NotImplementedError

    def run_until(self, t_ms: int) -> None:
        raise NotImplementedError

    def inject(self) -> None:
        """One fault, chosen with ``rng``."""
        raise NotImplementedError

    def heal(self) -> None:
        """No partitions, every node up, no more message loss."""
        raise NotImplementedError

    def converge(self, timeout_ms: int) -> None:
        """Make progress again within ``timeout_ms`` of now (AssertionError if not)."""
        raise NotImplementedError

    def result(self, faults: int):
        """The end-of-run checks; a dataclass of what the run went through."""
        raise NotImplementedError


class ClusterWorkload(Workload):
    """A workload on a ``SimCluster`` (``self.cluster``): its clock, and the faults the Raft and
    controller modes share (draws from ``rng`` in a fixed order: a seed replays exactly)."""

    cluster = None

    @property
    def now(self) -> int:
        return self.cluster.now

    def schedule(self, at_ms: int, fn) -> None:
        self.cluster.schedule(at_ms, fn)

    def run_until(self, t_ms: int) -> None:
        self.cluster.run_until(t_ms)

    def heal(self) -> None:
        c = self.cluster
        c.heal()
        for nid in sorted(c.nodes):
            c.restart(nid)
        c.network.faults.drop_rate = 0.0

    def crash_one(self, ids, leader: bool, restart_within_ms: int) -> None:
        """Crash the leader (``leader`` and there is one) or any of ``ids``; it restarts within
        ``restart_within_ms``."""
        c, current = self.cluster, self.cluster.leader()
        victim = current.id if leader and current is not None else self.rng.choice(ids)
        c.crash(victim)
        c.schedule(c.now + self.rng.randint(0, restart_within_ms), c.restart, victim)

    def split(self, ids) -> None:
        """Cut ``ids``, shuffled, in two non-empty sides (one side when there is one node)."""
        shuffled = list(ids)
        self.rng.shuffle(shuffled)
        cut = self.rng.randint(1, len(shuffled) - 1) if len(shuffled) > 1 else 1
        self.cluster.network.split(shuffled[:cut], shuffled[cut:])


class ChaosDriver:
    def __init__(self, workload: Workload, profile: ChaosProfile):
        self.workload, self.profile = workload, profile
        self.faults = 0

    @classmethod
    def for_mode(cls, mode: str, seed: int, profile: str) -> "ChaosDriver":
        workload = workload_class(mode)
        p = workload.PROFILES[profile]
        return cls(workload(seed, p), p)

    def run(self):
        w, p = self.workload, self.profile
        w.start()
        w.schedule(w.rng.randint(*w.first_fault_ms), self._fault)
        w.run_until(p.duration_ms)
        w.heal()
        w.converge(p.liveness_timeout_ms)
        return w.result(self.faults)

    def _fault(self) -> None:
        w = self.workload
        if w.now >= self.profile.duration_ms:
            return
        self.faults += 1
        w.inject()
        lo, hi = self.profile.fault_gap_ms
        w.schedule(w.now + w.rng.randint(lo, hi), self._fault)


#: mode -> (module, workload class); imported when used (the workloads import this module)
MODES = {
    "raft": ("kraft.testing.raft_chaos", "RaftWorkload"),
    "controller": ("kraft.testing.controller_chaos", "ControllerWorkload"),
    "replication": ("kraft.testing.replication_chaos", "ReplicationWorkload"),
}


def workload_class(mode: str):
    module, name = MODES[mode]
    return getattr(importlib.import_module(module), name)


def replay_command(mode: str, seed: int, profile: str) -> str:
    return f"python -m kraft.testing.chaos --mode {mode} --seed {seed} --profile {profile}"


def run_chaos(seed: int, profile: str = "ci", mode: str = "raft"):
    """One randomised run; raises ChaosFailure (with the replay command) on any failure."""
    try:
        return ChaosDriver.for_mode(mode, seed, profile).run()
    except Exception as exc:  # invariant violations, liveness, and bugs alike need the seed
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        raise ChaosFailure(f"{mode} seed {seed} failed: {detail}\n  replay: {replay_command(mode, seed, profile)}") \
            from exc


# Module-level, one per mode: seed pools send them to worker processes by reference.
def run_raft(seed: int, profile: str = "ci"):
    return run_chaos(seed, profile, "raft")


def run_controller(seed: int, profile: str = "ci"):
    return run_chaos(seed, profile, "controller")


def run_replication(seed: int, profile: str = "ci"):
    return run_chaos(seed, profile, "replication")


RUNS = {"raft": run_raft, "controller": run_controller, "replication": run_replication}


def main(argv=None) -> int:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--mode", choices=sorted(MODES), default="raft")
    known, rest = pre.parse_known_args(argv)
    return seed_main(rest, prog=f"python -m kraft.testing.chaos --mode {known.mode}", doc=__doc__,
                     profiles=workload_class(known.mode).PROFILES, default="ci", run=RUNS[known.mode],
                     failure=ChaosFailure)


if __name__ == "__main__":
    sys.exit(main())
