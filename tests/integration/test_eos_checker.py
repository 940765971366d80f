"""The exactly-once checker (``tools/eos_checker.py``): its verdict (``tools/eos_history.py``) on
made-up histories, each anomaly it exists to catch caught (lost input, duplicate copy, order,
aborted read, lost committed transaction, offsets going backwards) and a clean history passing,
then CI's one-minute run of transactional copiers against real processes with faults on
brokers, the coordinators and the copiers. The 30-minute run is the same command with
``--minutes 30``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

TOOLS = os.path.join(os.path.dirname(__file__), "..", "..", "tools")
sys.path.insert(0, TOOLS)

import eos_history as eh  # noqa: E402
from eos_history import ABORTED, COMMITTED, UNKNOWN, Attempt, Copy  # noqa: E402


def acks(partition, n):
    return [(partition, o, f"v{partition}-{o}".encode()) for o in range(n)]


def copies(attempt, partition, in_offsets, first_out=0):
    return [Copy(partition, first_out + i, attempt, partition, o, f"v{partition}-{o}".encode())
            for i, o in enumerate(in_offsets)]


def attempt(name, produced, offsets, outcome=COMMITTED, started=0.0, acked=0.0):
    return Attempt(name, name.split(".")[0], produced, offsets, outcome, started, acked)


def clean():
    """Input 0:0-5 copied by a1 (0-2) and a3 (3-5); a2 copied 3-5 too but was aborted."""
    attempts = {"a1": attempt("a1", 3, {0: 3}, started=1.0, acked=1.1),
                "a2": attempt("a2", 3, {0: 6}, ABORTED),
                "a3": attempt("a3", 3, {0: 6}, started=3.0, acked=3.1)}
    final = copies("a1", 0, [0, 1, 2]) + copies("a3", 0, [3, 4, 5], first_out=7)  # a2's 3-5 sit at 3-5, hidden
    return attempts, final


def test_a_clean_history_passes_an_aborted_attempt_recopied_later_is_no_duplicate():
    attempts, final = clean()
    v = eh.verdict(acks(0, 6), attempts, final[:2], final, {0: 6}, 5.0)
    assert v.ok, v
    assert v.attempts == {COMMITTED: 2, ABORTED: 1} and v.final_reads == 6 and v.live_reads == 2


def test_an_acknowledged_input_with_no_committed_copy_is_lost():
    attempts, final = clean()
    v = eh.verdict(acks(0, 7), attempts, [], final)
    assert v.lost == ["v0-6 at input 0:6"] and not v.ok
    v = eh.verdict(acks(0, 8), attempts, [], final, {0: 7}, 5.0)  # the group committed past 6, not 7
    assert v.lost == ["v0-6 at input 0:6"] and v.not_reached == ["v0-7 at input 0:7"]


def test_an_input_copied_by_two_committed_attempts_is_a_duplicate():
    attempts, final = clean()
    attempts["a4"] = attempt("a4", 1, {0: 6}, UNKNOWN)  # a zombie's commit that went through
    v = eh.verdict(acks(0, 6), attempts, [], final + copies("a4", 0, [5], first_out=11))
    assert len(v.duplicates) == 1 and "input 0:5 copied 2 times" in v.duplicates[0]
    assert v.out_of_order  # 5 after 5 in the same output partition


def test_copies_out_of_input_order_or_in_another_partition_fail():
    attempts = {"a1": attempt("a1", 3, {0: 3})}
    swapped = [Copy(0, 0, "a1", 0, 0, b"v0-0"), Copy(0, 1, "a1", 0, 2, b"v0-2"), Copy(0, 2, "a1", 0, 1, b"v0-1")]
    v = eh.verdict(acks(0, 3), attempts, [], swapped)
    assert v.out_of_order == ["output 0:2 copies input offset 1 after 0:1 copied 2"]
    moved = [Copy(1, 0, "a1", 0, o, f"v0-{o}".encode()) for o in range(1)]
    assert "copies input partition 0" in eh.verdict([], {}, [], moved).out_of_order[0]


def test_a_record_of_an_aborted_attempt_read_by_any_read_committed_reader_is_an_aborted_read():
    attempts, final = clean()
    leaked = copies("a2", 0, [3], first_out=3)
    v = eh.verdict(acks(0, 6), attempts, leaked, final)
    assert v.aborted_reads == ["live reader read 0:3 (input 0:3) of aborted attempt a2"]
    v = eh.verdict(acks(0, 6), attempts, [], final + leaked)
    assert any(x.startswith("final reader") for x in v.aborted_reads) and v.duplicates


def test_an_unknown_outcome_may_be_read():
    attempts, final = clean()
    attempts["a3"].outcome = UNKNOWN  # killed mid-commit: its copies count, whichever way it went
    assert eh.verdict(acks(0, 6), attempts, final, final).ok


def test_a_committed_attempt_missing_records_is_a_lost_committed_write():
    attempts, final = clean()
    v = eh.verdict(acks(0, 5), attempts, [], final[:-1])
    assert v.lost_committed == ["attempt a3 committed 3 records; 2 in the output"]


def test_group_offsets_going_backwards_after_an_acknowledged_commit_fail():
    attempts, final = clean()
    attempts["z"] = attempt("z", 0, {0: 3}, started=4.0, acked=4.1)  # a zombie's commit of an older offset
    v = eh.verdict(acks(0, 6), attempts, [], final, {0: 6}, 5.0)
    assert len(v.backwards) == 1 and "z committed offset 3" in v.backwards[0]
    attempts.pop("z")
    v = eh.verdict(acks(0, 6), attempts, [], final, {0: 3}, 5.0)  # the group forgot a3's commit
    assert v.backwards == ["partition 0: final committed offset 3 below a3's acknowledged 6"]


def test_the_markdown_names_the_verdict_and_the_first_anomalies():
    attempts, final = clean()
    v = eh.verdict(acks(0, 7), attempts, [], final)
    text = eh.markdown(v, title="t", faults={"kill copier": 2})
    assert "Verdict: **FAIL**" in text and "kill copier 2" in text and "- v0-6 at input 0:6" in text


def test_values_round_trip_with_separators_in_the_payload():
    c = eh.decode(2, 9, eh.encode("c0.1.2.3", 2, 41, b"a|b"))
    assert c == Copy(2, 9, "c0.1.2.3", 2, 41, b"a|b")


@pytest.mark.integration
def test_copiers_copy_exactly_once_under_broker_coordinator_and_copier_faults(tmp_path):
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is in the test extra")
    out = tmp_path / "eos.json"
    proc = subprocess.run([sys.executable, os.path.join(TOOLS, "eos_checker.py"), "--minutes", "1",
                           "--interval", "4", "--seed", "1", "--warmup", "3", "--final-settle", "60", "--json", str(out),
                           "--dir", str(tmp_path / "cluster")],
                          capture_output=True, text=True, timeout=900, cwd=str(tmp_path), check=False)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert all(n == 0 for n in result["anomalies"].values()), proc.stdout[-3000:]
    assert result["caught_up"] and result["read_to_end"] and not result["crashes"], proc.stdout[-3000:]
    assert result["acked"] > 1000 and result["final_reads"] == result["acked"], result
    assert result["attempts"].get("committed", 0) > 50 and result["attempts"].get("aborted", 0) > 5, result
    assert sum(result["faults"].values()) >= 4 and len(result["faults"]) >= 2, result  # the nemesis really hit
    assert proc.returncode == 0, proc.stdout[-3000:]
