"""fsync latency profiler for the log's group commit.

Runs an append workload against a ``SegmentedLog`` in DIR, records every flush cycle
(fdatasync time, bytes and batches it covered) and every batch's append→durable latency,
then prints histograms and percentiles. ``--raw`` first profiles a plain ``os.write`` +
``fdatasync`` per batch loop on the same directory, as the anchor to compare with.

    python tools/fsync_profile.py [--dir DIR] [--seconds 5] [--records 1000] [--record-bytes 100]
                                  [--linger-ms 0] [--rate-mb 0] [--raw] [--json FILE]

It measures; it never changes the log's behaviour (only the public ``on_flush_stats`` and
``on_flushed`` callbacks are used).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kraft import records  # noqa: E402
from kraft.log import LogConfig, SegmentedLog  # noqa: E402

PERCENTILES = (50, 90, 99, 99.9)


def histogram(values, unit: str, scale: float, width: int = 40) -> list[str]:
    """Power-of-two buckets, one line each, with a bar and a count."""
    values = np.asarray(values, float) * scale
    if not len(values):
        return ["  (no samples)"]
    hi = int(math.ceil(math.log2(max(values.max(), 1)))) + 1
    edges = [0.0] + [2.0 ** k for k in range(0, hi + 1)]
    counts, _ = np.histogram(values, bins=edges)
    peak = max(counts.max(), 1)
    nonzero = np.flatnonzero(counts)
    first, last = int(nonzero[0]), int(nonzero[-1])  # trim empty buckets at both ends
    lines = []
    for left, right, c in list(zip(edges[:-1], edges[1:], counts))[first : last + 1]:
        bar = "#" * int(round(width * c / peak))
        lines.append(f"  {left:>10.0f} - {right:<10.0f} {unit:>3} |{bar:<{width}}| {c}")
    return lines


def percentiles(values, scale: float) -> dict:
    arr = np.asarray(values, float) * scale
    out = {f"p{p:g}": float(np.percentile(arr, p)) for p in PERCENTILES} if len(arr) else {}
    if len(arr):
        out["max"] = float(arr.max())
        out["mean"] = float(arr.mean())
        out["count"] = int(len(arr))
    return out


def show(title: str, values, unit: str, scale: float) -> dict:
    stats = percentiles(values, scale)
    print(f"\n{title}")
    if stats:
        print("  " + "  ".join(f"{k} {v:,.1f}" for k, v in stats.items() if k != "count")
              + f"  ({stats['count']} samples, {unit})")
    for line in histogram(values, unit, scale):
        print(line)
    return stats


def paced(began: float, i: int, size: int, rate_mb: float) -> None:
    if rate_mb > 0:
        delay = began + i * size / (rate_mb * 1e6) - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


def profile_raw(directory: str, batch: bytes, seconds: float, rate_mb: float) -> list[float]:
    path = os.path.join(directory, "raw.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    out = []
    try:
        began = time.perf_counter()
        i = 0
        while time.perf_counter() - began < seconds:
            paced(began, i, len(batch), rate_mb)
            os.write(fd, batch)
            t = time.perf_counter()
            os.fdatasync(fd)
            out.append(time.perf_counter() - t)
            i += 1
    finally:
        os.close(fd)
        os.unlink(path)
    return out


def profile_log(directory: str, batch: bytes, seconds: float, rate_mb: float, linger_ms: float):
    flushes, durable = [], []
    log = SegmentedLog.open(os.path.join(directory, "log"), LogConfig(append_linger_ms=linger_ms),
                            on_flush_stats=flushes.append,
                            on_flushed=lambda off: durable.append((time.perf_counter(), off)))
    appended = []
    buf = bytearray(batch)
    try:
        began = time.perf_counter()
        i = 0
        while time.perf_counter() - began < seconds:
            paced(began, i, len(buf), rate_mb)
            info = log.append(buf, leader_epoch=1)
            appended.append((time.perf_counter(), info.last_offset))
            i += 1
        log.wait_for_flush()
        elapsed = time.perf_counter() - began
    finally:
        log.close()
    t = np.array([x[0] for x in durable])
    o = np.array([x[1] for x in durable])
    a = np.array(appended)
    latency = t[np.searchsorted(o, a[:, 1], side="right")] - a[:, 0]
    return flushes, latency, len(appended) * len(buf) / elapsed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="directory on the disk to profile (default: a temp dir)")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--records", type=int, default=1000, help="records per batch")
    ap.add_argument("--record-bytes", type=int, default=100)
    ap.add_argument("--linger-ms", type=float, default=0.0)
    ap.add_argument("--rate-mb", type=float, default=0.0, help="pace appends at this many MB/s (0: flat out)")
    ap.add_argument("--raw", action="store_true", help="also profile a raw write+fdatasync loop first")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="kraft-fsync-", dir=args.dir)
    batch = records.build_batch([b"v" * args.record_bytes] * args.records)
    report = {"batch_bytes": len(batch), "linger_ms": args.linger_ms, "rate_mb": args.rate_mb}
    print(f"batch {args.records} x {args.record_bytes} B = {len(batch)} B, linger {args.linger_ms} ms, "
          f"rate {'flat out' if not args.rate_mb else f'{args.rate_mb} MB/s'}, {args.seconds} s in {work}")
    try:
        if args.raw:
            raw = profile_raw(work, batch, args.seconds, args.rate_mb)
            report["raw_fdatasync_us"] = show("raw os.write + fdatasync per batch: fdatasync latency",
                                              raw, "us", 1e6)
        flushes, latency, rate = profile_log(work, batch, args.seconds, args.rate_mb, args.linger_ms)
        print(f"\nSegmentedLog: {rate / 1e6:.1f} MB/s appended, {len(flushes)} flushes")
        report["append_mb_s"] = rate / 1e6
        report["flush_fdatasync_us"] = show("per-flush fdatasync latency",
                                            [f.fsync_seconds for f in flushes], "us", 1e6)
        report["flush_kib"] = show("per-flush size", [f.bytes for f in flushes], "KiB", 1 / 1024)
        report["flush_batches"] = show("per-flush batches", [f.batches for f in flushes], "n", 1)
        report["append_to_durable_us"] = show("append→durable latency per batch", latency, "us", 1e6)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
