"""Which code a node's CPU runs, from ``perf record`` samples grouped by shared object: the
kernel (sockets, wake-ups, fsync), the Python interpreter, kraft's compiled hot path
(``kraft/_native``), the event loop (uvloop), CPython's own C modules and other libraries.
Issue 36 moves the steady state out of the interpreter; this split is how a profile shows
whether it moved, and what is next (``tools/write_cpu_profile.py --split``).

    perf record -F 2000 -p PID -o node.data -- sleep 8
    python tools/cpu_split.py node.data [more.data ...]
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

CLASSES = ("kernel", "python interpreter", "kraft native", "event loop (uvloop)", "CPython C modules",
           "other libraries")
_NATIVE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kraft", "_native")
_LINE = re.compile(r"^\s*([0-9.]+)%\s+(.+?)\s*$")


def native_names(directory: str = _NATIVE_DIR) -> frozenset:
    """The module names of kraft's compiled extensions (``_wire``, ``_crc``, ...)."""
    return frozenset(os.path.basename(p).split(".", 1)[0] for p in glob.glob(os.path.join(directory, "_*.so")))


def classify(dso: str, natives: frozenset) -> str:
    """The class of one shared object as ``perf report --sort dso`` names it."""
    name = os.path.basename(dso.strip())
    if name.startswith("[kernel") or name in ("[vdso]", "[vsyscall]") or name.startswith("[k"):
        return "kernel"
    if name.startswith("libpython") or re.fullmatch(r"python3?(\.\d+)?", name):
        return "python interpreter"
    module = name.split(".", 1)[0]
    if ".cpython-" in name:
        if module in natives:
            return "kraft native"
        if module == "loop":  # uvloop's loop.cpython-*.so
            return "event loop (uvloop)"
        return "CPython C modules"
    return "other libraries"


def parse_report(text: str) -> dict:
    """``perf report --stdio --sort dso`` output -> {dso: percent of samples}."""
    out: dict = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m:
            out[m.group(2)] = out.get(m.group(2), 0.0) + float(m.group(1))
    return out


def shares(by_dso: dict, natives: frozenset | None = None) -> dict:
    """{class: share of the samples, 0-1} for every class in ``CLASSES``."""
    natives = native_names() if natives is None else natives
    total = sum(by_dso.values()) or 1.0
    out = dict.fromkeys(CLASSES, 0.0)
    for dso, pct in by_dso.items():
        out[classify(dso, natives)] += pct / total
    return out


def split(perf_data: str) -> dict:
    """The class shares of one ``perf record`` file (runs ``perf report``)."""
    text = subprocess.run(["perf", "report", "-i", perf_data, "--stdio", "--sort", "dso", "--no-children", "-g", "none"],
                          capture_output=True, text=True, check=True).stdout
    return shares(parse_report(text))


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for path in argv:
        try:
            got = split(path)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"{path}: cannot read it with perf report: {exc}", file=sys.stderr)
            return 1
        print(f"{path}: " + ", ".join(f"{k} {v * 100:.1f}%" for k, v in got.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
