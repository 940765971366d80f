"""The quorum controller under the simulator over many random seeds (CI: 1,000 seeds x 12
simulated seconds of faults each, then healing, liveness and the end-of-run checks), beside the
Raft seeds of test_chaos.py. Each seed runs a QuorumController on every voter, simulated brokers
(register, heartbeat, pause, crash, controlled shutdown) and admins (create/delete topics, add
partitions, alter configs, with retries). A failure names its seed and the one-line command that
replays it. Longer runs: ``python tools/seed_soak.py --mode controller``."""

import os

import pytest

from kraft.testing.chaos import ChaosFailure, run_controller
from kraft.testing.seed_pool import failed_seeds

SEEDS = int(os.environ.get("KRAFT_CONTROLLER_SIM_SEEDS", "1000"))
CHUNK = 50


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_controller_chaos_seeds(first):
    failures = failed_seeds(run_controller, range(first, min(first + CHUNK, SEEDS)), "ci", ChaosFailure)
    assert not failures, "\n".join(failures)


def test_same_seed_replays_exactly():
    a, b = run_controller(4242, "quick"), run_controller(4242, "quick")
    assert a == b


def test_failure_message_carries_the_replay_command(monkeypatch):
    from kraft.testing.controller_chaos import ControllerWorkload

    def boom(self, timeout_ms):
        raise AssertionError("synthetic")

    monkeypatch.setattr(ControllerWorkload, "converge", boom)
    with pytest.raises(ChaosFailure) as info:
        run_controller(77, "ci")
    assert "controller seed 77 failed: AssertionError: synthetic" in str(info.value)
    assert "python -m kraft.testing.chaos --mode controller --seed 77 --profile ci" in str(info.value)


def test_the_seeds_go_through_what_the_invariants_are_about():
    """Coverage, so that passing seeds mean something: across 40 seeds there are controller
    failovers, snapshots loaded, brokers fenced by expired leases and registering again with a
    new incarnation, acknowledged topics, answers checked against commits, and active controllers
    losing leadership with proposals not yet committed or inside a metadata transaction."""
    results = [run_controller(seed, "ci") for seed in range(40)]
    assert sum(r.activations > 1 for r in results) >= 10  # failovers
    assert sum(r.snapshots_loaded for r in results) > 0
    assert sum(r.fenced_by_expiry for r in results) > 0
    assert sum(r.registrations > r.brokers for r in results) > 0  # new incarnations
    assert sum(r.acknowledged_creates for r in results) > 50
    assert sum(r.answers_checked for r in results) > 500
    assert sum(r.dropped_uncommitted > 0 for r in results) >= 2  # leadership lost with records in flight
    assert sum(r.inherited_transactions for r in results) > 0  # a controller died inside a transaction
