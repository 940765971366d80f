"""The native codec under a few hundred thousand random and mutated inputs, in child
processes: a segfault or an abort kills the child, not the test run, and shows up as a
non-zero exit code. The worker is _fuzz_worker.py; seeds are fixed so failures reproduce
(set KRAFT_FUZZ_SEED to explore others, KRAFT_FUZZ_COUNT to change the volume)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import kraft

pytestmark = pytest.mark.usefixtures("native")  # skipped under KRAFT_NO_EXTENSIONS

WORKER = Path(__file__).resolve().parent / "_fuzz_worker.py"
SEED = int(os.environ.get("KRAFT_FUZZ_SEED", "20240601"))
COUNT = int(os.environ.get("KRAFT_FUZZ_COUNT", "100000"))  # per process, two processes


def _env():
    env = dict(os.environ)
    # the child imports the very kraft this test run imported (source tree or installed wheel)
    env["PYTHONPATH"] = str(Path(kraft.__file__).resolve().parents[1])
    return env


def _describe(proc_returncode: int) -> str:
    if proc_returncode < 0:
        return f"killed by {signal.Signals(-proc_returncode).name}"
    return f"exit code {proc_returncode}"


def test_native_survives_random_and_mutated_inputs():
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(SEED + i), str(COUNT)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(), cwd=WORKER.parent) for i in range(2)]
    for i, proc in enumerate(procs):
        try:
            out, err = proc.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"fuzz worker (seed {SEED + i}) hung\n{err[-3000:]}")
        assert proc.returncode == 0, (
            f"fuzz worker (seed {SEED + i}): {_describe(proc.returncode)}\n{err[-3000:]}")
        assert out.strip() == f"ok {COUNT}"


def test_native_survives_lengths_that_overflow_int32():
    proc = subprocess.run([sys.executable, str(WORKER), str(SEED), "5000", "--window"],
                          capture_output=True, text=True, env=_env(), cwd=WORKER.parent, timeout=300)
    assert proc.returncode == 0, f"{_describe(proc.returncode)}\n{proc.stderr[-3000:]}"


CRASH_SCRIPT = r"""
import struct, sys
import kraft.records
from kraft.errors import CorruptRecordError
native = kraft.records.implementation("native")
good = native.build_batch([b"x" * 10], timestamp=5)
for length in (2**31 - 1, 2**31 - 12):
    bad = bytearray(good)
    struct.pack_into(">i", bad, 8, length)
    bad = bytes(bad)
    step = sys.argv[1]
    if step == "reader":
        try:
            native.RecordBatch(bad).validate()
            sys.exit("RecordBatch accepted a batch longer than the buffer")
        except CorruptRecordError:
            pass
    elif step == "iter":
        assert list(native.iter_batches(bad)) == []
    elif step == "scan":
        assert native.scan_batches(bad).error == "partial"
    elif step == "assign":
        try:
            native.assign_offsets(bytearray(bad), 0, 0)
            sys.exit("assign_offsets accepted a batch longer than the buffer")
        except CorruptRecordError:
            pass
print("ok")
"""


# Regression (fixed in a9e37c0): for Length in [2**31-12, 2**31-1] `length + 12` overflowed
# int32, the bound checks passed and RecordBatch/iter_batches/scan_batches/assign_offsets read
# ~2 GiB past the buffer (SIGSEGV).
@pytest.mark.parametrize("step", ["reader", "iter", "scan", "assign"])
def test_length_near_int32_max_is_corrupt(step):
    proc = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, step], capture_output=True,
                          text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, f"{_describe(proc.returncode)}: {proc.stderr[-2000:]}"
    assert proc.stdout.strip() == "ok"
