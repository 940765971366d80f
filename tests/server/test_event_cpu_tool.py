"""tools/event_cpu_profile.py times functions in place: a wrapped method still answers as
before and adds its calls and thread CPU to its label; the report divides by writes."""

from __future__ import annotations

import importlib.util
import os
import sys
import types

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "event_cpu_profile.py")
_spec = importlib.util.spec_from_file_location("event_cpu_profile", _PATH)
event_cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(event_cpu)


def _module():
    mod = types.ModuleType("kraft_event_cpu_fixture")

    class Worker:
        def __init__(self):
            self.seen = []

        def work(self, n, *, scale=1):
            self.seen.append(n)
            return sum(i * scale for i in range(n))

        @staticmethod
        def helper(x):
            return x + 1

    mod.Worker = Worker
    sys.modules[mod.__name__] = mod
    return mod


def test_a_wrapped_method_answers_as_before_and_counts_its_calls_and_cpu():
    mod = _module()
    acc = {}
    event_cpu.wrap("kraft_event_cpu_fixture:Worker.work", "work", acc)
    event_cpu.wrap("kraft_event_cpu_fixture:Worker.helper", "helper", acc)
    w = mod.Worker()
    assert w.work(200_000, scale=2) == sum(i * 2 for i in range(200_000))
    assert w.work(3) == 3 and w.seen == [200_000, 3]
    assert mod.Worker.helper(1) == 2 and w.helper(2) == 3  # still a staticmethod
    calls, ns = acc["work"]
    assert calls == 2 and ns > 1_000_000  # a 200,000-step loop takes well over a millisecond of CPU
    assert acc["helper"][0] == 2
    del sys.modules[mod.__name__]


def test_totals_round_trip_through_the_dump_format_and_the_report_divides_by_writes(tmp_path):
    path = tmp_path / "cpu-1.tsv"
    path.write_text("A read\t300\t9000000\nB step\t100\t2000000\n")
    after = event_cpu.read_totals(str(path))
    assert after == {"A read": (300, 9_000_000), "B step": (100, 2_000_000)}
    assert event_cpu.read_totals(str(tmp_path / "missing.tsv")) == {}
    rows = event_cpu.report({"A read": (100, 3_000_000)}, after, writes=100)
    assert rows[0].split() == ["A", "read", "2.00/write", "30.0", "µs/call", "60.0", "µs/write"]
    assert rows[1].split() == ["B", "step", "1.00/write", "20.0", "µs/call", "20.0", "µs/write"]
    assert event_cpu.report(after, after, writes=100) == []  # nothing called in the window
