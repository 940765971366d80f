"""The command line every simulator shares: ``--seed S [--count N] [--profile P]`` runs seeds
S..S+N-1, prints one line per seed (``seed S: ok`` and the result's fields), and for a failure
the replay command and the traceback. Exit status 1 if any seed failed."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import traceback


def seed_main(argv, *, prog: str, doc: str, profiles, default: str, run, failure=Exception) -> int:
    """``run(seed, profile)`` returns a dataclass of figures or raises ``failure``."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=1, help="run seeds seed..seed+count-1")
    ap.add_argument("--profile", choices=sorted(profiles), default=default)
    args = ap.parse_args(argv)
    failures = 0
    for seed in range(args.seed, args.seed + args.count):
        try:
            r = run(seed, args.profile)
        except failure as exc:
            failures += 1
            print(exc, file=sys.stderr)
            traceback.print_exception(exc.__cause__, file=sys.stderr)
            continue
        fields = " ".join(f"{k}={v}" for k, v in dataclasses.asdict(r).items() if k != "seed")
        print(f"seed {seed}: ok {fields}")
    return 1 if failures else 0
