"""keep_freed_pages (kraft/server/allocator.py): after it, a process that allocates and frees
a large buffer over and over stops faulting its pages in each time; an operator's own
MALLOC_* settings are left alone. Run in fresh interpreters: the thresholds are per process."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="glibc's mallopt is what is tuned")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = r"""
import resource, sys
from kraft.server.allocator import keep_freed_pages
tuned = keep_freed_pages() if sys.argv[1] == "tune" else False
src = memoryview(b"x" * (1 << 20))
def cycle():
    b = bytearray(1 << 20)
    b[:] = src
for _ in range(3):
    cycle()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    cycle()
print(int(tuned), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _probe(mode: str, **env) -> tuple[bool, int]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    environ.update(env, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env=environ, cwd="/", capture_output=True,
                         text=True, check=True).stdout.split()
    return bool(int(out[0])), int(out[1])


def test_freed_large_buffers_are_reused_without_page_faults():
    tuned, faults = _probe("tune")
    assert tuned
    # 50 cycles of a 1 MiB buffer are 12,800 pages; kept pages are touched without a fault.
    assert faults < 500, faults
    untuned, baseline = _probe("plain")
    assert not untuned
    assert baseline > 5000, f"glibc's defaults should fault every cycle in again (saw {baseline})"


def test_an_operators_malloc_settings_win():
    tuned, _ = _probe("tune", MALLOC_TRIM_THRESHOLD_="131072")
    assert not tuned
