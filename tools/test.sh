#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, builds the extensions in
# place, and runs the whole suite: once with the compiled codec (the default) and the
# codec/log tests once more with KRAFT_NO_EXTENSIONS=1, then checks the built wheel in a
# fresh virtualenv. Exits non-zero on any failure. This is the README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# System tools some tests use: a cross compiler and qemu to build and run the CRC-32C C code
# for aarch64. Installed only when missing and when we may (root + apt).
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  need=()
  command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu)
  command -v qemu-aarch64-static >/dev/null 2>&1 || need+=(qemu-user-static)
  # kcat (librdkafka's CLI) for tests/broker/test_real_clients.py.
  command -v kcat >/dev/null 2>&1 || need+=(kcat)
  if [ ${#need[@]} -gt 0 ]; then
    echo "+ apt-get install ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi

# pip is silent while it compiles the six Cython extensions (in parallel, one per core).
echo "+ [$(( SECONDS / 60 ))m$(( SECONDS % 60 ))s] pip install -e .[test]   (compiles the extensions: about a minute, no output meanwhile)"
$PY -m pip install -q --disable-pip-version-check -e ".[test]"

# pytest exits 5 when it collected nothing; that is not a failure of the code under test.
run_pytest() {
  local rc=0
  "$PY" -m pytest "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then rc=0; fi
  return "$rc"
}

phase() { echo "+ [$(( SECONDS / 60 ))m$(( SECONDS % 60 ))s] $*"; }

# The native pass in two streams at once. Tests that start processes and wait on them
# (clusters, Spark, the CLI, the broker and server layers: ~0.8 of a core on average, mostly
# waiting) run in the foreground; beside them, in the background, the in-process unit tests and
# then the simulator seeds, the seeds' process pool given every core but one
# (KRAFT_SIM_WORKERS), so the background stream never takes more than one core from the
# clusters. One after the other the native pass took ~26 min; side by side the foreground sets
# the time. Every entry under tests/ lands in exactly one stream (a new directory in the
# background one).
# (tests/log, ~45 s mostly waiting on disk, runs in the background stream: with it the
# foreground stream set the whole run near the 30-minute limit while the background one ended
# 8 minutes earlier; tests/broker stays here: beside the clusters' timing tests its CPU made
# them miss their bounds)
WAITING="tests/integration tests/spark tests/cli tests/ops tests/server tests/broker"
# (if/fi, not `test && echo`: under pipefail a loop whose last test is false would end the script)
BACKGROUND=$(for t in tests/*; do
  case " $WAITING " in *" $t "*) continue ;; esac
  case "$t" in
    tests/sim) ;;  # last: the longest, and parallel by itself
    tests/*.py) if [[ "$(basename "$t")" == test_*.py ]]; then echo "$t"; fi ;;
    *) if [ -d "$t" ]; then echo "$t"; fi ;;
  esac
done | tr '\n' ' ')
BACKGROUND="$BACKGROUND tests/sim"
cores=$(nproc 2>/dev/null || echo 2)
sim_workers=$(( cores > 1 ? cores - 1 : 1 ))

phase "pytest (native extensions), in the background ($sim_workers simulator worker(s)): $BACKGROUND"
background_log=$(mktemp)
KRAFT_SIM_WORKERS=$sim_workers run_pytest -q -m "not slow" -p no:cacheprovider --durations=15 $BACKGROUND \
  > "$background_log" 2>&1 &
background_pid=$!
phase "pytest (native extensions), tests that start processes: $WAITING"
waiting_rc=0
rm -f .pytest_cache/v/cache/lastfailed
run_pytest -q -m "not slow" --durations=60 $WAITING || waiting_rc=$?
# These tests time real processes on a shared machine (two cores, the background stream beside
# them). As Apache Kafka's CI does (maxTestRetries=1 with a cap on retried failures), a run with
# at most MAX_RETRIED failed tests runs those once more; one that passes the second time is
# reported by name as FLAKY (kept visible for follow-up, never hidden), and one that fails twice
# fails the build. More failures than the cap fail at once: that is not timing.
MAX_RETRIED=${KRAFT_MAX_RETRIED_TESTS:-3}
if [ "$waiting_rc" -ne 0 ] && [ -f .pytest_cache/v/cache/lastfailed ]; then
  failed=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' .pytest_cache/v/cache/lastfailed)
  if [ "$failed" -ge 1 ] && [ "$failed" -le "$MAX_RETRIED" ]; then
    phase "retrying the $failed failed test(s) that start processes once (a pass now is reported as FLAKY)"
    "$PY" -c 'import json,sys; print("\n".join(sorted(json.load(open(sys.argv[1])))))' \
      .pytest_cache/v/cache/lastfailed > .pytest_cache/first_failures
    retry_rc=0
    run_pytest -q -m "not slow" --lf --lfnf=none $WAITING || retry_rc=$?
    if [ "$retry_rc" -eq 0 ]; then
      sed 's/^/FLAKY (failed, then passed on its retry): /' .pytest_cache/first_failures
      waiting_rc=0
    fi
  fi
fi
background_rc=0
wait "$background_pid" || background_rc=$?
phase "the background stream's output"
cat "$background_log"
rm -f "$background_log"
if [ "$waiting_rc" -ne 0 ] || [ "$background_rc" -ne 0 ]; then
  echo "FAILED: tests that start processes rc=$waiting_rc, in-process tests and simulator seeds rc=$background_rc"
  exit 1
fi

# The wheel check (sdist -> wheel in an isolated build env, a fresh virtualenv, the codec tests
# from the sdist: ~3 min, mostly compiling) runs beside the pure-Python pass, which uses one
# core and times nothing: together they take the longer of the two instead of the sum.
wheel_log=$(mktemp)
wheel_pid=
if [ -f tools/check_wheel.sh ]; then
  phase "wheel: sdist -> manylinux wheel, contents, fresh virtualenv, codec tests from the sdist (in the background)"
  bash tools/check_wheel.sh > "$wheel_log" 2>&1 &
  wheel_pid=$!
fi

phase "pytest (pure-Python codecs, KRAFT_NO_EXTENSIONS=1)"
pure_rc=0
KRAFT_NO_EXTENSIONS=1 run_pytest -q -m "not slow" tests/records tests/protocol $( [ -d tests/log ] && echo tests/log ) || pure_rc=$?

wheel_rc=0
if [ -n "$wheel_pid" ]; then
  wait "$wheel_pid" || wheel_rc=$?
  phase "wheel check output"
  cat "$wheel_log"
fi
rm -f "$wheel_log"
if [ "$pure_rc" -ne 0 ] || [ "$wheel_rc" -ne 0 ]; then
  echo "FAILED: pure-Python pass rc=$pure_rc, wheel check rc=$wheel_rc"
  exit 1
fi
phase "all tests passed"
