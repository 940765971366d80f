"""One kraft broker against a real client: produce and fetch throughput beside a raw-file anchor.

The broker runs as its own process (``python -m kraft.server.broker_node``). A confluent-kafka
(librdkafka) producer sends ``--records`` records of 100 bytes (batch.size 16 KB, lz4,
acks=1, linger.ms 5) to one partition; then a consumer reads them all from the beginning
(``consume`` in batches), then our own ``kraft.client.consumer.Consumer`` (native decode into
columns), a raw Fetch loop and kcat. The anchor, in the same run: the same number of payload bytes
written raw to a file in 16 KB writes with one fsync at the end, then read back raw
(page cache, as the broker's fetch is). Reports MB/s (payload bytes), records/s, and the
ratio to the anchor. With ``--profile`` py-spy samples the broker during produce; the time
per Produce request is the broker's CPU time (from /proc, all threads) / requests (the count
comes from librdkafka's statistics), split by the share of py-spy samples in each part of
the request path (shares only: under load py-spy counts runnable-but-waiting threads).

    python bench/bench_broker.py [--records 2000000] [--profile]

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TOPIC = "bench"
RECORD = 100


def start_broker(workdir: str):
    port_file = os.path.join(workdir, "port")
    proc = subprocess.Popen([sys.executable, "-m", "kraft.server.broker_node", "--log-dir",
                             os.path.join(workdir, "logs"), "--topic", f"{TOPIC}:1", "--port-file", port_file],
                            env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(workdir, "broker.log"), "w"))
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"broker did not start: see {workdir}/broker.log")
        time.sleep(0.05)
    with open(port_file) as f:
        return proc, f"127.0.0.1:{int(f.read())}"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (all threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, n: int):
    from confluent_kafka import Producer
    stats = {}

    def on_stats(text):
        data = json.loads(text)
        for b in data.get("brokers", {}).values():
            if b.get("nodeid", -1) >= 0:
                stats["produce_requests"] = b.get("req", {}).get("Produce", 0)
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "batch.size": 16384, "acks": 1,
                  "linger.ms": 5, "enable.idempotence": False, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 1 << 20, "statistics.interval.ms": 100, "stats_cb": on_stats})
    value = os.urandom(RECORD // 2).hex().encode()
    p.list_topics(TOPIC, timeout=10)
    chunk = [{"value": value}] * 10_000  # produce_batch: the Python loop is not what is measured
    began = time.perf_counter()
    left = n
    while left:
        part = chunk if left >= len(chunk) else chunk[:left]
        try:
            queued = p.produce_batch(TOPIC, part, partition=0)
        except BufferError:
            queued = 0
        left -= queued
        if queued < len(part):
            p.poll(0.005)
    p.flush(120)
    elapsed = time.perf_counter() - began
    time.sleep(0.3)
    p.poll(0.2)  # last statistics
    return elapsed, stats.get("produce_requests", 0)


#: librdkafka consumer settings for reading a backlog fast (printed with the figure). By
#: default it stops fetching at 100,000 queued messages and then backs off for
#: fetch.queue.backoff.ms (1 s); the partition leader must be known before ``assign`` or the
#: first ListOffsets waits 500 ms ("no current leader for partition"), hence list_topics.
CONSUMER_TUNING = {"fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8 << 20,
                   "queued.min.messages": 5_000_000, "queued.max.messages.kbytes": 2_097_151,
                   "fetch.queue.backoff.ms": 1, "enable.partition.eof": False}


def consume(bootstrap: str, n: int):
    """confluent-kafka Consumer, ``consume()`` in batches of 100,000 Message objects."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  **CONSUMER_TUNING})
    got, began = 0, time.perf_counter()
    c.list_topics(TOPIC, timeout=10)
    c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    first = None
    while got < n:
        msgs = c.consume(100_000, 5.0)
        if not msgs:
            break
        if first is None:
            first = time.perf_counter() - began
        got += len(msgs)
    elapsed = time.perf_counter() - began
    c.close()
    return elapsed, got, first or 0.0


def kraft_consume(bootstrap: str, n: int):
    """kraft.client.consumer.Consumer: every record decoded into columns by the native codec.
    Returns (seconds, records, key+value bytes, client CPU seconds)."""
    import asyncio
    sys.path.insert(0, ROOT)
    from kraft.client.consumer import Consumer

    async def go():
        async with Consumer(bootstrap, max_bytes=64 << 20, partition_max_bytes=8 << 20) as c:
            await c.assign([(TOPIC, 0)])
            began, cpu = time.perf_counter(), time.process_time()
            await c.seek_to_beginning()
            got = nbytes = 0
            while got < n:
                parts = await c.poll(timeout_ms=5000)
                if not parts:
                    break
                for part in parts:
                    got += len(part)
                    nbytes += part.nbytes
            return time.perf_counter() - began, got, nbytes, time.process_time() - cpu
    return asyncio.run(go())


