"""Process bookkeeping shared by the peer launchers: free loopback ports, server processes
that die with the benchmark (SIGKILL at exit, on Ctrl-C, on errors, or when the parent is
killed), temp dirs removed at exit, and CPU time of server processes. Measures nothing."""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from kraft.cli.local_cluster import free_ports  # noqa: F401  (one place: the peers use it too)

_procs: list[subprocess.Popen] = []
_dirs: list[str] = []
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def temp_dir(prefix: str) -> str:
    d = tempfile.mkdtemp(prefix=f"bench-peers-{prefix}-")
    _dirs.append(d)
    return d


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: a SIGKILLed benchmark cannot leave servers behind.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


def spawn(cmd: list[str], log_path: str, env: dict | None = None, cwd: str | None = None) -> subprocess.Popen:
    """Start a server process, registered for the kill at exit."""
    log = open(log_path, "ab")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                         start_new_session=True, preexec_fn=_die_with_parent)
    log.close()
    _procs.append(p)
    return p


def register(p: subprocess.Popen) -> None:
    """Register a process started elsewhere (LocalCluster) for the kill at exit."""
    _procs.append(p)


def kill(p: subprocess.Popen | None) -> None:
    if p is not None and p.poll() is None:
        p.send_signal(signal.SIGKILL)
        p.wait()


def cleanup() -> None:
    for p in _procs:
        try:
            kill(p)
        except OSError:
            pass
    _procs.clear()
    for d in _dirs:
        shutil.rmtree(d, ignore_errors=True)
    _dirs.clear()


def install_cleanup() -> None:
    """Kill every registered process and remove temp dirs at exit, on SIGTERM and SIGINT."""
    atexit.register(cleanup)

    def on_signal(signum, frame):
        cleanup()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def cpu_split(pids) -> tuple[float, float]:
    """(user, system) CPU seconds of these processes and their threads (/proc/PID/stat).
    Apart because the two answer different questions: system time is the kernel's share of
    the design (sockets, wake-ups, fdatasync), user time the implementation's own code."""
    user = system = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            user += int(fields[11]) / _CLK_TCK  # utime
            system += int(fields[12]) / _CLK_TCK  # stime
        except (OSError, IndexError, ValueError):
            pass
    return user, system


def cpu_seconds(pids) -> float:
    """user+system CPU seconds of these processes and their threads."""
    return sum(cpu_split(pids))


def wait_until(predicate, timeout: float, interval: float = 0.05, what: str = "condition"):
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            v = predicate()
            if v:
                return v
        except Exception as exc:  # noqa: BLE001 - servers refuse connections while starting
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached within {timeout:.0f} s (last error: {last})")


def tcp_command(host: str, port: int, payload: bytes, timeout: float = 1.0) -> bytes:
    """Send ``payload``, read until the peer closes (ZooKeeper's four-letter words)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(payload)
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks)


class ServerProcesses:
    """What every peer launcher does with its server processes (``self.procs``: id -> Popen)."""

    procs: dict

    def running(self) -> list[int]:
        return [i for i, p in self.procs.items() if p.poll() is None]

    def kill(self, i: int) -> None:
        kill(self.procs.get(i))

    def stop(self) -> None:
        for i in list(self.procs):
            self.kill(i)

    def server_pids(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p.poll() is None]
