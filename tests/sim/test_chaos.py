"""The simulator over many random seeds (CI: 1,400 seeds x 20 simulated seconds each, with
crashes, partitions, a disk wipe, lossy/duplicating/reordering links), plus determinism.
A failure names its seed and the one-line command that replays it. Longer runs:
``python tools/seed_soak.py --mode raft``."""

import os

import pytest

from kraft.testing.chaos import ChaosFailure, run_chaos
from kraft.testing.seed_pool import failed_seeds

SEEDS = int(os.environ.get("KRAFT_SIM_SEEDS", "500"))
# A dynamic quorum (KIP-853) whose voters are added and removed while nodes crash, partition
# and lose their disks; same invariants plus one leader per epoch under any voter set.
MEMBERSHIP_SEEDS = int(os.environ.get("KRAFT_SIM_MEMBERSHIP_SEEDS", "200"))
CHUNK = 100


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_chaos_seeds(first):
    failures = failed_seeds(run_chaos, range(first, min(first + CHUNK, SEEDS)), "ci", ChaosFailure)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("first", range(0, MEMBERSHIP_SEEDS, CHUNK))
def test_chaos_seeds_with_membership_changes(first):
    failures = failed_seeds(run_chaos, range(first, min(first + CHUNK, MEMBERSHIP_SEEDS)), "ci-membership",
                            ChaosFailure)
    assert not failures, "\n".join(failures)


def test_membership_seeds_do_change_the_voters():
    """The profile must exercise what it claims: voters added and removed, committed, and
    target-voters reassignments (seed 002) recorded and driven to their end."""
    from kraft.testing.chaos import ChaosDriver

    answers, reached = [], 0
    for seed in range(20):
        driver = ChaosDriver.for_mode("raft", seed, "ci-membership")
        driver.run()
        cluster = driver.workload.cluster
        answers += cluster.admin_answers
        # A reassignment that reached its target: a Voters record whose set is the target
        # the record before it carried, and which carries none.
        h = cluster.leader().core.control
        sets, targets = h.voters._sets, h._targets
        reached += any(targets[i - 1] is not None and targets[i] is None and sets[i].ids == targets[i - 1].ids
                       for i in range(1, len(sets)))
    assert ("add", 0) in answers and ("remove", 0) in answers and ("reassign", 0) in answers
    assert reached >= 3, reached


def test_same_seed_replays_exactly():
    a, b = run_chaos(4242, "quick"), run_chaos(4242, "quick")
    assert a == b


def test_failure_message_carries_the_replay_command(monkeypatch):
    from kraft.testing.raft_chaos import RaftWorkload

    def boom(self, timeout_ms):
        raise AssertionError("synthetic")

    monkeypatch.setattr(RaftWorkload, "converge", boom)
    with pytest.raises(ChaosFailure) as info:
        run_chaos(77, "ci")
    assert "raft seed 77 failed: AssertionError: synthetic" in str(info.value)
    assert "python -m kraft.testing.chaos --mode raft --seed 77 --profile ci" in str(info.value)


def test_messages_through_the_real_codec_change_nothing():
    """The core consumes Kafka's protocol objects: encoded and decoded between nodes (as real
    peers do) they must drive every seed exactly as the objects themselves do."""
    for seed in range(8):
        assert run_chaos(seed, "ci-wire") == run_chaos(seed, "ci")