def kcat_produce(bootstrap: str, n: int, workdir: str):
    """The same records from kcat (librdkafka in C, no Python in the client)."""
    path = os.path.join(workdir, "records.txt")
    line = os.urandom(RECORD // 2).hex()[: RECORD - 1] + "\n"
    with open(path, "w") as f:
        f.write(line * n)
    began = time.perf_counter()
    subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", TOPIC, "-p", "0", "-z", "lz4", "-X", "batch.size=16384",
                    "-X", "acks=1", "-X", "linger.ms=5", "-X", "queue.buffering.max.kbytes=1048576",
                    "-l", path], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


def kcat_consume(bootstrap: str, start: int) -> float:
    began = time.perf_counter()
    subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", TOPIC, "-p", "0", "-o", str(start), "-e", "-q",
                    "-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=8388608"],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


def raw_fetch(bootstrap: str, upto: int) -> tuple[float, int]:
    """Fetch v12 requests in a loop from offset 0 (8 MB per partition, our client; records
    are counted by their batch headers, not decoded): the broker's fetch path without a
    client that turns every record into an object."""
    import asyncio
    import struct
    sys.path.insert(0, ROOT)
    from kraft.client.node_client import NodeClient
    from kraft.protocol import FetchRequest as F

    async def go():
        host, port = bootstrap.split(":")
        client = NodeClient(host, int(port), request_timeout_ms=30000)
        offset, nbytes = 0, 0
        began = time.perf_counter()
        while offset < upto:
            req = F(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=64 << 20, isolation_level=0,
                    session_id=0, session_epoch=-1, forgotten_topics_data=[], topics=[F.Topic(topic=TOPIC, partitions=[
                        F.Topic.Partition(partition=0, fetch_offset=offset, partition_max_bytes=8 << 20)])])
            resp = await client.request(req, 12)
            data = resp.responses[0].partitions[0].records
            pos, n = 0, len(data)
            while pos + 61 <= n:  # walk batch headers to the next offset
                base, length = struct.unpack_from(">qi", data, pos)
                if pos + 12 + length > n:
                    break
                last = base + struct.unpack_from(">i", data, pos + 23)[0]
                pos += 12 + length
            nbytes += n
            offset = last + 1
        elapsed = time.perf_counter() - began
        await client.close()
        return elapsed, nbytes
    return asyncio.run(go())


def raw_anchor(workdir: str, total: int):
    chunk = os.urandom(16384)
    path = os.path.join(workdir, "raw.bin")
    began = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = 0
    while written < total:
        written += os.write(fd, chunk)
    os.fsync(fd)
    os.close(fd)
    write_s = time.perf_counter() - began
    began = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    while os.read(fd, 1 << 20):
        pass
    os.close(fd)
    read_s = time.perf_counter() - began
    return write_s, read_s


def profile_produce(pid: int, seconds_file: str):
    """Start py-spy on the broker; returns the process (stop it with SIGINT)."""
    if shutil.which("py-spy") is None:
        return None
    return subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "250",
                             "--output", seconds_file, "--nonblocking", "--threads"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


#: (label, frame that marks it) for the produce-phase profile; a sample counts in every
#: category whose frame is on its stack.
PROFILE_CATEGORIES = [
    ("request read (socket, StreamReader)", "StreamReader.read"),
    ("request decode", "decode_request (kraft/protocol/framing.py"),
    ("produce handler", "ProduceHandler.handle"),
    ("  log append (pwrite, index)", "SegmentedLog.append"),
    ("  batch checks", "inspect_batches"),
    ("response encode", "encode_response (kraft/protocol/framing.py"),
    ("response write (socket)", "_SelectorSocketTransport.write"),
    ("flusher threads (fdatasync)", "fdatasync (kraft/log/files.py"),
]


