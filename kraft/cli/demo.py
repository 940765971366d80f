"""``kraft demo``: the README's run command. Starts a real 3-node cluster of combined
(broker + controller) nodes as separate ``kraft server start`` processes on loopback in a
temporary directory, writes records through the quorum leader, shows ``describe --status``,
kills the leader with SIGKILL, shows the new leader and that writes continue; then a real
Kafka client (confluent-kafka) creates a topic, produces, and consumes through a consumer group
(commits, lag shown)
(``demo_clients.py``); then everything stops (SIGTERM) and it prints where the files are.
``--clients`` keeps the cluster up, prints kcat / confluent-kafka lines to paste, and restarts
a node that exits (try ``kill -9``); the demo topic has replication factor 3, so clients keep
working meanwhile. Exits non-zero if any step fails, so it doubles as a smoke test. Before
``--clients`` hands over, a node that dies on its own stops the demo at once with its exit
code and the last lines of its log.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time

from kraft.cli.metadata_quorum import _replica_list_text, _status
from kraft.errors import KraftError
from kraft.records import build_batch
from kraft.client.quorum import QuorumClient, QuorumWriter
from kraft.cli.demo_clients import client_lines, run_clients, wait_for_brokers
from kraft.cli.local_cluster import LocalCluster


# A shorter broker session than Kafka's 9 s, so the killed node's broker is back within the demo.
# No initial rebalance delay (Kafka's 3 s lets more members join first): the demo has one.
DEMO_SETTINGS = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
                 "group.initial.rebalance.delay.ms": "0"}


def _say(msg: str = "") -> None:
    print(msg, flush=True)


def _show_status(d, cluster_id: str) -> None:
    for k, v in _status(d, cluster_id).items():
        _say(f"    {k + ':':<24}{_replica_list_text(v) if isinstance(v, list) else v}")


async def _write(writer: QuorumWriter, n: int, tag: str, deadline_s: float = 20.0) -> tuple[int, float]:
    """Write ``n`` records in one batch, following leader changes; (base offset, seconds)."""
    start = time.monotonic()
    base = await writer.write_through_failures(build_batch([f"{tag}-{i}".encode() for i in range(n)]),
                                               deadline_s=deadline_s)
    return base, time.monotonic() - start


async def _scenario(cluster: LocalCluster) -> None:
    client = QuorumClient([cluster.address(i) for i in cluster.ids])
    writer = QuorumWriter(client)
    try:
        d = await client.describe(deadline_s=30)
        _say(f"  leader elected: node {d.leader_id} (epoch {d.leader_epoch})")
        for round_ in range(3):
            base, secs = await _write(writer, 100, f"before-{round_}")
            _say(f"  wrote 100 records through the leader: committed at offsets {base}..{base + 99} "
                 f"({secs * 1000:.1f} ms)")
        d = await client.describe()
        _say("\n$ kraft metadata-quorum --bootstrap-controller "
             f"{cluster.bootstrap.split(',')[0]} describe --status")
        _show_status(d, cluster.cluster_id)

        old = d.leader_id
        _say(f"\n  kill -9 the leader (node {old}, pid {cluster.procs[old].pid})")
        killed_at = time.monotonic()
        cluster.kill(old)
        writer.leader = None
        base, _ = await _write(writer, 100, "after-failover", deadline_s=30)
        failover = time.monotonic() - killed_at
        d = await client.describe()
        _say(f"  new leader: node {d.leader_id} (epoch {d.leader_epoch}); first write after the kill "
             f"committed at offset {base}, {failover * 1000:.0f} ms after SIGKILL")
        base, secs = await _write(writer, 100, "after-failover-2")
        _say(f"  writes continue: 100 more records at offsets {base}..{base + 99} ({secs * 1000:.1f} ms)")
        _say(f"\n  restart node {old}; it rejoins as a follower and catches up")
        cluster.start(old)
        for _ in range(200):
            d = await client.describe()
            rep = {v.replica_id: v.log_end_offset for v in d.voters}
            if rep.get(old, -1) >= d.high_watermark > 0:
                break
            await asyncio.sleep(0.05)
        _say(f"\n$ kraft metadata-quorum --bootstrap-controller {cluster.bootstrap.split(',')[0]} describe --status")
        _show_status(d, cluster.cluster_id)
        lagging = {i: eo for i, eo in rep.items() if eo < d.high_watermark}
        if lagging:
            raise KraftError(f"nodes did not catch up: {lagging} (high watermark {d.high_watermark})")
    finally:
        await client.close()
    bootstrap = cluster.broker_bootstrap
    secs = await wait_for_brokers({i: cluster.broker_address(i) for i in cluster.broker_ids})
    _say(f"\n  all {len(cluster.broker_ids)} brokers serve ({secs:.1f} s later: node {old}'s new process registers "
         f"once its old session expired, broker.session.timeout.ms={DEMO_SETTINGS['broker.session.timeout.ms']}); "
         f"bootstrap.servers={bootstrap}")
    await asyncio.to_thread(run_clients, bootstrap, _say)


class NodeDied(KraftError):
    """A node process exited without being told to."""


def death_report(cluster: LocalCluster, exits: dict[int, int]) -> str:
    parts = []
    for i, code in sorted(exits.items()):
        tail = "\n".join(f"      {line}" for line in cluster.log_tail(i)) or "      (its log is empty)"
        parts.append(f"node {i} exited with code {code}; the last lines of {cluster.log_path(i)}:\n{tail}")
    return "\n".join(parts)


async def watch(cluster: LocalCluster, scenario, interval_s: float = 0.1):
    """Run ``scenario`` but stop it as soon as a node dies that nobody killed."""
    task = asyncio.ensure_future(scenario)
    try:
        while not task.done():
            exits = cluster.unexpected_exits()
            if exits:
                task.cancel()
                raise NodeDied(death_report(cluster, exits))
            await asyncio.wait([task], timeout=interval_s)
        return task.result()
    finally:
        if not task.done():
            task.cancel()


async def keep_alive(cluster: LocalCluster, interval_s: float = 0.5, *, say=None, rounds: int | None = None):
    """``--clients``: the cluster is there to be tried, ``kill -9`` included, so a node that
    exits is restarted (from its own files, as an operator would) instead of ending the demo.
    The partitions are RF 3: clients carry on against the other two meanwhile."""
    say = say or _say
    n = 0
    while rounds is None or n < rounds:
        n += 1
        for i, code in sorted(cluster.unexpected_exits().items()):
            say(f"  node {i} exited with code {code}; restarting it (its log: {cluster.log_path(i)})")
            cluster.start(i)
        await asyncio.sleep(interval_s)


def _run(args) -> int:
    directory = args.dir or tempfile.mkdtemp(prefix="kraft-demo-")
    _say(f"kraft demo: a 3-node KRaft cluster (broker + controller in each node) on 127.0.0.1 in {directory}")
    cluster = LocalCluster(directory, 3, log_level="WARNING", combined=True, overrides=DEMO_SETTINGS).create()
    _say(f"  cluster id {cluster.cluster_id}; controllers on ports "
         + ", ".join(f"{i}:{p}" for i, p in cluster.ports.items())
         + "; brokers on " + ", ".join(f"{i}:{p}" for i, p in cluster.broker_ports.items()))
    cluster.start()
    code = 0
    try:
        asyncio.run(watch(cluster, _scenario(cluster)))
        if getattr(args, "clients", False):
            _say("\n  the cluster keeps running; paste these in another terminal (Ctrl-C here stops it):")
            for line in client_lines(cluster.broker_bootstrap):
                _say(f"    {line}")
            asyncio.run(keep_alive(cluster))
    except KeyboardInterrupt:
        _say("\n  interrupted")
    except (KraftError, OSError) as exc:
        _say(f"\ndemo failed: {exc}")
        code = 1
    finally:
        codes = cluster.stop()
        cluster.close()
    _say(f"\n  stopped all nodes (SIGTERM; exit codes {codes})")
    if code == 0 and any(c != 0 for c in codes.values()):
        code = 1
    if args.keep or code:
        _say(f"  files kept in {directory} (server-N.properties, node-N/__cluster_metadata-0/, node-N/logs/demo-P/, "
             f"node-N.log); try: kraft dump-log --cluster-metadata-decoder "
             f"{os.path.join(directory, 'node-1', '__cluster_metadata-0')}")
    else:
        shutil.rmtree(directory, ignore_errors=True)
    return code


def register(sub) -> None:
    p = sub.add_parser("demo", help="run a 3-node cluster, kill the quorum leader, keep writing, then "
                                    "create a topic, produce and consume with confluent-kafka")
    p.add_argument("--dir", help="directory to use (default: a new temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the directory afterwards (always kept on failure)")
    p.add_argument("--clients", action="store_true",
                   help="afterwards keep the cluster running and print kcat / confluent-kafka lines to paste")
    p.set_defaults(func=_run)


if __name__ == "__main__":
    sys.exit(_run(None))
