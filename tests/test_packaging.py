"""Packaging facts checkable from the source tree (or an unpacked sdist) in well under a second.

What a release needs that no other test notices when it goes missing: a stub for every
compiled module that names what the module really exports, ``py.typed``, the SPDX license
with its LICENSE file, the four Kafka codecs as default dependencies, and a wheel/sdist split
that keeps the Cython/C sources out of the wheel and the tests in the sdist. Building and
inspecting the real wheel (manylinux tag, stripped .so files) is tools/check_wheel.sh's job.
"""

from __future__ import annotations

import ast
import importlib
import pathlib
import re
import types

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml on Python 3.10 needs tomli")

ROOT = pathlib.Path(__file__).resolve().parents[1]
NATIVE = ROOT / "kraft" / "_native"
MODULES = sorted(p.stem for p in NATIVE.glob("_*.pyx"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def _requirement_names(reqs: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].strip().lower() for r in reqs}


def test_there_are_extension_modules():
    # Guards the parametrized tests below against passing vacuously on an empty glob.
    assert len(MODULES) >= 6, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_every_extension_has_a_stub(name):
    assert (NATIVE / f"{name}.pyi").is_file(), f"kraft/_native/{name}.pyx has no {name}.pyi"


def test_py_typed_marker():
    assert (ROOT / "kraft" / "py.typed").is_file()


def _stub_names(tree: ast.Module) -> dict[str, ast.AST]:
    """Top-level names a stub declares, without its private type aliases (``X: TypeAlias``)."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if not (isinstance(node.annotation, ast.Name) and node.annotation.id == "TypeAlias"):
                out[node.target.id] = node
    return out


def _class_members(node: ast.ClassDef) -> set[str]:
    names = set()
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            names.add(item.name)
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
    return names


@pytest.mark.parametrize("name", MODULES)
def test_stub_matches_the_compiled_module(name):
    """Each stub declares exactly the module's public names, and every public method or
    attribute of its classes (a renamed or added function fails here)."""
    import kraft.records

    if kraft.records.IMPLEMENTATION != "native":
        pytest.skip("compiled extensions not loaded (KRAFT_NO_EXTENSIONS or not built)")
    module = importlib.import_module(f"kraft._native.{name}")
    runtime = {n for n, v in vars(module).items()
               if not n.startswith("__") and not isinstance(v, types.ModuleType)}
    stub = _stub_names(ast.parse((NATIVE / f"{name}.pyi").read_text()))
    assert set(stub) == runtime, (f"only in stub: {sorted(set(stub) - runtime)}, "
                                  f"only in module: {sorted(runtime - set(stub))}")
    for cls_name, node in stub.items():
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(module, cls_name)
        public = {n for n in dir(cls) if not n.startswith("_")} - set(dir(object))
        missing = public - _class_members(node)
        assert not missing, f"{name}.{cls_name}: stub lacks {sorted(missing)}"


def test_license_is_spdx_with_its_file():
    assert PROJECT["license"] == "Apache-2.0"  # a string (PEP 639), not the deprecated table
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    # The full Apache-2.0 text, not a one-line notice.
    for part in ("Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS",
                 "9. Accepting Warranty or Additional Liability", "END OF TERMS AND CONDITIONS"):
        assert part in text, part
    assert not any(c.startswith("License ::") for c in PROJECT.get("classifiers", []))


def test_every_kafka_codec_is_a_default_dependency():
    # gzip is the standard library; lz4, snappy and zstd must come with a plain install.
    deps = _requirement_names(PROJECT["dependencies"])
    assert {"lz4", "python-snappy", "zstandard"} <= deps
    # `pip install kraft[codecs]` keeps working for those who wrote it before.
    assert {"python-snappy", "zstandard"} <= _requirement_names(PROJECT["optional-dependencies"]["codecs"])


def test_wheel_data_excludes_sources_and_sdist_includes_tests():
    setuptools_cfg = PYPROJECT["tool"]["setuptools"]
    # include-package-data would put every MANIFEST.in file under kraft/ (the .pyx, .c, .h,
    # .pxd) into the wheel.
    assert setuptools_cfg.get("include-package-data") is False
    patterns = [p for globs in setuptools_cfg.get("package-data", {}).values() for p in globs]
    assert not [p for p in patterns if p.endswith((".pyx", ".pxd", ".c", ".h"))], patterns
    assert "*.pyi" in setuptools_cfg["package-data"]["kraft._native"]
    manifest = (ROOT / "MANIFEST.in").read_text().split("\n")
    assert "graft tests" in manifest
    assert any(line.startswith("recursive-include kraft/_native") and "*.pyx" in line
               for line in manifest)
