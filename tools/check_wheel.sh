#!/usr/bin/env bash
# Build kraft's wheel, install it into a fresh venv and run the codec tests against it.
#
#   tools/check_wheel.sh            # exit status 0 only if the build, install and tests pass
#
# Why: an in-place build can pass tests that an installed wheel fails (a missing
# package-data file, an extension not built into the wheel, an import that only works
# from the source tree). So the tests run from a copy of tests/ outside the source tree,
# with the venv's python, and must import kraft from the venv's site-packages.
#
# Environment: PYTHON (interpreter to build with and to base the venv on, default python3),
# KEEP=1 keeps the temporary directory, NO_ISOLATION=1 builds with the current
# environment's setuptools/Cython/numpy instead of an isolated build env (offline hosts),
# PYTEST_ARGS extra arguments for pytest (default -q).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/kraft-wheel.XXXXXX")"
if [[ "${KEEP:-0}" == 1 ]]; then
    echo "check_wheel: keeping $WORK"
else
    trap 'rm -rf "$WORK"' EXIT
fi

step() { printf '\n== %s\n' "$*"; }

step "build the wheel ($("$PYTHON" --version))"
build_args=(--wheel --outdir "$WORK/dist")
[[ "${NO_ISOLATION:-0}" == 1 ]] && build_args+=(--no-isolation)
"$PYTHON" -m build "${build_args[@]}" "$ROOT"
shopt -s nullglob
wheels=("$WORK"/dist/kraft-*.whl)
if (( ${#wheels[@]} != 1 )); then
    echo "check_wheel: expected one wheel, found: ${wheels[*]:-none}" >&2
    exit 1
fi
WHEEL="${wheels[0]}"
echo "built $(basename "$WHEEL")"
"$PYTHON" - "$WHEEL" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
ext = [n for n in names if n.startswith("kraft/_native/") and n.endswith((".so", ".pyd"))]
missing = [n for n in ("kraft/_native/crc32c.c", "kraft/_native/crc32c.h", "kraft/_native/_layout.pxd")
           if n not in names]
print(f"{len(ext)} compiled extension modules in the wheel")
if not ext or missing:
    sys.exit(f"check_wheel: wheel lacks extensions ({len(ext)}) or files {missing}")
EOF

step "fresh venv with the wheel and the test dependencies"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install --quiet --upgrade pip
# [codecs] adds python-snappy and zstandard so that every codec is exercised.
"$VPY" -m pip install --quiet "${WHEEL}[codecs]" pytest hypothesis kafka-python aiokafka

step "tests/records from a copy outside the source tree"
mkdir -p "$WORK/run"
cp -r "$ROOT/tests" "$WORK/run/tests"
find "$WORK/run/tests" -name __pycache__ -prune -exec rm -rf {} +
cat > "$WORK/run/pytest.ini" <<'EOF'
[pytest]
addopts = -ra -p no:cacheprovider
markers =
    slow: long-running
    integration: starts real kraft processes
EOF
cd "$WORK/run"
unset KRAFT_NO_EXTENSIONS PYTHONPATH
"$VPY" - "$WORK/venv" <<'EOF'
import sys
from pathlib import Path
import kraft, kraft.records
where = Path(kraft.__file__).resolve()
print(f"kraft imported from {where}; codec {kraft.records.IMPLEMENTATION}, "
      f"crc32c {kraft.records.crc32c_implementation()}")
if Path(sys.argv[1]).resolve() not in where.parents:
    sys.exit("check_wheel: kraft was not imported from the venv")
if kraft.records.IMPLEMENTATION != "native":
    sys.exit(f"check_wheel: native codec did not load: {kraft.records.NATIVE_IMPORT_ERROR!r}")
EOF
# shellcheck disable=SC2086
"$VPY" -m pytest tests/records ${PYTEST_ARGS:--q}
step "check_wheel: OK ($(basename "$WHEEL"))"
