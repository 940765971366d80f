"""Soak the simulator: many seeds x long runs of one mode of ``kraft.testing.chaos`` (the "soak"
profiles: 120 simulated seconds of faults for Raft, 60 for the controller and replication
modes), in chunks on a process pool, until the seeds or the time run out. Separate from CI
(which runs the "ci" seeds in tests/sim/test_chaos.py, test_controller_chaos.py and
test_replication_chaos.py).

    python tools/seed_soak.py --mode raft --seeds 10000 --first 100000 --jobs 2
    python tools/seed_soak.py --mode controller --minutes 30          # new seeds until time is up
    python tools/seed_soak.py --mode replication --minutes 30 --profile ci

Prints every failure with its one-line replay command, and seeds per second at the end;
exits 1 if any seed failed."""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kraft.testing.chaos import MODES, RUNS, ChaosFailure, workload_class  # noqa: E402


def run_range(args) -> tuple[int, list[str]]:
    """Seeds ``first .. first+count-1`` of ``run(seed, profile)`` (a module-level function, so
    it crosses the process pool by reference)."""
    first, count, profile, run = args
    failures = []
    for seed in range(first, first + count):
        try:
            run(seed, profile)
        except ChaosFailure as exc:
            failures.append(str(exc))
    return count, failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=sorted(MODES), default="raft")
    ap.add_argument("--first", type=int, default=1_000_000, help="first seed")
    ap.add_argument("--seeds", type=int, default=1_000, help="number of seeds")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0 = run all seeds)")
    ap.add_argument("--profile", default="soak", help="a profile of the mode (quick, ci, soak, ...)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=20)
    args = ap.parse_args()
    profiles, run, what = workload_class(args.mode).PROFILES, RUNS[args.mode], args.mode
    if args.profile not in profiles:
        ap.error(f"--profile: {args.mode} has {', '.join(sorted(profiles))}")
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    total = args.seeds if not deadline else 10**9
    chunks = ((s, min(args.chunk, args.first + total - s), args.profile, run)
              for s in range(args.first, args.first + total, args.chunk))
    done, failures, started = 0, [], time.monotonic()

    def collect(fut) -> None:
        nonlocal done
        count, fails = fut.result()
        done += count
        failures.extend(fails)
        for f in fails:
            print(f, flush=True)

    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        pending = set()
        for chunk in chunks:
            if deadline and time.monotonic() > deadline:
                break
            pending.add(pool.submit(run_range, chunk))
            if len(pending) >= args.jobs * 2:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    collect(fut)
        for fut in pending:
            collect(fut)
    elapsed = time.monotonic() - started
    print(f"{done} {what} seeds ({args.profile}), {len(failures)} failed, {elapsed:.0f} s, "
          f"{done / elapsed:.2f} seeds/s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
