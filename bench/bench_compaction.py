"""Log compaction benchmark: cleaner throughput per thread, memory against the dedupe buffer,
and the event-loop stall while a cleaner compacts beside a running asyncio loop.

    python bench/bench_compaction.py [--mb 256] [--keys 200000] [--dir DIR] [--json FILE]

* throughput: a log of ``--mb`` MB of keyed batches (100 records of ~100 bytes, keys drawn
  from ``--keys``, 1 GiB segments cut at 64 MB so there are several), all dirty, cleaned once
  by ``clean_log`` on one thread; MB/s of dirty log read. Anchor, same run, same bytes in the
  page cache: the native batch scanner (``records.scan_batches``, a full CRC pass) and the
  native key scan (``scan_records`` over every batch), each alone;
* memory: peak traced allocation (tracemalloc: numpy buffers included, the page cache of the
  mapped segments not) of a pass with a 16 MB and a 64 MB dedupe buffer;
* stall: an asyncio loop ticks every 1 ms and appends to another log while a ``LogCleaner``
  thread (owner steps through ``LoopBridge`` on that loop) compacts the log; the largest
  lateness of a tick is the loop's worst stall.

Wall-clock numbers belong here, never in tests. Run with nothing else of yours running.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import threading
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kraft import records  # noqa: E402
from kraft.broker.log_compaction import LoopBridge  # noqa: E402
from kraft.log import LogConfig, SegmentedLog  # noqa: E402
from kraft.log import compact_codec  # noqa: E402
from kraft.log.cleaner import clean_log  # noqa: E402
from kraft.log.compact_codec import OffsetMap  # noqa: E402
from kraft.log.log_cleaner import CleanCandidate, CleanerConfig, CompactionPolicy, LogCleaner  # noqa: E402

MB = 1e6
PER_BATCH = 100
SEGMENT = 64 << 20


def build_log(directory: str, mb: int, keys: int, seed: int = 1) -> SegmentedLog:
    rng = random.Random(seed)
    log = SegmentedLog.open(directory, LogConfig(segment_bytes=SEGMENT, strict_order=False, background_flush=False))
    value = b"v" * 90
    batches = []
    for _ in range(64):  # a pool of distinct batches, appended round robin (the keys differ per batch)
        ks = [b"key-%09d" % rng.randrange(keys) for _ in range(PER_BATCH)]
        batches.append(records.build_batch([value] * PER_BATCH, keys=ks, timestamp=1_000))
    i = 0
    while log.size_bytes < mb * MB:
        log.append(batches[i % len(batches)], leader_epoch=1)
        i += 1
    log.roll()
    log.flush()
    return log


def anchor_scans(log) -> dict:
    segs = log.segments[:-1]
    total = sum(s.size for s in segs)
    views = [s.read(0, s.size) for s in segs]  # in memory: the anchor reads the same bytes
    began = time.perf_counter()
    for v in views:
        records.scan_batches(v)
    crc = time.perf_counter() - began
    began = time.perf_counter()
    for v in views:
        scan = records.scan_batches(v)
        for p, b in zip(scan.positions, scan.base_offsets):
            p = int(p)
            compact_codec.scan_records(memoryview(v)[p + 61:p + int.from_bytes(v[p + 8:p + 12], "big") + 12],
                                       PER_BATCH, int(b), 0)
    keyscan = time.perf_counter() - began
    return {"bytes": total, "crc_scan_mb_s": total / crc / MB, "key_scan_mb_s": total / keyscan / MB}


def throughput(directory: str, mb: int, keys: int, buffer_mb: int) -> dict:
    log = build_log(directory, mb, keys)
    try:
        anchor = anchor_scans(log)
        upper = log.segments[-1].base_offset
        offset_map = OffsetMap(buffer_mb << 20)  # a cleaner thread allocates its map once
        began = time.perf_counter()
        first, passes, read = log.start_offset, 0, 0
        while first < upper:
            stats = clean_log(log, first, upper, offset_map, now_ms=2_000,
                              delete_retention_ms=0, segment_bytes=SEGMENT)
            passes += 1
            read += stats.bytes_read if passes == 1 else 0
            if stats.end_offset <= first:
                break
            first = stats.end_offset
        seconds = time.perf_counter() - began
        return {"dedupe_buffer_mb": buffer_mb, "dirty_bytes": anchor["bytes"], "seconds": seconds, "passes": passes,
                "mb_s_per_thread": anchor["bytes"] / seconds / MB, "after_bytes": log.size_bytes,
                "anchor": anchor}
    finally:
        log.close()
        shutil.rmtree(directory)


def memory(directory: str, mb: int, keys: int, buffer_mb: int) -> dict:
    log = build_log(directory, mb, keys)
    try:
        tracemalloc.start()
        upper = log.segments[-1].base_offset
        clean_log(log, log.start_offset, upper, OffsetMap(buffer_mb << 20), now_ms=2_000, delete_retention_ms=0,
                  segment_bytes=SEGMENT)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return {"dedupe_buffer_mb": buffer_mb, "peak_traced_mb": peak / MB}
    finally:
        log.close()
        shutil.rmtree(directory)


def stall(directory: str, mb: int, keys: int) -> dict:
    log = build_log(os.path.join(directory, "t-0"), mb, keys)
    other = SegmentedLog.open(os.path.join(directory, "busy-0"), LogConfig(background_flush=False))
    batch = records.build_batch([b"x" * 100] * 10, keys=[b"k"] * 10, timestamp=1_000)

    async def main():
        loop = asyncio.get_running_loop()
        done = threading.Event()
        lates = []
        holder = {}
        bridge = LoopBridge(loop, lambda: holder["c"].stopping)
        cand = CleanCandidate(("t", 0), directory, log, log.end_offset,
                              CompactionPolicy(min_cleanable_ratio=0.0, segment_bytes=SEGMENT))
        cleaner = LogCleaner(CleanerConfig(threads=1, backoff_ms=100, dedupe_buffer_size=64 << 20),
                             lambda: [cand], run_on_owner=bridge)
        holder["c"] = cleaner
        began = time.perf_counter()
        cleaner.start()
        while cleaner.totals.passes < 1 or (cleaner.totals.last and time.perf_counter() - began < 1):
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            lates.append(time.perf_counter() - t0 - 0.001)
            other.append(batch, leader_epoch=1)
            if time.perf_counter() - began > 300:
                break
        cleaner.request_stop()
        await loop.run_in_executor(None, cleaner.stop)
        done.set()
        arr = np.array(lates) * 1000
        return {"ticks": len(arr), "max_stall_ms": float(arr.max()), "p99_stall_ms": float(np.percentile(arr, 99)),
                "p50_stall_ms": float(np.percentile(arr, 50)), "clean_seconds": cleaner.totals.seconds,
                "passes": cleaner.totals.passes}
    try:
        return asyncio.run(main())
    finally:
        log.close()
        other.close()
        shutil.rmtree(directory)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="bench-compaction-", dir=args.dir)
    out = {"benchmark": "bench_compaction", "python": sys.version.split()[0],
           "implementation": compact_codec.IMPLEMENTATION, "machine": platform.machine(), "cpus": os.cpu_count(),
           "loadavg_at_start": os.getloadavg(), "mb": args.mb, "keys": args.keys,
           "command": " ".join([os.path.basename(sys.executable), *sys.argv])}
    try:
        out["throughput"] = throughput(os.path.join(base, "tp"), args.mb, args.keys, 128)
        print("throughput", json.dumps(out["throughput"]), flush=True)
        out["throughput_small_buffer"] = throughput(os.path.join(base, "tp2"), args.mb, args.keys, 2)
        print("small buffer", json.dumps(out["throughput_small_buffer"]), flush=True)
        out["memory"] = [memory(os.path.join(base, f"m{b}"), min(args.mb, 64), args.keys, b) for b in (16, 64)]
        print("memory", json.dumps(out["memory"]), flush=True)
        out["stall"] = stall(os.path.join(base, "st"), args.mb, args.keys)
        print("stall", json.dumps(out["stall"]), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out["loadavg_at_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