def profile_shares(raw_path: str):
    """Share of the broker's non-idle py-spy samples in each category, and the samples. Shares,
    not sample seconds: on a loaded machine py-spy counts a thread waiting for a CPU as busy,
    so only the proportions are trusted; the bench scales them by the broker's measured CPU."""
    counts, busy = collections.Counter(), 0
    with open(raw_path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            if stack.endswith(("EpollSelector.select (selectors.py:454)", "Condition.wait (threading.py:320)")) \
                    or "select (selectors.py" in stack.rsplit(";", 1)[-1]:
                continue
            n = int(count)
            busy += n
            for label, frame in PROFILE_CATEGORIES:
                if frame in stack:
                    counts[label] += n
    return {label: counts[label] / busy for label, _ in PROFILE_CATEGORIES} if busy else {}, busy


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    total = args.records * RECORD
    workdir = tempfile.mkdtemp(prefix="bench-broker-")
    proc, bootstrap = start_broker(workdir)
    spy = None
    try:
        raw_path = os.path.join(workdir, "produce.raw")
        if args.profile:
            spy = profile_produce(proc.pid, raw_path)
            time.sleep(1.0)
        cpu0 = cpu_seconds(proc.pid)
        p_s, requests = produce(bootstrap, args.records)
        cpu1 = cpu_seconds(proc.pid)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        cpu2 = cpu_seconds(proc.pid)
        c_s, got, c_first = consume(bootstrap, args.records)
        cpu3 = cpu_seconds(proc.pid)
        k_s, k_got, k_bytes, k_cpu = kraft_consume(bootstrap, args.records)
        cpu_k = cpu_seconds(proc.pid)
        rf_s, rf_bytes = raw_fetch(bootstrap, args.records)
        cpu_rf = cpu_seconds(proc.pid)
        kp_s = kc_s = None
        cpu4 = cpu5 = cpu_rf
        if shutil.which("kcat"):
            kp_s = kcat_produce(bootstrap, args.records, workdir)
            cpu4 = cpu_seconds(proc.pid)
            kc_s = kcat_consume(bootstrap, args.records)
            cpu5 = cpu_seconds(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    w_s, r_s = raw_anchor(workdir, total)
    mb = total / 1e6
    print(f"records: {args.records} x {RECORD} B = {mb:.0f} MB payload (lz4, batch 16 KB, acks=1)")
    print("producers:")
    print(f"  confluent-kafka : {mb / p_s:8.1f} MB/s  {args.records / p_s:12,.0f} records/s  ({p_s:.2f} s, "
          f"{requests} Produce requests; broker CPU {cpu1 - cpu0:.2f} s)  produce/anchor = {w_s / p_s:.3f}")
    if kp_s is not None:
        print(f"  kcat -P         : {mb / kp_s:8.1f} MB/s  {args.records / kp_s:12,.0f} records/s  (broker CPU "
              f"{cpu4 - cpu_rf:.2f} s)  produce/anchor = {w_s / kp_s:.3f}")
    print(f"  anchor          : {mb / w_s:8.1f} MB/s raw write in 16 KB writes + one fsync")
    print("consumers, every record from the start (MB/s of record payload):")
    print(f"  kraft Consumer  : {mb / k_s:8.1f} MB/s  {k_got / k_s:12,.0f} records/s  ({k_s:.2f} s, {k_got} records "
          f"decoded to numpy columns, {k_bytes / 1e6:.0f} MB keys+values; client CPU {k_cpu:.2f} s, broker CPU "
          f"{cpu_k - cpu3:.2f} s)  fetch/anchor = {r_s / k_s:.3f}")
    print(f"  confluent-kafka : {mb / c_s:8.1f} MB/s  {got / c_s:12,.0f} records/s  ({c_s:.2f} s, consume() of "
          f"100,000 Messages; first after {c_first:.2f} s, {mb / max(c_s - c_first, 1e-9):.1f} MB/s after it; "
          f"broker CPU {cpu3 - cpu2:.2f} s)  fetch/anchor = {r_s / c_s:.3f}")
    print(f"      tuned with {CONSUMER_TUNING} and list_topics() before assign()")
    if kc_s is not None:
        print(f"  kcat -C -e      : {mb / kc_s:8.1f} MB/s  {args.records / kc_s:12,.0f} records/s  (kcat's own "
              f"{args.records} records, output to /dev/null; broker CPU {cpu5 - cpu4:.2f} s)  fetch/anchor = "
              f"{r_s / kc_s:.3f}")
    print(f"  raw Fetch v12   : {rf_bytes / 1e6 / rf_s:8.1f} MB/s of batches, not decoded (NodeClient; "
          f"{rf_bytes / 1e6:.0f} MB in {rf_s:.2f} s; broker CPU {cpu_rf - cpu_k:.2f} s)  fetch/anchor = "
          f"{(rf_bytes / total) * r_s / rf_s:.3f}")
    print(f"  anchor          : {mb / r_s:8.1f} MB/s raw read of a file (page cache, 1 MB reads)")
    print(f"broker CPU per payload MB: produce {(cpu1 - cpu0) / mb * 1e3:.2f} ms, fetch (kraft Consumer) "
          f"{(cpu_k - cpu3) / mb * 1e3:.2f} ms (one core could take {mb / max(cpu1 - cpu0, 1e-9):.0f} MB/s in, "
          f"{mb / max(cpu_k - cpu3, 1e-9):.0f} MB/s out)")
    if spy is not None and os.path.exists(raw_path) and requests:
        shares, samples = profile_shares(raw_path)
        per_request = (cpu1 - cpu0) / requests * 1e6
        print(f"profile (py-spy, broker process, produce phase, {samples} busy samples): broker CPU "
              f"{per_request:.1f} us per Produce request (all threads, user + system), of which:")
        for label, share in shares.items():
            print(f"  {label:38s} {share * 100:5.1f} %  {share * per_request:7.1f} us per request")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
