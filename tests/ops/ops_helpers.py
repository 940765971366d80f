"""Shared by the operator-experience tests: a one-node configuration and a way to run
``kraft`` as a real process (what an operator sees: exit code, stderr)."""

from __future__ import annotations

import os
import subprocess
import sys

import kraft

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"  # Kafka's documentation example
#: The directory that holds the ``kraft`` package under test, for child processes.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(kraft.__file__)))


def write_config(tmp_path, node_id=1, port=19093, log_dirs=("d1",), metadata_dir="meta", name=None, **extra):
    props = {
        "process.roles": "controller", "node.id": str(node_id),
        "controller.quorum.voters": f"{node_id}@127.0.0.1:{port}",
        "listeners": f"CONTROLLER://127.0.0.1:{port}", "controller.listener.names": "CONTROLLER",
        "log.dirs": ",".join(str(tmp_path / d) for d in log_dirs), **extra,
    }
    if metadata_dir:
        props["metadata.log.dir"] = str(tmp_path / metadata_dir)
    path = tmp_path / (name or f"server-{node_id}.properties")
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


def kraft_env() -> dict:
    return dict(os.environ, PYTHONUNBUFFERED="1",
                PYTHONPATH=os.pathsep.join(filter(None, [SOURCE_ROOT, os.environ.get("PYTHONPATH")])))


def run_kraft(*args, timeout=60, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraft", *args], capture_output=True, text=True,
                          timeout=timeout, env=kraft_env(), cwd=cwd)


def start_kraft(*args, cwd=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kraft", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=kraft_env(), cwd=cwd)
