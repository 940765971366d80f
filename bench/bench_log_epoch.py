"""pyperf benchmark of the leader-epoch cache lookups (native and pure twin) beside their
anchor, ``bisect.bisect_right`` on a Python list of the same 1,000 start offsets.

    python bench/bench_log_epoch.py [--fast] [-o results.json]

Each benchmark times a loop of 1,024 lookups (pyperf reports the time per loop); the
master process prints each one's ratio to the anchor at the end.
"""

from __future__ import annotations

import bisect
import os
import sys

import pyperf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kraft.log import _pure_log, hotloops  # noqa: E402

ENTRIES = 1000
PAIRS = [(e * 3, e * 1000) for e in range(ENTRIES)]
STARTS = [s for _, s in PAIRS]
QUERIES = [(i * 7919) % (ENTRIES * 1000) for i in range(1024)]


def loop(fn):
    def run(loops):
        t0 = pyperf.perf_counter()
        for _ in range(loops):
            for q in QUERIES:
                fn(q)
        return pyperf.perf_counter() - t0
    return run


def main() -> None:
    runner = pyperf.Runner()
    impls = {"python": _pure_log}
    try:
        impls["native"] = hotloops.implementation("native")
    except ImportError:
        pass
    results = {"bisect anchor": runner.bench_time_func(
        "epoch lookup: bisect anchor", loop(lambda q: bisect.bisect_right(STARTS, q)))}
    for name, impl in impls.items():
        table = impl.EpochTable(PAIRS)
        results[f"{name} epoch_for_offset"] = runner.bench_time_func(
            f"epoch lookup: {name} epoch_for_offset", loop(table.epoch_for_offset))
        results[f"{name} end_offset_for"] = runner.bench_time_func(
            f"epoch lookup: {name} end_offset_for",
            loop(lambda q, t=table: t.end_offset_for(q // 1000 * 3 - 1, 10**9)))
    if all(r is not None for r in results.values()):  # the master process
        anchor = results["bisect anchor"].mean()
        print("\nper lookup (1,024 per loop), ratio to the bisect anchor:")
        for name, bench in results.items():
            print(f"  {name:28s} {bench.mean() / 1024 * 1e9:7.1f} ns  x{bench.mean() / anchor:.2f}")


if __name__ == "__main__":
    main()
