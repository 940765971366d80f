"""The fault soak (tools/fault_soak.py) in short: 45 s of writes against 3 real nodes while
kill -9, SIGSTOP, black-hole partitions, full disks (as root), bit flips and restarts (one
node, or the whole quorum at once) hit them, then every acknowledged write is looked up in the
nodes' logs on disk and the controllers' final images compared. The 10-minute run is the
same command with ``--minutes 10`` (figures in the README)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SOAK = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "fault_soak.py")


@pytest.mark.integration
def test_no_acknowledged_write_is_lost_and_no_node_diverges_under_faults(tmp_path):
    out = tmp_path / "soak.json"
    proc = subprocess.run([sys.executable, SOAK, "--minutes", "0.75", "--interval", "2.5", "--seed", "7",
                           "--writers", "4", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert out.exists(), proc.stdout[-2000:] + proc.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["acked"] > 1000, result
    assert sum(result["faults"].values()) >= 8, result
    assert result["lost"] == 0 and result["divergent"] == 0, result
    assert result["acked_below_log_start"] == 0, result  # every acknowledged write was checked
    assert result["faults"].get("disk_exit_0", 0) == 0, result  # a full disk never exits 0
    # 1,000 partitions in the image, and every controller ends with the same one, through
    # restarts of single nodes and of the whole quorum at once (seed 7 has one of those).
    assert result["images"] == 1 and result["image_partitions"] >= 1000, result
    assert sum(result["faults"].get(k, 0) for k in ("rolling", "term_all", "kill_all")) >= 1, result
    assert proc.returncode == 0, proc.stderr[-4000:]
