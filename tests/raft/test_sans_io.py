"""kraft.raft is sans-I/O: no module in it may import asyncio, socket, threading, time, os
or random (ARCHITECTURE.md, layer table). Parsed from source, so a lazy import inside a
function is caught too."""

import ast
import pathlib

import kraft.raft

FORBIDDEN = {"asyncio", "socket", "threading", "time", "os", "random", "selectors", "subprocess"}
RAFT_DIR = pathlib.Path(kraft.raft.__file__).parent


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            names.add("__import__")
    return names


def test_raft_package_has_modules():
    assert len(list(RAFT_DIR.glob("*.py"))) >= 10


def test_no_io_imports_in_raft_core():
    offenders = {}
    for path in sorted(RAFT_DIR.glob("*.py")):
        bad = imported_modules(path) & (FORBIDDEN | {"__import__"})
        if bad:
            offenders[path.name] = sorted(bad)
    assert offenders == {}


def test_raft_imports_only_allowed_layers():
    allowed = {"kraft", "__future__", "typing", "dataclasses", "enum", "bisect", "heapq", "collections"}
    for path in sorted(RAFT_DIR.glob("*.py")):
        for name in imported_modules(path):
            assert name in allowed, f"{path.name} imports {name}"
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kraft."):
                layer = node.module.split(".")[1]
                # protocol: the core reads and writes Kafka's message objects (kraft.raft.rpcs)
                assert layer in {"raft", "records", "protocol", "errors", "types"}, f"{path.name} imports {node.module}"


def test_detector_catches_a_forbidden_import(tmp_path):
    sample = tmp_path / "bad.py"
    sample.write_text("def f():\n    import time\n    from os import path\n")
    assert {"time", "os"} <= imported_modules(sample)
