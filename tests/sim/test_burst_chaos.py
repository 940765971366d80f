"""Bursts of CreateTopics that outpace replication, under the simulator (issue 38), beside the
controller seeds of test_controller_chaos.py: nodes spend simulated CPU per record, the leader
holds back admin requests at its uncommitted bound. ``calm`` seeds must absorb the burst with no
leader change and every request acknowledged; ``stormy`` seeds crash and isolate the active
controller mid-burst and must lose nothing and apply nothing twice. A failure names its seed and
the command that replays it (``python -m kraft.testing.burst_chaos``). Also: the burst checks
catch a controller without back-pressure, and one that applies a request it answered
REQUEST_TIMED_OUT."""

import os

import pytest

from kraft.controller import request_queue
from kraft.errors import ErrorCode
from kraft.testing.burst_chaos import run_burst
from kraft.testing.chaos import ChaosFailure
from kraft.testing.seed_pool import failed_seeds

CALM = int(os.environ.get("KRAFT_BURST_SIM_SEEDS", "60"))
STORMY = int(os.environ.get("KRAFT_BURST_STORM_SEEDS", "40"))
CHUNK = 10


def _failures(profile, seeds):
    return failed_seeds(run_burst, seeds, profile, ChaosFailure)


@pytest.mark.parametrize("first", range(0, CALM, CHUNK))
def test_calm_burst_seeds(first):
    failures = _failures("calm", range(first, min(first + CHUNK, CALM)))
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("first", range(0, STORMY, CHUNK))
def test_stormy_burst_seeds(first):
    failures = _failures("stormy", range(1000 + first, 1000 + min(first + CHUNK, STORMY)))
    assert not failures, "\n".join(failures)


def test_same_burst_seed_replays_exactly():
    assert run_burst(3, "stormy") == run_burst(3, "stormy")


def test_the_burst_seeds_go_through_what_they_are_about():
    """Coverage: bursts many times the bound, the admin lane held back, requests timing out in
    the queue (and retried), and in storms, several leaderships during the burst."""
    calm = [run_burst(seed, "calm") for seed in range(12)]
    assert all(r.records > 2 * r.bound for r in calm[:3]) and sum(r.records > 5 * r.bound for r in calm) >= 4
    assert sum(r.held_back > 0 for r in calm) >= 8
    assert sum(r.peak_backlog >= r.bound for r in calm) >= 6  # the bound was reached, and held
    assert sum(r.timed_out > 0 for r in calm) >= 3
    stormy = [run_burst(seed, "stormy") for seed in range(1000, 1012)]
    assert sum(r.leaderships > 1 for r in stormy) >= 10
    assert sum(r.timed_out > 0 for r in stormy) >= 1


def _first_failure(profile, seeds):
    failures = _failures(profile, seeds)
    return failures[0] if failures else None


def test_a_controller_without_back_pressure_is_caught(monkeypatch):
    """Admit every request at once (the controller before issue 38): the leader's tail grows
    past the bound, and with the CPU it costs, followers stop fetching and leadership moves."""
    monkeypatch.setattr(request_queue.ControllerQueue, "admits", lambda self: True)
    failure = _first_failure("calm", range(5))
    assert failure is not None and "past the bound" in failure


def test_a_burst_without_back_pressure_loses_its_leader(monkeypatch):
    """The same, with the backlog check blind: what users saw (issue 38), leadership moving and
    a retried CreateTopics answered "already exists" (its first attempt, answered NOT_CONTROLLER
    by the deposed controller, had committed under the next one)."""
    from kraft.testing import burst_chaos
    monkeypatch.setattr(request_queue.ControllerQueue, "admits", lambda self: True)
    observe = burst_chaos._Burst.observe

    def blind(self):
        self.bound = 1 << 40
        return observe(self)
    monkeypatch.setattr(burst_chaos._Burst, "observe", blind)
    failure = _first_failure("calm", range(12))
    assert failure is not None and ("leadership changed during the burst" in failure
                                    or "already exists" in failure)


def test_applying_a_request_answered_timed_out_is_caught(monkeypatch):
    """REQUEST_TIMED_OUT must mean "not applied": answer it, yet leave the request queued."""
    def expire_but_keep(self, now_ms):
        for lane in (self._broker, self._admin):
            for q in lane:
                if q.deadline_ms is not None and q.deadline_ms < now_ms and id(q) not in told:
                    told[id(q)] = q  # (kept: its id is not reused meanwhile)
                    self.controller.answer_error(q.token, q.api_key, q.request, q.version,
                                                 ErrorCode.REQUEST_TIMED_OUT, "timed out")
        return 0

    told = {}
    monkeypatch.setattr(request_queue.ControllerQueue, "expire", expire_but_keep)
    failure = _first_failure("calm", range(12))
    assert failure is not None and "found them created" in failure
