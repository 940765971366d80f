"""tools/cpu_split.py turns ``perf report --sort dso`` into kernel / interpreter / kraft native /
event loop / CPython modules / other libraries shares: each shared object lands in its class
(kraft's extensions by the names of the files in kraft/_native), and the shares add up to 1."""

from __future__ import annotations

import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "cpu_split.py")
_spec = importlib.util.spec_from_file_location("cpu_split", _PATH)
cpu_split = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpu_split)

REPORT = """# To display the perf.data header info, please use --header/--header-only options.
#
# Total Lost Samples: 0
#
# Samples: 7K of event 'cpu-clock:pppH'
# Overhead  Shared Object
# ........  .................................................
#
    56.63%  libpython3.11.so.1.0
    34.68%  [kernel.kallsyms]
     2.91%  loop.cpython-311-x86_64-linux-gnu.so
     2.10%  libc.so.6
     1.80%  _wire.cpython-311-x86_64-linux-gnu.so
     0.40%  _scan.cpython-311-x86_64-linux-gnu.so
     0.31%  [vdso]
     0.27%  _struct.cpython-311-x86_64-linux-gnu.so
     0.12%  _multiarray_umath.cpython-311-x86_64-linux-gnu.so
     0.10%  _crc.cpython-311-x86_64-linux-gnu.so
"""
NATIVES = frozenset({"_wire", "_scan", "_crc", "_log"})


def test_each_shared_object_lands_in_its_class():
    c = cpu_split.classify
    assert c("libpython3.11.so.1.0", NATIVES) == "python interpreter"
    assert c("python3.11", NATIVES) == "python interpreter"
    assert c("[kernel.kallsyms]", NATIVES) == "kernel" and c("[vdso]", NATIVES) == "kernel"
    assert c("_wire.cpython-311-x86_64-linux-gnu.so", NATIVES) == "kraft native"
    assert c("/site-packages/uvloop/loop.cpython-311-x86_64-linux-gnu.so", NATIVES) == "event loop (uvloop)"
    assert c("_struct.cpython-311-x86_64-linux-gnu.so", NATIVES) == "CPython C modules"
    assert c("libc.so.6", NATIVES) == "other libraries"


def test_a_report_splits_into_shares_that_add_up():
    by_dso = cpu_split.parse_report(REPORT)
    assert by_dso["[kernel.kallsyms]"] == pytest.approx(34.68) and len(by_dso) == 10
    got = cpu_split.shares(by_dso, NATIVES)
    total = sum(by_dso.values())
    assert set(got) == set(cpu_split.CLASSES)
    assert sum(got.values()) == pytest.approx(1.0)
    assert got["kraft native"] == pytest.approx((1.80 + 0.40 + 0.10) / total)
    assert got["kernel"] == pytest.approx((34.68 + 0.31) / total)
    assert got["CPython C modules"] == pytest.approx((0.27 + 0.12) / total)


def test_kraft_native_names_come_from_the_extension_files(tmp_path):
    for name in ("_wire.cpython-311-x86_64-linux-gnu.so", "_crc.cpython-312-aarch64-linux-gnu.so", "codec.h"):
        (tmp_path / name).write_text("")
    assert cpu_split.native_names(str(tmp_path)) == {"_wire", "_crc"}


def test_an_empty_report_gives_zero_shares():
    assert set(cpu_split.shares({}, NATIVES).values()) == {0.0}
