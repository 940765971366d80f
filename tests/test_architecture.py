"""The layer rules of ARCHITECTURE.md, checked from the import graph of every module.

Each package may import only the kraft packages its row allows, and none of the standard
modules its row forbids (the Raft core is sans-I/O, the codec and protocol layers do no
asyncio or sockets, ...). Imports are read with ``ast`` (and, for Cython files, with a
regex over ``import``/``cimport`` lines), so the check sees what the code says, not what
happened to be imported at run time.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "kraft"
BASE = {"kraft", "kraft.errors", "kraft.config", "kraft.types"}  # importable by every layer

#: package -> (kraft packages it may import besides itself and BASE, stdlib modules it must not import)
RULES = {
    "_native": (set(), {"asyncio", "socket", "threading"}),
    "records": ({"_native"}, {"asyncio", "socket", "selectors", "threading"}),
    "protocol": ({"records", "_native"}, {"asyncio", "socket", "selectors"}),
    "log": ({"records", "_native"}, {"asyncio", "socket", "selectors"}),
    "raft": ({"records", "protocol"}, {"asyncio", "socket", "selectors", "threading", "time", "os", "random"}),
    "metadata": ({"records", "protocol", "types", "_native"}, {"asyncio", "socket", "selectors"}),
    "controller": ({"raft", "records", "protocol", "metadata", "types"},
                   {"asyncio", "socket", "selectors", "threading", "time", "random"}),
    # sans-I/O like the controller (ARCHITECTURE: time comes in as now_ms, ids are injected)
    "coordinator": ({"records", "protocol", "metadata", "types"},
                    {"asyncio", "socket", "selectors", "threading", "time", "random", "uuid"}),
    "broker": ({"log", "records", "protocol", "raft", "metadata", "types", "_native"}, {"socket", "selectors"}),
    "testing": ({"raft", "log", "records", "controller", "broker", "metadata", "protocol", "coordinator"},
                {"asyncio", "socket", "selectors", "time"}),
    "client": ({"protocol", "records"}, set()),
    "server": ({"raft", "log", "records", "protocol", "testing", "client", "metadata", "controller", "broker",
                "coordinator"},
               set()),
    "spark": ({"log", "records", "metadata", "types"}, {"asyncio", "socket", "selectors"}),
    # cli reads __consumer_offsets records offline (dump-log --offsets-decoder) as it reads
    # metadata records, so it may import the coordinator's record schemas (sans-I/O, no cycle)
    "cli": ({"server", "client", "log", "protocol", "records", "raft", "metadata", "spark", "controller", "broker",
             "coordinator"},
            set()),
}


def _imports_py(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names if node.module == "kraft")
    return names


def _imports_pyx(path: pathlib.Path) -> set[str]:
    names = set()
    for m in re.finditer(r"^\s*(?:from\s+([\w.]+)\s+c?import|c?import\s+([\w.]+))", path.read_text(), re.M):
        names.add(m.group(1) or m.group(2))
    return names


def _modules():
    for path in sorted(ROOT.rglob("*")):
        if path.suffix in (".py", ".pyx", ".pxd") and "__pycache__" not in path.parts:
            rel = path.relative_to(ROOT)
            if len(rel.parts) > 1:
                yield rel.parts[0], path


@pytest.mark.parametrize("package,path", list(_modules()), ids=lambda v: str(v).split("kraft/")[-1])
def test_module_respects_its_layer(package, path):
    allowed, forbidden_std = RULES.get(package, (None, set()))
    if allowed is None:
        pytest.fail(f"package kraft/{package} has no row in the layer table (add it to RULES and ARCHITECTURE)")
    imports = _imports_pyx(path) if path.suffix in (".pyx", ".pxd") else _imports_py(path)
    for name in imports:
        top = name.split(".")[0]
        if top in forbidden_std:
            pytest.fail(f"{path.relative_to(ROOT.parent)} imports {name}, forbidden in kraft/{package}")
        if top != "kraft" or name in BASE:
            continue
        target = name.split(".")[1]
        if package == "_native" and target == "_native":
            continue  # cimports between the native modules
        if target in ("errors", "config", "types"):
            continue
        if target != package and target not in allowed:
            pytest.fail(f"{path.relative_to(ROOT.parent)} imports {name}: kraft/{package} may import only "
                        f"{sorted(allowed | {'errors', 'config'})}")


def test_the_rules_can_fail(tmp_path):
    """A guard for the guard: a raft module importing asyncio is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("import asyncio\nfrom kraft.server import node\n")
    imports = _imports_py(bad)
    assert "asyncio" in imports and "kraft.server" in imports
    assert "asyncio" in RULES["raft"][1] and "server" not in RULES["raft"][0]
