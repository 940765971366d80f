"""What the in-server profilers share: loading a tool's ``install_from_env()`` into every
kraft server started afterwards (a generated ``sitecustomize`` on ``PYTHONPATH``, so nothing
in kraft knows about it), and a started 3-node cluster."""

from __future__ import annotations

import contextlib
import os
import tempfile


def load_in_servers(tool_file: str, name: str) -> str:
    """Servers started from now on run ``install_from_env()`` of ``tool_file`` at start-up;
    returns a fresh directory for the files they write."""
    site = tempfile.mkdtemp(prefix=f"kraft-{name}-")
    with open(os.path.join(site, "sitecustomize.py"), "w") as f:
        f.write("import importlib.util as u\n"
                f"s = u.spec_from_file_location({name!r}, {os.path.abspath(tool_file)!r})\n"
                "m = u.module_from_spec(s); s.loader.exec_module(m); m.install_from_env()\n")
    os.environ["PYTHONPATH"] = os.pathsep.join([site] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return site


@contextlib.contextmanager
def running_cluster(profile: str):
    """A started 3-node cluster (directories removed at exit): (cluster, leader id, node id -> pid)."""
    from bench.peers.kraft import KraftCluster
    from bench.peers.procs import install_cleanup

    install_cleanup()  # the cluster's directories go at exit (they grow by the MB per second)
    cluster = KraftCluster(profile)
    try:
        cluster.start()
        leader = cluster.wait_ready()
        yield cluster, leader, {i: cluster.cluster.procs[i].pid for i in cluster.ids}
    finally:
        cluster.stop()
