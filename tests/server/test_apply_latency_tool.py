"""tools/apply_latency.py reads the controller's per-record-type histograms exactly as the
metrics endpoint renders them: counts per record type and phase, bucket-bound percentiles."""

from __future__ import annotations

import importlib.util
import math
import os

from kraft.server.metrics import HistogramFamily, NodeMetrics

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "apply_latency.py")
_spec = importlib.util.spec_from_file_location("apply_latency", _PATH)
apply_latency = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(apply_latency)


def _exposition():
    m = NodeMetrics(node_id=2)
    commit = HistogramFamily("kraft_controller_apply_append_to_commit_ms", "h", "record_type")
    applied = HistogramFamily("kraft_controller_apply_commit_to_applied_ms", "h", "record_type")
    commit.labels("PartitionRecord").observe(3.0, 98)   # <= 5 ms
    commit.labels("PartitionRecord").observe(40.0, 2)   # <= 50 ms
    commit.labels("TopicRecord").observe(0.07, 1)       # <= 0.1 ms
    applied.labels("PartitionRecord").observe(0.2, 100)
    m.apply_commit, m.apply_applied = commit, applied
    return m.render()


def test_the_tool_reads_counts_and_percentiles_per_record_type_and_phase():
    hists = apply_latency.parse(_exposition())
    part = hists[("append->commit", "PartitionRecord")]
    assert part[-1] == (math.inf, 100.0)
    assert apply_latency.percentile(part, 0.5) == 5.0
    assert apply_latency.percentile(part, 0.98) == 5.0
    assert apply_latency.percentile(part, 0.99) == 50.0
    assert apply_latency.percentile(hists[("append->commit", "TopicRecord")], 0.99) == 0.1
    assert apply_latency.percentile(hists[("commit->applied", "PartitionRecord")], 1.0) == 0.25
    assert ("commit->applied", "TopicRecord") not in hists
    per_bucket = dict(apply_latency.counts(part))
    assert per_bucket[5.0] == 98 and per_bucket[50.0] == 2 and sum(per_bucket.values()) == 100


def test_the_report_summarises_every_node():
    summary = apply_latency.report({1: apply_latency.parse(_exposition())})
    row = summary[1]["append->commit"]["PartitionRecord"]
    assert (row["count"], row["p50"], row["p99"]) == (100, 5.0, 50.0)
