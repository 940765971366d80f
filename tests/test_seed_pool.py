"""The seed pool reports exactly the seeds that failed, with their messages, in seed order,
whether the seeds ran in worker processes or here (a pool that dropped a worker's failure or a
crash would make every chaos test pass vacuously)."""

import pytest

from kraft.testing.seed_pool import failed_seeds


class Odd(Exception):
    pass


def run_sample(seed, profile):
    if seed == 13:
        raise KeyError("simulator bug")
    if seed % 5 == 0:
        raise Odd(f"seed {seed} {profile}: invariant broken")


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_every_failed_seed_and_only_those_are_reported_in_order(workers):
    out = failed_seeds(run_sample, range(1, 21), "p", Odd, workers=workers)
    assert [m.split()[1] for m in out] == ["5", "10", "13", "15", "20"]
    assert out[0] == "seed 5 p: invariant broken"
    assert "KeyError" in out[2] and "simulator bug" in out[2]


def test_no_seeds_no_failures():
    assert failed_seeds(run_sample, [], "p", Odd) == []
