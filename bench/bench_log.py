"""Benchmarks of the log storage layer, each measured beside its anchor in the same run.

    python bench/bench_log.py [--quick] [--repeat N] [--dir DIR] [--json FILE]

* append throughput with group commit (1,000 x 100-byte records per batch) against a raw
  ``os.write`` + ``fdatasync`` per batch loop — the two alternate, ``--repeat`` times;
* append at a paced 200 MB/s with the metadata linger (25 ms) and 5 ms: append→durable
  latency of every batch;
* single-batch append-to-durable latency against a raw ``os.write`` + ``fdatasync`` of
  the same batch (p50 ratio);
* recovery: CRC scan of a segment in the page cache and a full ``SegmentedLog.open``,
  against the ``crc32c`` package computing the CRC of the same bytes;
* epoch lookups (native and pure) against ``bisect`` on a list of the same size.

Not pyperf: pyperf runs each benchmark in its own worker processes at different times,
while disk benchmarks are only comparable when the anchor runs interleaved with them on
the same file system. Medians over repeats are reported with ratios to the anchor; run
on an idle machine. Wall-clock numbers belong here, never in tests.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kraft import records  # noqa: E402
from kraft.log import IMPLEMENTATION, LogConfig, SegmentedLog, hotloops  # noqa: E402
from kraft.log import _pure_log  # noqa: E402

RECORDS_PER_BATCH = 1000
RECORD_BYTES = 100
MB = 1e6


def make_batches(n: int) -> list[bytearray]:
    return [bytearray(records.build_batch([bytes([i % 256]) * RECORD_BYTES] * RECORDS_PER_BATCH))
            for i in range(n)]


# --- throughput ---------------------------------------------------------------------------------


def raw_loop(path: str, batches, count: int) -> float:
    """Seconds to write ``count`` batches, each followed by fdatasync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        began = time.perf_counter()
        for i in range(count):
            os.write(fd, batches[i % len(batches)])
            os.fdatasync(fd)
        return time.perf_counter() - began
    finally:
        os.close(fd)
        os.unlink(path)


def group_commit(directory: str, batches, count: int, linger_ms: float = 0.0, pace_mb_s: float | None = None):
    """Append ``count`` batches (as fast as possible, or paced) and wait until all are
    durable. Returns (seconds, append→durable latencies in ms, fsyncs)."""
    flushes = []  # (time, flushed offset), appended by the flusher thread
    log = SegmentedLog.open(directory, LogConfig(append_linger_ms=linger_ms),
                            on_flushed=lambda off: flushes.append((time.perf_counter(), off)))
    appended = np.empty((count, 2))
    size = len(batches[0])
    try:
        began = time.perf_counter()
        for i in range(count):
            if pace_mb_s:
                due = began + i * size / (pace_mb_s * MB)
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            info = log.append(batches[i % len(batches)], leader_epoch=1)
            appended[i] = (time.perf_counter(), info.last_offset)
        log.wait_for_flush()
        seconds = time.perf_counter() - began
    finally:
        log.close()
        shutil.rmtree(directory)
    times = np.array([t for t, _ in flushes])
    offsets = np.array([o for _, o in flushes])
    durable_at = times[np.searchsorted(offsets, appended[:, 1], side="right")]
    return seconds, (durable_at - appended[:, 0]) * 1000, len(flushes)


# --- latency ------------------------------------------------------------------------------------


def paired_latency(directory: str, batch, n: int):
    """Single-batch append→durable latency, one raw sample and one log sample in turn
    (so both see the same disk weather). Returns (raw, log via callback, log via wait)."""
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, "raw.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    reported = {}
    log = SegmentedLog.open(os.path.join(directory, "log"), LogConfig(append_linger_ms=0),
                            on_flushed=lambda off: reported.setdefault(off, time.perf_counter()))
    raw, via_callback, via_wait = [], [], []
    try:
        for _ in range(n):
            began = time.perf_counter()
            os.write(fd, batch)
            os.fdatasync(fd)
            raw.append(time.perf_counter() - began)
            began = time.perf_counter()
            info = log.append(batch, leader_epoch=1)
            log.wait_for_flush(info.last_offset + 1)
            via_wait.append(time.perf_counter() - began)
            via_callback.append(reported[info.last_offset + 1] - began)
    finally:
        log.close()
        os.close(fd)
        shutil.rmtree(directory)
    return raw, via_callback, via_wait


# --- recovery scan ------------------------------------------------------------------------------


