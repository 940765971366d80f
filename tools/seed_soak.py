"""The seed runner behind tools/raft_soak.py and tools/controller_soak.py: chunks of seeds of
one chaos function on a process pool, until the seeds or the time run out. Prints every failure
(with its one-line replay command, carried by ``ChaosFailure``) and seeds per second; the
caller exits with 1 if any seed failed."""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kraft.testing.chaos import ChaosFailure  # noqa: E402


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


def soak_main(description: str, run, profiles, what: str) -> int:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--first", type=int, default=1_000_000, help="first seed")
    ap.add_argument("--seeds", type=int, default=1_000, help="number of seeds")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0 = run all seeds)")
    ap.add_argument("--profile", default="soak", choices=sorted(profiles))
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=20)
    args = ap.parse_args()
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
