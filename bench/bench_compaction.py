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
  lateness of a tick is the loop's worst stall;
* live stall (``--live MB``): a real node compacting ``MB`` MB of a compact topic produced by
  confluent-kafka, probed by ApiVersions round trips (one in flight), idle and compacting.

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
import socket
import struct
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
    # a pool of batches appended round robin: 4,096 x 100 records cover most of ``keys`` (200,000)
    for _ in range(4096):
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


def _api_versions_rtt(sock, correlation: int) -> float:
    """One ApiVersions v0 round trip (hand-encoded: header v1, empty body), in seconds."""
    client = b"stall-probe"
    body = struct.pack(">hhih", 18, 0, correlation, len(client)) + client
    began = time.perf_counter()
    sock.sendall(struct.pack(">i", len(body)) + body)
    need = struct.unpack(">i", _recv(sock, 4))[0]
    _recv(sock, need)
    return time.perf_counter() - began


def _recv(sock, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def live_stall(directory: str, mb: int) -> dict:
    """A real node (one combined node, LocalCluster): ApiVersions round trips from this process,
    one at a time, while idle and while its cleaner compacts ``mb`` MB of a compact topic; the
    largest round trip bounds the node's event-loop stall from above (plus the round trip)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    from kraft.cli.local_cluster import LocalCluster, wait_for
    c = LocalCluster(directory, 1, combined=True, overrides={
        "controller.quorum.append.linger.ms": "0", "log.cleaner.backoff.ms": "500"}).create()
    c.start()
    try:
        port = c.broker_ports[1]
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        def serving():
            try:
                return len(admin.list_topics(timeout=5).brokers) == 1
            except Exception:  # not serving yet
                return False
        assert wait_for(serving, 90, 0.3)
        # produced as a delete topic, made compact while probed: the probe then covers the compaction
        admin.create_topics([NewTopic("cmp", 1, 1, config={"cleanup.policy": "delete", "segment.bytes": str(16 << 20),
                                                            "min.cleanable.dirty.ratio": "0.01"})])["cmp"].result(30)
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def probe(seconds: float) -> list:
            rtts, end, k = [], time.monotonic() + seconds, 0
            while time.monotonic() < end:
                k += 1
                rtts.append(_api_versions_rtt(sock, k))
                time.sleep(0.0005)
            return rtts
        idle = probe(2.0)
        p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 20, "batch.size": 1 << 20,
                      "queue.buffering.max.messages": 2_000_000})
        value, n = b"v" * 90, int(mb * MB / 110)
        for i in range(n):
            while True:
                try:
                    p.produce("cmp", value, b"key-%07d" % (i % 200_000))
                    break
                except BufferError:
                    p.poll(0.01)
        p.flush(120)
        log_path = c.log_path(1)
        before = open(log_path, "rb").read().count(b"cleaned cmp-0")
        resource = ConfigResource(ConfigResource.Type.TOPIC, "cmp")
        resource.add_incremental_config(ConfigEntry("cleanup.policy", "compact",
                                                    incremental_operation=AlterConfigOpType.SET))
        admin.incremental_alter_configs([resource])[resource].result(30)
        compacting = probe(15.0)
        after = open(log_path, "rb").read().count(b"cleaned cmp-0")
        sock.close()
        ms = lambda xs: {"n": len(xs), "max_ms": max(xs) * 1000, "p99_ms": float(np.percentile(xs, 99)) * 1000,
                         "p50_ms": float(np.percentile(xs, 50)) * 1000}
        return {"produced_mb": n * 110 / MB, "passes_during_probe": after - before, "idle": ms(idle),
                "compacting": ms(compacting),
                "segments_after": sorted(n for n in os.listdir(os.path.join(c.partition_dir(1), "cmp-0"))
                                         if n.endswith(".log"))}
    finally:
        c.stop()
        c.close()


def report(path: str) -> str:
    """A markdown table of a results file (docs/compaction.md quotes it; never retyped)."""
    with open(path) as f:
        r = json.load(f)
    tp, small, st = r["throughput"], r["throughput_small_buffer"], r["stall"]
    rows = [
        ("run", f"{r['command']} ({r['implementation']}, Python {r['python']}, {r['cpus']} CPUs, "
                f"load {r['loadavg_at_start'][0]:.1f} -> {r['loadavg_at_end'][0]:.1f})"),
        ("cleaner, 128 MiB map", f"{tp['mb_s_per_thread']:.0f} MB/s of dirty log per thread "
                                 f"({tp['dirty_bytes'] / MB:.0f} MB -> {tp['after_bytes'] / MB:.1f} MB, {tp['passes']} pass)"),
        ("anchor: native batch scan (CRC) / key scan of the same bytes",
         f"{tp['anchor']['crc_scan_mb_s']:.0f} / {tp['anchor']['key_scan_mb_s']:.0f} MB/s"),
        ("cleaner, 2 MiB map (keys do not fit)", f"{small['mb_s_per_thread']:.1f} MB/s over {small['passes']} passes"),
        *((f"peak traced memory, {m['dedupe_buffer_mb']} MiB map", f"{m['peak_traced_mb']:.0f} MB") for m in r["memory"]),
        ("loop beside a cleaner thread: stall max / p99", f"{st['max_stall_ms']:.1f} / {st['p99_stall_ms']:.1f} ms"),
    ]
    if "live_stall" in r:
        lv = r["live_stall"]
        rows.append(("live node, ApiVersions RTT max / p99: idle", f"{lv['idle']['max_ms']:.1f} / {lv['idle']['p99_ms']:.1f} ms"))
        rows.append((f"live node, while compacting {lv['produced_mb']:.0f} MB",
                     f"{lv['compacting']['max_ms']:.1f} / {lv['compacting']['p99_ms']:.1f} ms"))
    return "| measurement | result |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--live", type=int, default=0, help="MB to compact on a real node while probing it (0: skip)")
    ap.add_argument("--report", default=None, help="print the table of a results file and exit")
    args = ap.parse_args()
    if args.report:
        print(report(args.report), end="")
        return
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
        if args.live:
            out["live_stall"] = live_stall(os.path.join(base, "live"), args.live)
            print("live stall", json.dumps(out["live_stall"]), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    out["loadavg_at_end"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
