"""Disk and process faults an operator meets: two processes on one data directory, a full
disk. Each test states what a broken build would do instead."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import time

import pytest
from ops_helpers import CLUSTER, run_kraft, start_kraft, write_config

from kraft.cli import main
from kraft.log.dir_lock import LOCK_FILE, LogDirLockedError, lock_directories
from kraft.server.node import fatal_advice
from kraft.errors import FatalLogError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"node exited {proc.returncode}: {proc.stderr.read()}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("node never listened")


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- the .lock file -----------------------------------------------------------------------------


def test_a_locked_log_directory_cannot_be_locked_again(tmp_path):
    """Kafka's LogManager.lockLogDirs: one holder per directory (flock, so even a second open
    file in the same process is refused)."""
    with lock_directories([str(tmp_path / "a"), str(tmp_path / "b")], create=True):
        assert os.path.exists(tmp_path / "a" / LOCK_FILE)
        with pytest.raises(LogDirLockedError, match=str(tmp_path / "b")):
            lock_directories([str(tmp_path / "c"), str(tmp_path / "b")], create=True)
        # all-or-nothing: the refused call released the lock it had taken on c
        lock_directories([str(tmp_path / "c")]).release()
    lock_directories([str(tmp_path / "a"), str(tmp_path / "b")]).release()  # free after release


def test_locking_a_missing_directory_without_create_names_it(tmp_path):
    with pytest.raises(Exception, match="nowhere.*does not exist"):
        lock_directories([str(tmp_path / "nowhere")])


def test_a_second_node_process_on_the_same_directory_exits_1_naming_it(tmp_path):
    port, other = _free_port(), _free_port()
    cfg = write_config(tmp_path, port=port)
    assert run_kraft("storage", "format", "-t", CLUSTER, "-c", cfg).returncode == 0
    first = start_kraft("server", "start", cfg)
    try:
        _wait_listening(port, first)
        second = run_kraft("server", "start", cfg, "--override", f"listeners=CONTROLLER://127.0.0.1:{other}",
                           "--override", f"controller.quorum.voters=1@127.0.0.1:{other}")
        assert second.returncode == 1, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and str(tmp_path / "meta") in lines[0] and "in use" in lines[0], second.stderr
        assert "Traceback" not in second.stderr
        # format must not write under a running node either
        fmt = run_kraft("storage", "format", "-t", CLUSTER, "-c", cfg, "--ignore-formatted")
        assert fmt.returncode == 1 and "in use" in fmt.stderr and fmt.stderr.count("\n") == 1, fmt.stderr
        assert first.poll() is None  # the first node is untouched
    finally:
        _stop(first)
    assert first.returncode == 0


# --- a full disk --------------------------------------------------------------------------------


def test_fatal_advice_says_what_to_do_for_a_full_disk():
    exc = FatalLogError("write to /d/__cluster_metadata-0/00000000000000000000.log failed")
    exc.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    advice = fatal_advice(exc, "/d")
    assert "free space" in advice and "/d" in advice and "restart" in advice


def _fail_log_writes(monkeypatch):
    """ENOSPC from os.pwrite on segment files only (state files still write)."""
    real = os.pwrite

    def pwrite(fd, data, pos):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if target.endswith(".log"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, pos)

    monkeypatch.setattr(os, "pwrite", pwrite)


def test_a_full_disk_stops_the_node_with_exit_code_2_and_says_which_file(tmp_path, monkeypatch, capsys):
    """A one-node quorum elects itself and appends its first batch; the append fails with
    ENOSPC. Before: CRITICAL logged, exit code 0 (a supervisor would not restart it)."""
    cfg = write_config(tmp_path, port=_free_port())
    assert main(["storage", "format", "-t", CLUSTER, "-c", cfg]) == 0
    capsys.readouterr()
    _fail_log_writes(monkeypatch)
    code = main(["server", "start", cfg, "--log-format", "json"])
    err = capsys.readouterr().err
    assert code == 2, err
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    critical = [r for r in records if r["level"] == "CRITICAL"]
    assert critical, err
    msg = critical[0]["msg"]
    assert ".log" in msg and "No space left on device" in msg and "free space" in msg, msg


@pytest.fixture
def tiny_filesystem(tmp_path):
    """A 2 MiB tmpfs (needs root and mount; the unit test above covers the logic otherwise)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_real_full_filesystem_makes_the_process_exit_non_zero(tmp_path, tiny_filesystem):
    port = _free_port()
    cfg = write_config(tmp_path, port=port, log_dirs=("tiny/data",), metadata_dir=None,
                       **{"controller.quorum.append.linger.ms": "1"})
    assert run_kraft("storage", "format", "-t", CLUSTER, "-c", cfg).returncode == 0
    node = start_kraft("server", "start", cfg)
    try:
        _wait_listening(port, node)
        produce = run_kraft("produce", "--bootstrap-controller", f"127.0.0.1:{port}", "--count", "60",
                            "--size", "100000", "--batch-size", "1", "--timeout", "20", timeout=120)
        assert produce.returncode == 1, produce.stdout
        node.wait(30)
    finally:
        _stop(node)
    err = node.stderr.read()
    assert node.returncode == 2, err
    assert "No space left on device" in err and str(tiny_filesystem / "data") in err and "free space" in err


def test_a_failed_quorum_state_write_on_the_loop_thread_is_fatal_too(tmp_path, monkeypatch, capsys):
    """The election state is written on the loop thread; ENOSPC there must stop the node with
    exit code 2 like a failed append, not leave an exception in an asyncio callback log."""
    cfg = write_config(tmp_path, port=_free_port())
    assert main(["storage", "format", "-t", CLUSTER, "-c", cfg]) == 0
    capsys.readouterr()
    real = os.pwrite
    writes = []

    def pwrite(fd, data, pos):
        if "quorum-state" in os.readlink(f"/proc/self/fd/{fd}"):
            writes.append(pos)
            if len(writes) > 1:  # the first is at startup (exit 1 there); later ones run on the loop
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, pos)

    monkeypatch.setattr(os, "pwrite", pwrite)
    code = main(["server", "start", cfg])
    err = capsys.readouterr().err
    assert code == 2, err
    critical = [line for line in err.splitlines() if "CRITICAL" in line]
    assert critical and "quorum-state" in critical[0] and "free space" in critical[0], err


def test_a_full_disk_at_startup_exits_1_with_the_file_and_the_remedy(tmp_path, monkeypatch, capsys):
    cfg = write_config(tmp_path, port=_free_port())
    assert main(["storage", "format", "-t", CLUSTER, "-c", cfg]) == 0
    capsys.readouterr()
    real = os.pwrite

    def pwrite(fd, data, pos):
        if "quorum-state" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, pos)

    monkeypatch.setattr(os, "pwrite", pwrite)
    code = main(["server", "start", cfg])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "ERROR" in line]
    assert code == 1 and len(errors) == 1, err
    assert "quorum-state.tmp" in errors[0] and "No space left on device" in errors[0]
    assert "free space" in errors[0] and "Traceback" not in err
