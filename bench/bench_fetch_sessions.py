"""Fetch sessions (KIP-227): what an idle follower of many partitions costs its leader, with
sessions and without, in one run.

A leader broker runs as its own process with a static image of ``--partitions`` partitions
(``--topics`` topics), replicas {1, 2}, ISR {1, 2}, all empty. This process plays broker 2:
the real ``ReplicaFetcher`` state machine (Fetch v13, replica id 2) over a raw TCP connection,
its local logs a stand-in at offset 0 (nothing to fetch: every partition is idle). Rounds
alternate in blocks between a sessionless fetcher (epoch -1 every time, today's behaviour
for every pre-KIP-227 client) and a session fetcher (one full fetch, then incremental ones);
each mode's first round (the full fetch that opens the session) is left out of its figures.

Per fetch round: the leader's CPU (user + system from /proc, all threads), this client's
CPU, and the request + response bytes on the wire. Reported per mode (median over blocks)
and as the ratio sessions / sessionless. ``--max-wait-ms 0`` (the default) answers each
round at once; a real follower waits up to ``replica.fetch.wait.max.ms`` for data, which
costs the leader a second read of every partition when the wait ends (both modes alike).

    python bench/bench_fetch_sessions.py [--partitions 5000] [--rounds 40] [--blocks 5]

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from kraft.broker.replica_fetcher import ReplicaFetcher  # noqa: E402
from kraft.protocol import FetchRequest, decode_response, encode_request  # noqa: E402

VERSION = 13
FOLLOWER = 2

# The leader: a BrokerNode whose static image names broker 2 as an in-sync follower of every
# partition (broker 2 is this benchmark's client, not a process).
LEADER = r"""
import asyncio, os, signal, sys, uuid
from kraft.metadata import MetadataDelta, PartitionRecord, TopicRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.server.broker_node import BrokerNode, broker_config

async def main(log_dir, topics, per_topic, port_file):
    node = BrokerNode(broker_config(1, log_dir), cluster_id="bench")
    await node.start()
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay(node.registration_record())
    for t in range(topics):
        tid = uuid.UUID(int=t + 1)
        delta.replay(TopicRecord(name=f"idle-{t}", topic_id=tid))
        for p in range(per_topic):
            delta.replay(PartitionRecord(partition_id=p, topic_id=tid, replicas=[1, 2], isr=[1, 2],
                                         removing_replicas=[], adding_replicas=[], leader=1, leader_epoch=0,
                                         partition_epoch=0))
    node.publish(delta.apply())
    with open(port_file + ".tmp", "w") as f:
        f.write(str(node.port()))
    os.replace(port_file + ".tmp", port_file)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await node.shutdown()

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
"""


class IdleLocal:
    """Broker 2's logs as the fetcher sees them: every partition empty, at epoch 0."""

    def end_offset(self, tp):
        return 0

    def start_offset(self, tp):
        return 0

    def latest_epoch(self, tp):
        return None

    def position(self, tp):
        return 0, 0, None

    def high_watermark(self, tp):
        return 0

    def end_offset_for_epoch(self, tp, epoch):
        return -1, -1


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_leader(workdir: str, topics: int, per_topic: int):
    port_file = os.path.join(workdir, "port")
    proc = subprocess.Popen([sys.executable, "-c", LEADER, os.path.join(workdir, "logs"), str(topics),
                             str(per_topic), port_file], env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "leader.log"), "w"))
    deadline = time.monotonic() + 300
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"leader did not start: see {workdir}/leader.log")
        time.sleep(0.1)
    with open(port_file) as f:
        return proc, int(f.read())


class Wire:
    """One connection; counts the bytes of every frame both ways."""

    def __init__(self, reader, writer):
        self.reader, self.writer, self.cid = reader, writer, 0

    async def ask(self, request: FetchRequest):
        self.cid += 1
        frame = encode_request(request, VERSION, self.cid, "bench-follower")
        self.writer.write(frame)
        size = struct.unpack(">i", await self.reader.readexactly(4))[0]
        body = await self.reader.readexactly(size)
        _, resp = decode_response(body, 1, VERSION)
        return resp, len(frame) + 4 + size


def new_fetcher(topics: int, per_topic: int, sessions: bool, max_wait_ms: int) -> ReplicaFetcher:
    f = ReplicaFetcher(FOLLOWER, 1, 0, IdleLocal(), max_wait_ms=max_wait_ms, min_bytes=1,
                       fetch_sessions=sessions)
    for t in range(topics):
        for p in range(per_topic):
            f.add_or_update((f"idle-{t}", p), uuid.UUID(int=t + 1), 0)
    return f


async def fetch_round(f: ReplicaFetcher, wire: Wire) -> int:
    req = f.poll(0)
    resp, nbytes = await wire.ask(req)
    if resp.error_code:
        raise SystemExit(f"the leader answered error {resp.error_code}")
    errors = {p.error_code for t in resp.responses for p in t.partitions} - {0}
    if errors:
        raise SystemExit(f"partition errors {errors}")
    f.on_response(resp, 0)
    return nbytes


async def run(args, leader_pid: int, port: int) -> dict:
    per_topic = args.partitions // args.topics
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    wire = Wire(reader, writer)
    fetchers = {mode: new_fetcher(args.topics, per_topic, mode == "sessions", args.max_wait_ms)
                for mode in ("sessionless", "sessions")}
    first = {mode: await fetch_round(f, wire) for mode, f in fetchers.items()}  # warm-up; opens the session
    blocks = {mode: [] for mode in fetchers}
    for _ in range(args.blocks):
        for mode, f in fetchers.items():
            leader0, client0, nbytes = cpu_seconds(leader_pid), time.process_time(), 0
            for _ in range(args.rounds):
                nbytes += await fetch_round(f, wire)
            blocks[mode].append({"leader_cpu_ms": (cpu_seconds(leader_pid) - leader0) * 1000 / args.rounds,
                                 "client_cpu_ms": (time.process_time() - client0) * 1000 / args.rounds,
                                 "bytes": nbytes / args.rounds})
    writer.close()
    out = {"partitions": per_topic * args.topics, "topics": args.topics, "rounds_per_block": args.rounds,
           "blocks": args.blocks, "max_wait_ms": args.max_wait_ms, "first_round_bytes": first}
    for mode, rows in blocks.items():
        out[mode] = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    out["ratio_sessions_to_sessionless"] = {
        k: (out["sessions"][k] / out["sessionless"][k] if out["sessionless"][k] else None)
        for k in out["sessions"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=5000)
    ap.add_argument("--topics", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=40, help="fetch rounds per block")
    ap.add_argument("--blocks", type=int, default=5, help="alternating blocks per mode")
    ap.add_argument("--max-wait-ms", type=int, default=0)
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="bench-fetch-sessions-")
    proc = None
    try:
        proc, port = start_leader(workdir, args.topics, args.partitions // args.topics)
        result = asyncio.run(run(args, proc.pid, port))
        print(json.dumps(result, indent=2))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
