"""packaging/grafana-dashboard.json (issue 37 item 6) uses only metrics kraft exports: the
node's core metrics as NodeMetrics renders them, and the others by the names the server
modules register (a renamed metric fails here, not on an operator's empty panel)."""

from __future__ import annotations

import json
import os
import re

from kraft.server.metrics import NodeMetrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def _registered_names() -> set[str]:
    names = set(re.findall(r"^# TYPE (\S+) ", NodeMetrics(1).render(), re.M))
    for dirpath, _, files in os.walk(os.path.join(ROOT, "kraft", "server")):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(dirpath, f), encoding="utf-8") as src:
                    names |= set(re.findall(r'(?:Gauge|Counter|Histogram)\(\s*"(kraft_[a-z0-9_]+)"', src.read()))
    return names


def test_every_metric_the_dashboard_uses_is_exported():
    with open(os.path.join(ROOT, "packaging", "grafana-dashboard.json"), encoding="utf-8") as f:
        dashboard = json.load(f)
    exported = _registered_names()
    used = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            used |= set(re.findall(r"\bkraft_[a-z0-9_]+", target["expr"]))
    assert used
    for name in sorted(used):
        base = next((name[: -len(s)] for s in HISTOGRAM_SUFFIXES if name.endswith(s) and name[: -len(s)] in exported),
                    name)
        assert base in exported, f"the dashboard uses {name}, which no node exports"
