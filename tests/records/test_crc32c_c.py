"""The plain-C CRC-32C (kraft/_native/crc32c.c) on its own, without Python: compiled with
warnings as errors and run natively, cross-compiled for aarch64, and run under QEMU when an
emulator is installed. The driver (c/crc32c_driver.c) compares the dispatched and portable
paths with a bitwise reference over many lengths and every alignment 0..15.

Also: the layout constants the native modules use (_layout.pxd) equal format.py's.
"""

import platform
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import kraft._native
from kraft.records import format as fmt

# The C sources of the kraft being tested: beside the imported package for an in-place
# build; for an installed wheel (which ships no sources), the source tree or unpacked sdist
# these tests belong to.
_IMPORTED = Path(kraft._native.__path__[0])
NATIVE = (_IMPORTED if (_IMPORTED / "crc32c.c").exists()
          else Path(__file__).resolve().parents[2] / "kraft" / "_native")
DRIVER = Path(__file__).resolve().parent / "c" / "crc32c_driver.c"
WARNINGS = ["-Wall", "-Wextra", "-Werror", "-std=c11", "-D_GNU_SOURCE"]

needs_sources = pytest.mark.skipif(
    not (NATIVE / "crc32c.c").exists(), reason=f"no crc32c.c in {NATIVE}")


