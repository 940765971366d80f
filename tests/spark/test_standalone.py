"""The pipeline on a Spark standalone cluster: a master and two one-core workers started
from the PySpark install (``spark-class``), and ``kraft pipeline audit --master
spark://...`` run unchanged against them, giving the tables a local run gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pyarrow.parquet as pq
import pytest

from kraft.cli.local_cluster import free_ports
from kraft.testing.metadata_history import cluster_history, write_history

# Three JVMs, then the command's own driver and executors: well over 60 s here.
pytestmark = pytest.mark.slow


def _spark_home():
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _state(ui_port):
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return json.load(r)


@pytest.fixture
def standalone(tmp_path):
    home = _spark_home()
    port, ui, w1, w2 = free_ports(4)
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_LOG_DIR=str(tmp_path / "logs"), SPARK_WORKER_DIR=str(tmp_path / "work"))
    spark_class = os.path.join(home, "bin", "spark-class")
    procs = []

    def start(*args, name):
        with open(tmp_path / f"{name}.log", "wb") as log:  # the child keeps its own descriptor
            procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))

    try:
        start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(ui), name="master")
        for i, wui in enumerate((w1, w2)):
            start("org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--cores", "1",
                  "--memory", "1g", "--host", "127.0.0.1", "--webui-port", str(wui),
                  "--work-dir", str(tmp_path / f"work{i}"), name=f"worker{i}")
        deadline = time.monotonic() + 120
        while True:
            try:
                if sum(w["state"] == "ALIVE" for w in _state(ui)["workers"]) == 2:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the standalone master never saw two workers"
            assert all(p.poll() is None for p in procs), "a Spark daemon exited"
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}", ui
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def test_audit_runs_unchanged_on_a_master_with_two_workers(standalone, tmp_path):
    master, ui = standalone
    history = cluster_history(brokers=3, topics=5, partitions=4)
    for n in (1, 2, 3):
        write_history(str(tmp_path / "shared" / f"node{n}"), history, segment_bytes=2000)  # several tasks
    out = tmp_path / "audit"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "kraft", "pipeline", "audit", "--master", master,
                           "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2",
                           str(tmp_path / "shared" / "node*"), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"on {master}" in done.stdout
    assert "0 divergent offset(s), 0 at or below the high watermark" in done.stdout
    parts = pq.read_table(str(out / "partition_history")).to_pylist()
    assert len(parts) == history.counts["PartitionRecord"] + history.counts["PartitionChangeRecord"]
    assert sum(1 for p in parts if p["leader_changed"]) == history.leaders_changed
    assert len(pq.read_table(str(out / "topics"))) == 5
    apps = _state(ui)["completedapps"]
    assert [a["name"] for a in apps] == ["kraft-pipeline-audit"] and apps[0]["cores"] == 2  # both workers
