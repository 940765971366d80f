"""One-process comparison of the codec candidates against the issue's targets, as Markdown.

    python bench/report_codec.py                 # default: 60 rounds
    python bench/report_codec.py --rounds 100 --strict

Every candidate of a workload is timed in the same process, interleaved: each round runs
one block of calls of every candidate, in a fresh random order, and a candidate's result
is the minimum per-call time over all rounds (the least-disturbed block; the median is
printed beside it to show the noise). Blocks are sized to ~``--block-ms``. Candidates are
checked for correct output before any timing. ``--strict`` exits 1 if a target fails.

Targets (issue, item 6): native encode >= 3x aiokafka's Cython builder (records/s); native
decode visiting all records >= 2x aiokafka's Cython reader; CRC-32C >= 0.8x the crc32c
package's throughput at 4 KiB and 1 MiB, and at 64 B a per-call time <= 1.25x the package's.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_codec_pyperf as suite  # noqa: E402


def _block(fn, loops: int) -> float:
    t0 = time.perf_counter()
    for _ in range(loops):
        fn()
    return time.perf_counter() - t0


def measure(candidates: dict, rounds: int, block_s: float, seed: int) -> dict:
    """name -> (min per-call seconds, median per-call seconds)."""
    loops = {}
    for name, fn in candidates.items():
        fn()  # warm up (imports, caches, first allocation)
        n = 1
        while (t := _block(fn, n)) < block_s / 5:
            n *= 2
        loops[name] = max(1, round(n * block_s / t))
    samples = {name: [] for name in candidates}
    order = list(candidates)
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            samples[name].append(_block(candidates[name], loops[name]) / loops[name])
    return {name: (min(s), statistics.median(s)) for name, s in samples.items()}


def fmt_time(s: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}" if unit != "ns" else f"{s / scale:.0f} ns"
    return f"{s / 1e-9:.1f} ns"


def fmt_rate(x: float, unit: str) -> str:
    if unit == "records/s":
        return f"{x / 1e6:.2f} M records/s"
    return f"{x / 1e9:.2f} GB/s"


def table(title: str, results: dict, anchor: str, per_call_units: float, unit: str,
          targets: dict) -> tuple[list, list]:
    """Markdown lines for one workload, and the (name, passed) of its targets."""
    lines = [f"### {title}", "",
             f"| candidate | per call (min) | median | throughput | vs {anchor} | target | result |",
             "|---|---:|---:|---:|---:|---|---|"]
    verdicts = []
    base = results[anchor][0]
    for name, (best, median) in sorted(results.items(), key=lambda kv: kv[1][0]):
        ratio = base / best  # throughput ratio: >1 is faster than the anchor
        target, result = "", ""
        if name in targets:
            kind, bound = targets[name]
            if kind == "throughput":
                ok = ratio >= bound
                target = f"≥ {bound:g}× throughput"
            else:  # per-call time no more than bound x the anchor's
                ok = best / base <= bound
                target = f"time ≤ {bound:g}× ({best / base:.2f}×)"
            result = "PASS" if ok else "**FAIL**"
            verdicts.append((f"{title}: {name}", ok))
        lines.append(f"| {name} | {fmt_time(best)} | {fmt_time(median)} | "
                     f"{fmt_rate(per_call_units / best, unit)} | {ratio:.2f}× | {target} | {result} |")
    return lines + [""], verdicts


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=60, help="timed blocks per candidate")
    ap.add_argument("--block-ms", type=float, default=10.0, help="target duration of one block")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-gc", action="store_true", help="disable the cyclic GC while timing")
    ap.add_argument("--strict", action="store_true", help="exit 1 if any target fails")
    args = ap.parse_args(argv)

    import kraft.records

    if os.environ.get("KRAFT_NO_EXTENSIONS") or kraft.records.IMPLEMENTATION != "native":
        print("the native codec is not loaded: nothing to compare", file=sys.stderr)
        return 2
    values = suite.make_values()
    batch = suite.encode_candidates(values)["kraft-native build_batch"]()
    suite.check_candidates(values, batch)

    if args.no_gc:
        gc.disable()
    block = args.block_ms / 1e3
    n, size = suite.N_RECORDS, suite.VALUE_SIZE
    out = [
        f"## kraft RecordBatch v2 codec: {n} records × {size} B values; CRC-32C",
        "",
        f"{cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"CRC path `{kraft.records.crc32c_implementation()}`; {args.rounds} interleaved rounds "
        f"of ~{args.block_ms:g} ms blocks, min per call (GC {'off' if args.no_gc else 'on'}).",
        "",
    ]
    verdicts = []

    enc = measure(suite.encode_candidates(values), args.rounds, block, args.seed)
    lines, v = table(f"encode {n}×{size} B", enc, suite.ENCODE_ANCHOR, n, "records/s", {
        "kraft-native build_batch": ("throughput", 3.0),
        "kraft-native RecordBatchBuilder.append": ("throughput", 3.0),
    })
    out += lines
    verdicts += v

    dec = measure(suite.decode_candidates(batch), args.rounds, block, args.seed)
    lines, v = table(f"decode {n}×{size} B (every record visited)", dec, suite.DECODE_ANCHOR, n,
                     "records/s", {
                         "kraft-native decode() arrays": ("throughput", 2.0),
                         "kraft-native values()": ("throughput", 2.0),
                         "kraft-native iterate .value": ("throughput", 2.0),
                     })
    out += lines
    verdicts += v

    for label, nbytes in suite.CRC_SIZES.items():
        res = measure(suite.crc_candidates(suite.crc_data(nbytes)), args.rounds, block, args.seed)
        target = ("time", 1.25) if nbytes == 64 else ("throughput", 0.8)
        lines, v = table(f"CRC-32C {label}", res, suite.CRC_ANCHOR, nbytes, "GB/s",
                         {"kraft-native": target})
        out += lines
        verdicts += v

    gc.enable()
    failed = [name for name, ok in verdicts if not ok]
    out.append(f"**{len(verdicts) - len(failed)}/{len(verdicts)} targets met**"
               + (": failed " + "; ".join(failed) if failed else ""))
    print("\n".join(out))
    return 1 if failed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
