"""A local cluster of real ``kraft server start`` processes on loopback, in one directory.

Used by ``kraft demo``, the integration tests and the quorum benchmarks: it writes each
node's server.properties, formats storage, starts, kills (SIGKILL), stops (SIGTERM) and
restarts processes, and wipes a node's disk. Processes run ``sys.executable -m kraft`` with
the directory holding the caller's ``kraft`` package first on PYTHONPATH and an empty working
directory, so they import the same code as the caller wherever it was started from (a
``kraft`` folder in the caller's directory, e.g. the clone, must not shadow the package). A
node that exits without being told to is reported by :meth:`unexpected_exits` with the tail
of its log. Nothing here decides anything about Raft.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import kraft
from kraft.config import NodeConfig, load_properties
from kraft.log.formatting import format_storage, random_uuid

#: The directory that holds the ``kraft`` package this process imported.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(kraft.__file__)))

#: The low-latency profile: no append linger, shorter timeouts for failures a reset does not show.
LOW_LATENCY = {
    # A crashed leader is replaced at once by default (its followers see the connection
    # reset); these shorter timeouts cover the hangs and partitions a reset does not show.
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "100",
    "controller.quorum.request.timeout.ms": "1000",
    "controller.quorum.retry.backoff.ms": "10",
    # Append at once: proposals of one event-loop turn still share an append and an fsync.
    "controller.quorum.append.linger.ms": "0",
}


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL when the parent dies (Linux), so a crashed test
    or benchmark cannot leave servers running."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class LocalCluster:
    """``size`` voters (ids 1..size): controllers, or ``combined`` broker+controller nodes;
    then ``brokers`` broker-only nodes (ids size+1..). Brokers listen on PLAINTEXT."""

    def __init__(self, directory: str, size: int = 3, *, overrides: dict | None = None,
                 metrics: bool = False, log_level: str = "INFO", combined: bool = False, brokers: int = 0,
                 dynamic: bool = False, log_dirs: int = 1, node_overrides: dict | None = None):
        """``node_overrides``: node id -> settings for that node only (``broker.rack``).
        ``dynamic``: a KIP-853 quorum — nodes know ``controller.quorum.bootstrap.servers``
        instead of the voters; node 1 is formatted ``--standalone``, the others
        ``--no-initial-controllers`` (observers until added)."""
        self.dynamic = dynamic
        self.log_dirs = log_dirs  # ``log.dirs`` entries per broker (JBOD when more than one)
        self._formatted: set[int] = set()
        self.directory = directory
        self.size = size
        self.controller_ids = list(range(1, size + 1))
        self.ids = list(range(1, size + brokers + 1))
        self.combined = combined
        self.broker_ids = [i for i in self.ids if combined or i > size]
        self.broker_ports = dict(zip(self.broker_ids, free_ports(len(self.broker_ids))))
        self.overrides = dict(overrides or {})
        self.node_overrides = {i: dict(o) for i, o in (node_overrides or {}).items()}
        self.log_level = log_level
        self.ports = dict(zip(self.controller_ids, free_ports(size)))
        self.metrics_ports = dict(zip(self.ids, free_ports(len(self.ids)))) if metrics else {}
        self.cluster_id = random_uuid()
        self.procs: dict[int, subprocess.Popen] = {}
        self._logs: dict[int, object] = {}
        self._expected_exit: set[int] = set()  # killed or stopped on purpose

    # --- layout ---------------------------------------------------------------------------
    def config_path(self, node_id: int) -> str:
        return os.path.join(self.directory, f"server-{node_id}.properties")

    def data_dir(self, node_id: int) -> str:
        return os.path.join(self.directory, f"node-{node_id}")

    def log_path(self, node_id: int) -> str:
        return os.path.join(self.directory, f"node-{node_id}.log")

    def address(self, node_id: int) -> tuple[str, int]:
        return ("127.0.0.1", self.ports[node_id])

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    @property
    def broker_bootstrap(self) -> str:
        """``bootstrap.servers`` for Kafka clients: every broker's PLAINTEXT listener."""
        return ",".join(f"127.0.0.1:{self.broker_ports[i]}" for i in self.broker_ids)

    def broker_address(self, node_id: int) -> tuple[str, int]:
        return ("127.0.0.1", self.broker_ports[node_id])

    def partition_dir(self, node_id: int) -> str:
        """Where a broker keeps its partition logs (``log.dirs``)."""
        return os.path.join(self.data_dir(node_id), "logs")

    def partition_dirs(self, node_id: int) -> list[str]:
        """Every ``log.dirs`` entry of a broker: ``logs``, then ``logs-2``, ``logs-3``..."""
        first = self.partition_dir(node_id)
        return [first] + [f"{first}-{k}" for k in range(2, self.log_dirs + 1)]

    def _role_props(self, i: int) -> dict:
        if i not in self.broker_ids:
            return {"process.roles": "controller", "listeners": f"CONTROLLER://127.0.0.1:{self.ports[i]}",
                    "log.dirs": self.data_dir(i)}
        listeners = [f"PLAINTEXT://127.0.0.1:{self.broker_ports[i]}"]
        if i in self.ports:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.ports[i]}")
        return {"process.roles": "broker,controller" if i in self.ports else "broker",
                "listeners": ",".join(listeners), "metadata.log.dir": self.data_dir(i),
                "log.dirs": ",".join(self.partition_dirs(i)), "inter.broker.listener.name": "PLAINTEXT"}

    def write_configs(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        voters = ",".join(f"{i}@127.0.0.1:{self.ports[i]}" for i in self.controller_ids)
        for i in self.ids:
            props = {
                "node.id": str(i),
                **({"controller.quorum.bootstrap.servers": self.bootstrap} if self.dynamic
                   else {"controller.quorum.voters": voters}),
                "controller.listener.names": "CONTROLLER",
                **self._role_props(i),
                # A cluster of fewer than 3 brokers could never create __consumer_offsets at
                # Kafka's default RF 3: its quickstart configs lower it the same way.
                **({"offsets.topic.replication.factor": str(len(self.broker_ids))}
                   if 0 < len(self.broker_ids) < 3 else {}),
                **({"kraft.metrics.port": str(self.metrics_ports[i])} if self.metrics_ports else {}),
                **self.overrides,
                **self.node_overrides.get(i, {}),
            }
            with open(self.config_path(i), "w") as f:
                f.writelines(f"{k}={v}\n" for k, v in props.items())

    def format(self, node_id: int | None = None) -> None:
        for i in ([node_id] if node_id is not None else self.ids):
            cfg = NodeConfig.from_properties(load_properties(self.config_path(i)))
            dynamic = {}
            if self.dynamic:
                # Only node 1's first format names the initial voter; a wiped disk comes back
                # as an observer (formatting --standalone again would start a second quorum).
                first = i == self.ids[0] and i not in self._formatted
                dynamic = {"standalone": True} if first else {"no_initial_controllers": True}
            self._formatted.add(i)
            format_storage(cfg, self.cluster_id, ignore_formatted=True, **dynamic)

    def create(self) -> "LocalCluster":
        self.write_configs()
        self.format()
        return self

    # --- processes ------------------------------------------------------------------------
    def command(self, node_id: int) -> list[str]:
        # -P (3.11+): do not put the working directory on sys.path either.
        isolate = ["-P"] if sys.version_info >= (3, 11) else []
        return [sys.executable, *isolate, "-m", "kraft", "server", "start", self.config_path(node_id),
                "--log-level", self.log_level]

    def environment(self) -> dict:
        path = os.pathsep.join(filter(None, [SOURCE_ROOT, os.environ.get("PYTHONPATH")]))
        return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=path)

    def start(self, node_id: int | None = None) -> None:
        workdir = os.path.join(self.directory, "run")  # empty: nothing in it can shadow kraft
        os.makedirs(workdir, exist_ok=True)
        for i in ([node_id] if node_id is not None else self.ids):
            if i in self.procs and self.procs[i].poll() is None:
                continue
            old = self._logs.pop(i, None)
            if old is not None:
                old.close()
            log = open(self.log_path(i), "ab")
            self._logs[i] = log
            self._expected_exit.discard(i)
            self.procs[i] = subprocess.Popen(
                self.command(i), stdout=log, stderr=subprocess.STDOUT, env=self.environment(), cwd=workdir,
                start_new_session=True, preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)

    def unexpected_exits(self) -> dict[int, int]:
        """Nodes that exited without kill()/stop(): node id -> exit code."""
        return {i: p.returncode for i, p in self.procs.items()
                if i not in self._expected_exit and p.poll() is not None}

    def log_tail(self, node_id: int, lines: int = 15) -> list[str]:
        try:
            with open(self.log_path(node_id), "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 64 * 1024))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]

    def running(self) -> list[int]:
        return [i for i, p in self.procs.items() if p.poll() is None]

    def kill(self, node_id: int) -> None:
        """SIGKILL: no shutdown, no flush (unflushed page cache survives, the process doesn't)."""
        p = self.procs.get(node_id)
        self._expected_exit.add(node_id)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def signal_all(self, sig: int, timeout: float = 60.0) -> None:
        """``sig`` to every running node at once, then wait for them all: SIGTERM is an
        operator stopping a whole cluster, SIGKILL a power loss (the page cache survives). A
        paused node is continued first so that it sees the signal."""
        procs = [p for p in self.procs.values() if p.poll() is None]
        self._expected_exit.update(self.procs)
        for p in procs:
            os.kill(p.pid, signal.SIGCONT)
            p.send_signal(sig)
        for p in procs:
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop(self, node_id: int | None = None, timeout: float = 10.0) -> dict[int, int]:
        """SIGTERM and wait: a clean shutdown. Returns exit codes. Stopping everything stops
        broker-only nodes first, so their controlled shutdown still finds a controller."""
        if node_id is not None:
            return self._stop_all([node_id], timeout)
        codes = self._stop_all([i for i in self.procs if i not in self.ports], timeout)
        codes.update(self._stop_all([i for i in self.procs if i in self.ports], timeout))
        return codes

    def _stop_all(self, ids, timeout: float) -> dict[int, int]:
        self._expected_exit.update(ids)
        for i in ids:
            p = self.procs.get(i)
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = {}
        for i in ids:
            p = self.procs.get(i)
            if p is None:
                continue
            try:
                codes[i] = p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                codes[i] = p.wait()
        return codes

    def directory_id(self, node_id: int) -> str:
        """The ``directory.id`` of a node's metadata log directory (its replica key half)."""
        from kraft.log.state_files import META_PROPERTIES_FILE, MetaProperties

        return MetaProperties.read(os.path.join(self.data_dir(node_id), META_PROPERTIES_FILE)).directory_id

    def wipe(self, node_id: int) -> None:
        """Delete a stopped node's data and format it again (a replaced disk)."""
        shutil.rmtree(self.data_dir(node_id), ignore_errors=True)
        self.format(node_id)

    def close(self) -> None:
        self.stop()
        for f in self._logs.values():
            f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def wait_for(predicate, timeout: float, interval: float = 0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = predicate()
        if v:
            return v
        time.sleep(interval)
    return predicate()
