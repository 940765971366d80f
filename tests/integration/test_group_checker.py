"""The consumer-group checker (``tools/group_checker.py``): its verdict (``tools/group_history.py``)
on made-up histories, each anomaly it exists to catch caught, then CI's one-minute run against
real processes with faults on brokers, the coordinator and the consumers. The 30-minute run is
the same command with ``--minutes 30`` (figures in docs/reliability.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

TOOLS = os.path.join(os.path.dirname(__file__), "..", "..", "tools")
sys.path.insert(0, TOOLS)

import group_history as gh  # noqa: E402
from group_history import Commit, Observed, Read  # noqa: E402


def reads(consumer, partition, offsets, assignment=1, t=0.0):
    return [Read(consumer, partition, o, f"v{partition}-{o}".encode(), t + i, assignment) for i, o in enumerate(offsets)]


def acks(partition, n):
    return [(partition, o, f"v{partition}-{o}".encode()) for o in range(n)]


def test_a_clean_history_passes_and_counts_rereads():
    r = reads("a", 0, range(0, 6)) + reads("b", 0, range(4, 10), assignment=7)  # b re-reads 4, 5 after a move
    commits = [Commit("a", 0, 4, 1.0, 1.1), Commit("b", 0, 10, 5.0, 5.1)]
    v = gh.verdict(acks(0, 10), r, commits, [Observed(2.0, {0: 4}), Observed(6.0, {0: 10})], {0: 10})
    assert v.ok and v.duplicates == 2 and v.assignments == 2, v


def test_an_acknowledged_record_nobody_read_is_skipped_or_not_reached():
    r = reads("a", 0, [0, 1, 2, 4])
    v = gh.verdict(acks(0, 6), r, [], [], {0: 5})
    assert [s.split()[-1] for s in v.skipped] == ["0:3"] and [s.split()[-1] for s in v.not_reached] == ["0:5"]
    assert v.gaps and not v.ok  # the owner jumped from 2 to 4


def test_offsets_out_of_order_within_one_ownership_fail_but_a_new_ownership_may_start_lower():
    v = gh.verdict(acks(0, 3), reads("a", 0, [0, 1, 2]) + reads("a", 0, [1, 2], assignment=2), [], [], {0: 3})
    assert v.ok, v
    v = gh.verdict(acks(0, 3), reads("a", 0, [0, 1, 2, 1]), [], [], {0: 3})
    assert v.out_of_order == ["a read 0:1 after 0:2"]


def test_a_commit_started_after_a_higher_one_was_acknowledged_goes_backwards():
    commits = [Commit("a", 0, 50, 1.0, 1.2), Commit("zombie", 0, 30, 2.0, 2.1)]
    v = gh.verdict([], [], commits, [], {})
    assert len(v.backwards) == 1 and "zombie committed 30" in v.backwards[0]
    concurrent = [Commit("a", 0, 50, 1.0, 1.2), Commit("b", 0, 30, 1.1, 1.3)]  # overlapping: no order between them
    assert gh.verdict([], [], concurrent, [], {}).ok


def test_the_watcher_reading_less_than_an_acknowledged_commit_is_a_lost_commit():
    commits = [Commit("a", 0, 50, 1.0, 1.2)]
    v = gh.verdict([], [], commits, [Observed(1.1, {0: 40}), Observed(3.0, {0: 40})], {})
    assert len(v.lost_commits) == 1 and "read as 40 at 3.000" in v.lost_commits[0]  # 1.1 started before the ack


def test_the_markdown_names_the_verdict_and_the_first_anomalies():
    v = gh.verdict(acks(0, 2), [], [], [], {0: 2})
    text = gh.markdown(v, title="t", faults={"kill consumer": 2})
    assert "Verdict: **FAIL**" in text and "kill consumer 2" in text and "- v0-0 at 0:0" in text


@pytest.mark.integration
def test_the_group_loses_nothing_under_broker_coordinator_and_consumer_faults(tmp_path):
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
    out = tmp_path / "groups.json"
    proc = subprocess.run([sys.executable, os.path.join(TOOLS, "group_checker.py"), "--minutes", "1",
                           "--interval", "5", "--seed", "5", "--json", str(out), "--dir", str(tmp_path / "cluster")],
                          capture_output=True, text=True, timeout=900, cwd=str(tmp_path), check=False)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    problems = ("skipped", "not_reached", "out_of_order", "gaps", "backwards", "lost_commits")
    assert all(result[k] == 0 for k in problems), proc.stdout[-3000:]
    assert result["caught_up"] and not result["crashes"], proc.stdout[-3000:]
    assert result["acked"] > 1000 and result["reads"] >= result["acked"], result
    assert result["commits"] > 50 and result["observations"] > 20, result
    assert sum(result["faults"].values()) >= 4, result  # the nemesis really hit
    assert proc.returncode == 0, proc.stdout[-3000:]
