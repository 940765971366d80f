"""The one fault-injection driver of the simulator's three modes (``kraft.testing.chaos``): its
schedule (faults only inside the fault window, at the profile's gaps, then heal, converge and
the result, in that order), the modes' replay commands, and the command line."""

import heapq
import random
import shlex
from dataclasses import dataclass

import pytest

from kraft.testing import chaos
from kraft.testing.chaos import MODES, ChaosDriver, ChaosFailure, ChaosProfile, Workload, workload_class


@dataclass
class _Result:
    faults: int


class _Recorder(Workload):
    """A workload on a bare event heap that records what the driver asks of it."""
    first_fault_ms = (100, 200)

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self._now, self._events, self._n = 0, [], 0
        self.calls, self.injected_at = [], []

    @property
    def now(self) -> int:
        return self._now

    def schedule(self, at_ms, fn):
        self._n += 1
        heapq.heappush(self._events, (at_ms, self._n, fn))

    def run_until(self, t_ms):
        while self._events and self._events[0][0] <= t_ms:
            self._now, _, fn = heapq.heappop(self._events)
            fn()
        self._now = max(self._now, t_ms)

    def start(self):
        self.calls.append("start")

    def inject(self):
        self.injected_at.append(self._now)

    def heal(self):
        self.calls.append(("heal", self._now))

    def converge(self, timeout_ms):
        self.calls.append(("converge", timeout_ms))
        self.run_until(self._now + timeout_ms)  # as the modes do: time passes while they converge

    def result(self, faults):
        self.calls.append("result")
        return _Result(faults)


@pytest.mark.parametrize("seed", range(5))
def test_faults_only_in_the_window_at_the_profiles_gaps_then_heal_converge_result(seed):
    profile = ChaosProfile(duration_ms=5_000, fault_gap_ms=(300, 700), liveness_timeout_ms=4_000)
    w = _Recorder(seed)
    result = ChaosDriver(w, profile).run()
    times = w.injected_at
    assert times and 100 <= times[0] <= 200
    assert all(t < profile.duration_ms for t in times)  # none while healed and converging
    assert all(300 <= b - a <= 700 for a, b in zip(times, times[1:]))
    assert profile.duration_ms - times[-1] <= 700  # it went on to the end of the window
    assert result.faults == len(times)
    assert w.calls == ["start", ("heal", profile.duration_ms), ("converge", 4_000), "result"]


def test_every_mode_has_a_workload_with_the_shared_profiles():
    for mode in MODES:
        cls = workload_class(mode)
        assert issubclass(cls, Workload)
        assert {"quick", "ci", "soak"} <= set(cls.PROFILES)
        assert all(isinstance(p, ChaosProfile) for p in cls.PROFILES.values())


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_failure_names_its_mode_and_replays_from_its_command(mode, monkeypatch, capsys):
    """A seed that fails says how to replay it, and that command fails the same way (the
    workload breaks at its third fault, so the failure comes from the driver's schedule)."""
    cls = workload_class(mode)
    inject = cls.inject

    def third_fault_breaks(self):
        self.broken = getattr(self, "broken", 0) + 1
        if self.broken == 3:
            raise AssertionError(f"synthetic at {self.now}")
        inject(self)

    monkeypatch.setattr(cls, "inject", third_fault_breaks)
    with pytest.raises(ChaosFailure) as info:
        chaos.run_chaos(11, "quick", mode)
    message = str(info.value)
    assert message.startswith(f"{mode} seed 11 failed: AssertionError: synthetic at ")
    replay = message.rsplit("replay: ", 1)[1]
    argv = shlex.split(replay)
    assert argv[:3] == ["python", "-m", "kraft.testing.chaos"]
    assert chaos.main(argv[3:]) == 1
    err = capsys.readouterr().err
    assert message.splitlines()[0] in err  # the same fault, at the same simulated time


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_command_line_runs_seeds_of_each_mode(mode, capsys):
    assert chaos.main(["--mode", mode, "--seed", "3", "--count", "2", "--profile", "quick"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["seed 3", "seed 4"]
    assert all(" ok " in line and "faults=" in line for line in out)
