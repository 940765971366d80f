"""HW = min LEO over the ISR for many partitions at once, every form in the same run on the
same 100,000 partitions of RF 3 with random ISRs:

  * anchor: the per-partition Python rule (``min`` over the ISR members' LEOs);
  * numpy: ``np.where(mask, leos, max).min(axis=1)``, the form the kernel replaced;
  * pure: ``kraft.broker._pure_hw.isr_min_leo``, the twin used without extensions;
  * native: ``kraft._native._hw.isr_min_leo`` (Cython, loop without the GIL);
  * and the fused ``advance_hw`` (min + never-backwards + only the moved rows), native and
    pure, with a current HW that lets about 10% of the partitions move.

    python bench/bench_isr_hw.py [--partitions N] [--repeat R] [--json PATH]

Prints best seconds per pass, ratios to native, the load average and the interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kraft.broker import hw_kernel  # noqa: E402

I64_MAX = np.iinfo(np.int64).max


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="write the figures here as well")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    leos = rng.integers(0, 1 << 40, size=(args.partitions, 3)).astype(np.int64)
    mask = rng.random((args.partitions, 3)) < 0.8
    mask[:, 0] = True
    rows, mrows = leos.tolist(), mask.tolist()
    native, pure = hw_kernel.implementation("native"), hw_kernel.implementation("python")
    mins = native.isr_min_leo(leos, mask)
    # ~10% of the rows have a HW below their ISR min (they move), the rest are already there.
    hws = np.where(rng.random(args.partitions) < 0.1, mins - 1, mins)

    def anchor():
        return [min(v for v, m in zip(r, mr) if m) for r, mr in zip(rows, mrows)]

    def numpy_form():
        return np.where(mask, leos, I64_MAX).min(axis=1, initial=I64_MAX)

    forms = {
        "python per partition (anchor)": anchor,
        "numpy where+min": numpy_form,
        "pure isr_min_leo": lambda: pure.isr_min_leo(leos, mask),
        "native isr_min_leo": lambda: native.isr_min_leo(leos, mask),
        "pure advance_hw": lambda: pure.advance_hw(leos, mask, hws),
        "native advance_hw": lambda: native.advance_hw(leos, mask, hws),
    }
    want = anchor()
    assert numpy_form().tolist() == want == pure.isr_min_leo(leos, mask).tolist() == mins.tolist()
    moved = [r.tolist() for r in native.advance_hw(leos, mask, hws)]
    assert moved == [r.tolist() for r in pure.advance_hw(leos, mask, hws)] and moved[0]
    best = {}
    for name, fn in forms.items():
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        best[name] = min(times)
        print(f"{name:32s} {best[name] * 1000:9.3f} ms per pass of {args.partitions} partitions")
    nat = best["native isr_min_leo"]
    for name in ("python per partition (anchor)", "numpy where+min", "pure isr_min_leo"):
        print(f"ratio {name} / native isr_min_leo: {best[name] / nat:.1f}x")
    print(f"ratio pure / native advance_hw: {best['pure advance_hw'] / best['native advance_hw']:.1f}x "
          f"({len(moved[0])} rows moved)")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {platform.python_implementation()} "
          f"{platform.python_version()}; command: python bench/bench_isr_hw.py "
          f"--partitions {args.partitions} --repeat {args.repeat}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "isr_hw", "partitions": args.partitions, "repeat": args.repeat,
                       "seconds_best": best, "moved_rows": len(moved[0]), "loadavg": load,
                       "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())},
                      f, indent=1)


if __name__ == "__main__":
    main()