def _aarch64_hwcap_crc32() -> bool:
    """HWCAP_CRC32 from this process's auxiliary vector: what crc32c.c's getauxval(AT_HWCAP)
    sees. Not /proc/cpuinfo, which under qemu-user describes the host's CPU, not the guest's."""
    raw = Path("/proc/self/auxv").read_bytes()
    for key, value in struct.iter_unpack("<QQ", raw[: len(raw) // 16 * 16]):
        if key == 16:  # AT_HWCAP
            return bool(value & (1 << 7))  # HWCAP_CRC32
    return False


def _compile(compiler: str, out: Path, *flags: str) -> None:
    cmd = [compiler, *WARNINGS, *flags, f"-I{NATIVE}", str(DRIVER), str(NATIVE / "crc32c.c"),
           "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"


def _run(cmd: list, expect_impl: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"impl={expect_impl}" in proc.stdout, proc.stdout
    assert proc.stdout.strip().endswith("ok")


@needs_sources
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) installed")
@pytest.mark.parametrize("opt", ["-O0", "-O3"])
def test_c_crc_native_build_and_run(tmp_path, opt):
    exe = tmp_path / "crc32c_driver"
    _compile("cc", exe, opt, "-fno-strict-aliasing")
    machine = platform.machine()
    if machine in ("x86_64", "AMD64"):
        expected = "sse4.2" if "sse4_2" in Path("/proc/cpuinfo").read_text() else "portable"
    elif machine in ("aarch64", "arm64"):
        expected = "armv8-crc" if _aarch64_hwcap_crc32() else "portable"
    else:
        expected = "portable"
    _run([str(exe)] + (["--expect-hw"] if expected != "portable" else []), expected)


AARCH64_CC = "aarch64-linux-gnu-gcc"
QEMU = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")


@pytest.fixture(scope="module")
def aarch64_binary(tmp_path_factory):
    if shutil.which(AARCH64_CC) is None:
        pytest.skip(f"{AARCH64_CC} (cross compiler) is not installed")
    if not (NATIVE / "crc32c.c").exists():
        pytest.skip(f"no crc32c.c in {NATIVE}")
    exe = tmp_path_factory.mktemp("aarch64") / "crc32c_driver"
    # Static, so that QEMU user mode needs no aarch64 sysroot.
    _compile(AARCH64_CC, exe, "-O2", "-static")
    return exe


def test_c_crc_compiles_for_aarch64(aarch64_binary):
    head = aarch64_binary.read_bytes()[:20]
    assert head[:4] == b"\x7fELF"
    assert int.from_bytes(head[18:20], "little") == 183  # e_machine EM_AARCH64


@pytest.mark.skipif(QEMU is None, reason="qemu-aarch64(-static) is not installed")
def test_c_crc_runs_on_aarch64_with_hardware_crc(aarch64_binary):
    # -cpu max has the ARMv8 CRC extension, so the dispatcher must pick it.
    _run([QEMU, "-cpu", "max", str(aarch64_binary), "--expect-hw"], "armv8-crc")


# --- layout constants ----------------------------------------------------------------------

# _layout.pxd name -> format.py name
PXD_TO_FORMAT = {
    "OFF_BASE_OFFSET": "BASE_OFFSET", "OFF_LENGTH": "LENGTH", "OFF_EPOCH": "PARTITION_LEADER_EPOCH",
    "OFF_MAGIC": "MAGIC", "OFF_CRC": "CRC", "OFF_ATTRIBUTES": "ATTRIBUTES",
    "OFF_LAST_OFFSET_DELTA": "LAST_OFFSET_DELTA", "OFF_BASE_TIMESTAMP": "BASE_TIMESTAMP",
    "OFF_MAX_TIMESTAMP": "MAX_TIMESTAMP", "OFF_PRODUCER_ID": "PRODUCER_ID",
    "OFF_PRODUCER_EPOCH": "PRODUCER_EPOCH", "OFF_BASE_SEQUENCE": "BASE_SEQUENCE",
    "OFF_RECORDS_COUNT": "RECORDS_COUNT", "HEADER_SIZE": "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD": "LOG_OVERHEAD", "MIN_LENGTH": "MIN_LENGTH", "MIN_RECORD_SIZE": "MIN_RECORD_SIZE",
    "ATTR_COMPRESSION": "COMPRESSION_MASK", "ATTR_TIMESTAMP_TYPE": "TIMESTAMP_TYPE_MASK",
    "ATTR_TRANSACTIONAL": "TRANSACTIONAL_MASK", "ATTR_CONTROL": "CONTROL_MASK",
    "ATTR_DELETE_HORIZON": "DELETE_HORIZON_MASK",
}

# REFERENCE.md section 1 (DefaultRecordBatch.java), written out independently.
SPEC = {
    "BASE_OFFSET": 0, "LENGTH": 8, "PARTITION_LEADER_EPOCH": 12, "MAGIC": 16, "CRC": 17,
    "ATTRIBUTES": 21, "LAST_OFFSET_DELTA": 23, "BASE_TIMESTAMP": 27, "MAX_TIMESTAMP": 35,
    "PRODUCER_ID": 43, "PRODUCER_EPOCH": 51, "BASE_SEQUENCE": 53, "RECORDS_COUNT": 57,
    "RECORDS": 61, "BATCH_HEADER_SIZE": 61, "LOG_OVERHEAD": 12, "MIN_LENGTH": 49,
    "CRC_START": 21, "MAGIC_V2": 2, "COMPRESSION_MASK": 0x07, "TIMESTAMP_TYPE_MASK": 0x08,
    "TRANSACTIONAL_MASK": 0x10, "CONTROL_MASK": 0x20, "DELETE_HORIZON_MASK": 0x40,
}


def _pxd_constants() -> dict:
    text = (NATIVE / "_layout.pxd").read_text()
    return {name: int(value, 0) for name, value in
            re.findall(r"^\s+([A-Z_0-9]+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*$", text, re.M)}


@needs_sources
def test_layout_pxd_constants_equal_format_py():
    pxd = _pxd_constants()
    assert set(pxd) == set(PXD_TO_FORMAT), "a _layout.pxd constant has no format.py counterpart"
    for pxd_name, py_name in PXD_TO_FORMAT.items():
        assert pxd[pxd_name] == getattr(fmt, py_name), pxd_name


def test_format_py_matches_the_spec():
    for name, value in SPEC.items():
        assert getattr(fmt, name) == value, name
    assert [int(c) for c in fmt.Compression] == [0, 1, 2, 3, 4]
    assert [int(c) for c in fmt.ControlType] == [0, 1, 2, 3, 4, 5, 6]
    assert fmt.TimestampType.LOG_APPEND_TIME == 1
