"""The docs (issue 37 item 6): the README stays short and keeps the two set-up commands, every
link it has resolves, the generated pages regenerate without a diff, and the site builds with
warnings as errors (a broken link or a page left out of the nav fails)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _readme() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def test_the_readme_is_short_and_keeps_the_two_set_up_commands():
    text = _readme()
    assert len(text.splitlines()) <= 200
    blocks = re.findall(r"```\n(.*?)```", text, re.S)
    assert "pip install -e . && kraft demo\n" in blocks  # the main job on an embedded default
    assert "bash tools/test.sh\n" in blocks              # the tests


def test_every_link_of_the_readme_resolves():
    for target in re.findall(r"\]\(([^)#]+)\)", _readme()):
        if "://" not in target:
            assert os.path.exists(os.path.join(ROOT, target)), target


@pytest.mark.parametrize("tool", ["gen_compat_docs.py", "gen_config_docs.py", "gen_bench_docs.py"])
def test_generated_pages_regenerate_without_a_diff(tool):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", tool), "--check"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is in the test extra")
    mkdocs = shutil.which("mkdocs")
    cmd = [mkdocs] if mkdocs else [sys.executable, "-m", "mkdocs"]
    p = subprocess.run([*cmd, "build", "--strict", "-q", "-d", str(tmp_path / "site")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "site" / "compatibility" / "index.html").exists()


def test_every_benchmark_is_on_the_benchmarks_page():
    with open(os.path.join(ROOT, "docs", "benchmarks.md"), encoding="utf-8") as f:
        page = f.read()
    bench = os.path.join(ROOT, "bench")
    missing = [n for n in sorted(os.listdir(bench))
               if n.startswith("bench_") and n.endswith(".py") and f"bench/{n}" not in page]
    assert not missing, missing