def scan_bench(directory: str, batches, total_bytes: int, repeat: int):
    log = SegmentedLog.open(directory, LogConfig(segment_bytes=(1 << 31) - 1, background_flush=False))
    while log.size_bytes < total_bytes:
        log.append(batches[0], leader_epoch=1)
    seg = log.segments[-1]
    log.close()
    import crc32c

    path, size = seg.path, seg.size
    scan_s, open_s, crc_s = [], [], []
    for _ in range(repeat):
        with open(path, "rb") as f:  # the anchor: CRC of the same bytes, read the same way
            import mmap

            with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
                began = time.perf_counter()
                crc32c.crc32c(mm)
                crc_s.append(time.perf_counter() - began)
        seg_again = type(seg).open(directory, seg.base_offset, 4096)
        try:
            began = time.perf_counter()
            result = seg_again.scan()
            scan_s.append(time.perf_counter() - began)
            assert result.error is None and result.valid_end == size
        finally:
            seg_again.close()
        began = time.perf_counter()
        SegmentedLog.open(directory, LogConfig(background_flush=False)).close()
        open_s.append(time.perf_counter() - began)
    shutil.rmtree(directory)
    return size, scan_s, open_s, crc_s


# --- epoch lookups ------------------------------------------------------------------------------


def epoch_bench(entries: int = 1000, calls: int = 200_000):
    pairs = [(e * 3, e * 1000) for e in range(entries)]
    starts = [s for _, s in pairs]
    queries = [(i * 7919) % (entries * 1000) for i in range(1024)]
    results = {}

    def per_call(fn):
        best = float("inf")
        for _ in range(5):
            began = time.perf_counter()
            for i in range(calls):
                fn(queries[i & 1023])
            best = min(best, (time.perf_counter() - began) / calls)
        return best * 1e9

    results["bisect anchor"] = per_call(lambda q: bisect.bisect_right(starts, q))
    impls = {"python": _pure_log}
    try:
        impls["native"] = hotloops.implementation("native")
    except ImportError:
        pass
    for name, impl in impls.items():
        table = impl.EpochTable(pairs)
        results[f"{name} epoch_for_offset"] = per_call(table.epoch_for_offset)
        results[f"{name} end_offset_for"] = per_call(lambda q, t=table: t.end_offset_for(q // 1000 * 3 - 1, 10**9))
    return results


# --- main ---------------------------------------------------------------------------------------


def pct(values, p):
    return float(np.percentile(np.asarray(values), p))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs (a smoke test, noisy)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None, help="directory on the disk to measure (default: a temp dir)")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    base = tempfile.mkdtemp(prefix="kraft-bench-", dir=args.dir)
    total_mb = 64 if args.quick else 256
    batches = make_batches(16)
    size = len(batches[0])
    count = int(total_mb * MB / size)
    out = {"implementation": IMPLEMENTATION, "batch_bytes": size, "records_per_batch": RECORDS_PER_BATCH}
    print(f"kraft.log ({IMPLEMENTATION}); batch = {RECORDS_PER_BATCH} x {RECORD_BYTES} B records = {size} B;"
          f" {count} batches ({count * size / MB:.0f} MB) per run; dir {base}")

    # 1. throughput, alternating with the anchor
    raw_s, gc_s, gc_lat, gc_fsyncs = [], [], [], []
    for r in range(args.repeat):
        raw_s.append(raw_loop(os.path.join(base, "raw"), batches, count))
        secs, lat, fsyncs = group_commit(os.path.join(base, f"gc{r}"), batches, count)
        gc_s.append(secs)
        gc_lat.extend(lat)
        gc_fsyncs.append(fsyncs)
    raw_mb = count * size / MB / statistics.median(raw_s)
    gc_mb = count * size / MB / statistics.median(gc_s)
    out["throughput"] = {"raw_write_fdatasync_mb_s": raw_mb, "group_commit_mb_s": gc_mb,
                         "group_commit_records_s": gc_mb * MB / size * RECORDS_PER_BATCH,
                         "ratio": gc_mb / raw_mb, "fsyncs_per_run": statistics.median(gc_fsyncs),
                         "durable_latency_ms_p50": pct(gc_lat, 50), "durable_latency_ms_max": max(gc_lat)}
    print(f"\nappend throughput, linger 0 (median of {args.repeat}):")
    print(f"  raw os.write+fdatasync per batch  {raw_mb:8.1f} MB/s  (anchor)")
    print(f"  SegmentedLog group commit         {gc_mb:8.1f} MB/s  {gc_mb * MB / size * RECORDS_PER_BATCH:,.0f} records/s"
          f"  x{gc_mb / raw_mb:.2f} anchor  ({statistics.median(gc_fsyncs):.0f} fsyncs/run)")

    # 2. paced appends: every batch durable within the linger?
    out["paced"] = {}
    print("\npaced at 200 MB/s, append→durable latency per batch:")
    for linger in (5.0, 25.0):
        lat_all, achieved = [], []
        for r in range(max(1, args.repeat // 2)):
            n = count // 2
            secs, lat, _ = group_commit(os.path.join(base, f"p{r}"), batches, n, linger, pace_mb_s=200)
            lat_all.extend(lat)
            achieved.append(n * size / MB / secs)
        within = float(np.mean(np.asarray(lat_all) <= linger))
        row = {"achieved_mb_s": statistics.median(achieved), "p50_ms": pct(lat_all, 50),
               "p99_ms": pct(lat_all, 99), "max_ms": max(lat_all), "within_linger": within}
        out["paced"][f"linger_{linger:g}ms"] = row
        print(f"  linger {linger:4.0f} ms: {row['achieved_mb_s']:.0f} MB/s  p50 {row['p50_ms']:.1f} ms"
              f"  p99 {row['p99_ms']:.1f} ms  max {row['max_ms']:.1f} ms  {within:.1%} within the linger")

    # 3. single-batch latency, raw and log samples alternating
    n = 200 if args.quick else 1000
    raw_l, cb_l, wait_l = paired_latency(os.path.join(base, "lat"), batches[0], n)
    out["latency"] = {"raw_p50_us": pct(raw_l, 50) * 1e6, "raw_p99_us": pct(raw_l, 99) * 1e6,
                      "callback_p50_us": pct(cb_l, 50) * 1e6, "callback_p99_us": pct(cb_l, 99) * 1e6,
                      "wait_p50_us": pct(wait_l, 50) * 1e6, "wait_p99_us": pct(wait_l, 99) * 1e6,
                      "callback_p50_ratio": pct(cb_l, 50) / pct(raw_l, 50),
                      "wait_p50_ratio": pct(wait_l, 50) / pct(raw_l, 50)}
    lt = out["latency"]
    print(f"\nsingle-batch append→durable ({n} samples each, alternating):")
    print(f"  raw os.write+fdatasync            p50 {lt['raw_p50_us']:7.0f} us  p99 {lt['raw_p99_us']:7.0f} us  (anchor)")
    print(f"  SegmentedLog → on_flushed         p50 {lt['callback_p50_us']:7.0f} us  p99 {lt['callback_p99_us']:7.0f} us"
          f"  p50 x{lt['callback_p50_ratio']:.2f} anchor")
    print(f"  SegmentedLog → wait_for_flush     p50 {lt['wait_p50_us']:7.0f} us  p99 {lt['wait_p99_us']:7.0f} us"
          f"  p50 x{lt['wait_p50_ratio']:.2f} anchor")

    # 4. recovery scan
    size_b, scan_s, open_s, crc_s = scan_bench(os.path.join(base, "scan"), batches, int(total_mb * MB), args.repeat)
    out["recovery"] = {"segment_bytes": size_b, "scan_gb_s": size_b / statistics.median(scan_s) / 1e9,
                       "open_gb_s": size_b / statistics.median(open_s) / 1e9,
                       "crc32c_package_gb_s": size_b / statistics.median(crc_s) / 1e9}
    rc = out["recovery"]
    print(f"\nrecovery of a {size_b / MB:.0f} MB segment in the page cache (median of {args.repeat}):")
    print(f"  crc32c package over the mmap     {rc['crc32c_package_gb_s']:6.2f} GB/s  (anchor)")
    print(f"  LogSegment.scan (CRC scan)       {rc['scan_gb_s']:6.2f} GB/s  x{rc['scan_gb_s'] / rc['crc32c_package_gb_s']:.2f} anchor")
    print(f"  SegmentedLog.open (full)         {rc['open_gb_s']:6.2f} GB/s  x{rc['open_gb_s'] / rc['crc32c_package_gb_s']:.2f} anchor")

    # 5. epoch lookups
    ep = epoch_bench(calls=50_000 if args.quick else 200_000)
    out["epoch_lookup_ns"] = ep
    print("\nepoch cache lookups, 1000 epochs (ns per call incl. the Python call):")
    for name, ns in ep.items():
        print(f"  {name:28s} {ns:6.0f} ns  x{ns / ep['bisect anchor']:.2f} anchor")

    shutil.rmtree(base, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
