"""HW = min LEO over the ISR for many partitions at once: the vectorised form
(``leader_partition.isr_min_leo``, numpy over a [partitions, replicas] matrix) beside its
anchor, the per-partition Python rule (``min`` over the ISR members' LEOs), on the same
100,000 partitions of RF 3 with random ISRs, in the same run.

    python bench/bench_isr_hw.py [--partitions N] [--repeat R]

Prints seconds per pass for each and the ratio anchor / vectorised.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kraft.broker.leader_partition import isr_min_leo  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    leos = rng.integers(0, 1 << 40, size=(args.partitions, 3)).astype(np.int64)
    mask = rng.random((args.partitions, 3)) < 0.8
    mask[:, 0] = True
    rows, mrows = leos.tolist(), mask.tolist()

    def anchor():
        return [min(v for v, m in zip(r, mr) if m) for r, mr in zip(rows, mrows)]

    def vectorised():
        return isr_min_leo(leos, mask)

    assert vectorised().tolist() == anchor()
    best = {}
    for name, fn in (("python per partition (anchor)", anchor), ("numpy isr_min_leo", vectorised)):
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        best[name] = min(times)
        print(f"{name:32s} {best[name] * 1000:9.2f} ms per pass of {args.partitions} partitions")
    a, v = best.values()
    print(f"ratio anchor / vectorised: {a / v:.1f}x")


if __name__ == "__main__":
    main()
