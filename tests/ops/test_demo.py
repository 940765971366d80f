"""``kraft demo`` from an operator's shell: it must not depend on the working directory, and a
node that dies must be reported at once with its log."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap

import pytest
from ops_helpers import SOURCE_ROOT

from kraft.cli.demo import NodeDied, watch
from kraft.client.quorum import QuorumClient
from kraft.cli.local_cluster import LocalCluster

#: ``python -m kraft ARGS`` as an editable install runs it: the package comes from a meta-path
#: finder placed after the path finder (setuptools' editable finder, which also serves direct
#: submodules), and the working directory is first on sys.path.
EDITABLE_RUN = textwrap.dedent("""
    import importlib.util, os, runpy, sys
    from importlib.machinery import PathFinder
    pkg = os.path.join(sys.argv[1], "kraft")

    class EditableFinder:
        @classmethod
        def find_spec(cls, name, path=None, target=None):
            if name == "kraft":
                return importlib.util.spec_from_file_location(
                    "kraft", os.path.join(pkg, "__init__.py"), submodule_search_locations=[pkg])
            if name.rpartition(".")[0] == "kraft":
                return PathFinder.find_spec(name, path=[pkg])
            return None

    # this machine's own editable install (of another tree) must not answer instead
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
    sys.meta_path.append(EditableFinder)
    sys.path.insert(0, "")
    sys.argv = ["kraft", *sys.argv[2:]]
    runpy.run_module("kraft", run_name="__main__", alter_sys=True)
""")


def _run_like_an_editable_install(cwd, *args, timeout=240):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", EDITABLE_RUN, SOURCE_ROOT, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def beside_the_clone(tmp_path):
    """A directory holding the clone (a folder named kraft, no __init__.py at its top)."""
    (tmp_path / "kraft").mkdir()
    (tmp_path / "kraft" / "README.md").write_text("the clone\n")
    return tmp_path


def test_python_m_kraft_works_from_the_directory_that_holds_the_clone(beside_the_clone):
    """Before: the folder became a namespace package ``kraft`` and ``python -m kraft`` died with
    "module 'kraft' has no attribute '__version__'"."""
    p = _run_like_an_editable_install(beside_the_clone, "--version")
    assert p.returncode == 0 and p.stdout.startswith("kraft "), p.stderr


@pytest.mark.slow
def test_demo_runs_from_the_directory_that_holds_the_clone(beside_the_clone):
    p = _run_like_an_editable_install(beside_the_clone, "demo")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "new leader: node" in p.stdout and "exit codes {1: 0, 2: 0, 3: 0}" in p.stdout
    # the client half: a real Kafka client created, produced and read back through the brokers
    assert "created topic 'demo'" in p.stdout and "3000 records acknowledged" in p.stdout
    assert "every acknowledged record was read back, each of 10 keys in order" in p.stdout
    # through a consumer group: half read and committed leaves a lag, the rest leaves none
    tables = [block.split("\n\n")[0] for block in p.stdout.split("--describe --group kraft-demo\n")[1:]]
    assert "(group 'kraft-demo', subscribe): read half (1500 records" in p.stdout and len(tables) == 2
    # LAG "-": the group committed nothing for that partition yet (the first half may all have come
    # from one partition), so all of it is unread: its LOG-END-OFFSET, as the group reads from 0.
    lags = [[int(c[5]) if c[5] != "-" else int(c[4]) for c in (line.split() for line in t.splitlines()[1:])
             if "kraft-demo" in c] for t in tables]
    assert sum(lags[0]) == 1500 and lags[1] == [0, 0, 0], tables
    assert "Traceback" not in p.stderr and "never retrieved" not in p.stderr


def test_cluster_children_do_not_import_from_the_callers_directory(tmp_path):
    """A poisoned ``kraft`` package in the working directory must not be what nodes import."""
    c = LocalCluster(str(tmp_path / "c"), 1)
    assert c.environment()["PYTHONPATH"].split(os.pathsep)[0] == SOURCE_ROOT
    poisoned = tmp_path / "poison" / "kraft"
    poisoned.mkdir(parents=True)
    (poisoned / "__init__.py").write_text("raise ImportError('the wrong kraft')\n")
    interpreter = c.command(1)[:c.command(1).index("-m")]  # the interpreter and its flags, as nodes get them
    probe = [*interpreter, "-c", "import kraft; print(kraft.__file__)"]
    p = subprocess.run(probe, cwd=tmp_path / "poison", env=c.environment(), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout.strip().startswith(SOURCE_ROOT), p.stderr


def test_a_node_that_dies_stops_the_demo_at_once_with_its_log(tmp_path):
    """Before: the scenario waited its 30 s for a leader and said only "no leader found"."""
    c = LocalCluster(str(tmp_path / "c"), 3, log_level="WARNING").create()
    for i in c.ids:  # make every node fail at startup: unformatted storage
        os.unlink(os.path.join(c.data_dir(i), "meta.properties"))
    c.start()

    async def scenario():
        client = QuorumClient([c.address(i) for i in c.ids])
        try:
            await client.describe(deadline_s=3600)  # would wait an hour if nobody noticed
        finally:
            await client.close()
    try:
        with pytest.raises(NodeDied) as info:
            asyncio.run(watch(c, scenario()))
    finally:
        c.close()
    msg = str(info.value)
    assert "exited with code 1" in msg and any(c.log_path(i) in msg for i in c.ids)
    assert "kraft storage format" in msg  # the node's own last log line is shown


def test_killed_or_stopped_nodes_are_not_reported_as_deaths(tmp_path):
    c = LocalCluster(str(tmp_path / "c"), 3, log_level="WARNING").create()
    c.start()
    try:
        c.kill(1)
        c.stop(2)
        assert c.unexpected_exits() == {}
        c.start(1)
        assert 1 not in c.unexpected_exits()
    finally:
        c.close()
