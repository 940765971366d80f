"""Voter-change benchmark (KIP-853 and seed 002): how long an AddRaftVoter and a
RemoveRaftVoter take to commit, and a whole three-voter quorum replaced by three new nodes
with ``reassign`` (ReassignRaftVoters: six single-voter steps and the leader's hand-over), in
a dynamic quorum of real processes on loopback (fsync on, low-latency profile), beside the
anchor measured in the same run: one committed write (Produce, acks=-1) through the same leader.

Each round starts a fresh cluster: node 1 ``--standalone``, nodes 2-6
``--no-initial-controllers`` (observers, caught up first), then times add 2, add 3, remove 1
(the leader removing itself: until the request is answered, i.e. the removal committed) and
the first write committed by the new leader after it; then (untimed) re-adds 1 and times the
reassignment of voters {1, 2, 3} to {4, 5, 6}: from the request to the DescribeQuorum answer
that shows voters {4, 5, 6} and no target (targets given as id@host:port:directory-id).

    python bench/bench_membership.py [--rounds 3]

Prints a Markdown table. Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kraft.cli.local_cluster import LOW_LATENCY, LocalCluster, wait_for  # noqa: E402
from kraft.client.quorum import QuorumClient, QuorumWriter  # noqa: E402
from kraft.client.voter_changes import add_voter, reassign_voters, remove_voter  # noqa: E402
from kraft.log.state_files import uuid_text_to_bytes  # noqa: E402
from kraft.records import build_batch  # noqa: E402


async def _round(c: LocalCluster) -> dict:
    client = QuorumClient([c.address(i) for i in c.ids])
    writer = QuorumWriter(client)
    out: dict[str, float] = {}
    try:
        async def timed(name, coro):
            t = time.perf_counter()
            await coro
            out[name] = (time.perf_counter() - t) * 1000

        await writer.write(build_batch([b"warm"]))
        await timed("write (anchor)", writer.write(build_batch([b"x" * 256])))
        for node in (2, 3):
            await timed(f"add voter {node}", add_voter(
                client, node, uuid_text_to_bytes(c.directory_id(node)),
                [("CONTROLLER", "127.0.0.1", c.ports[node])], deadline_s=30))
        await timed("write, 3 voters", writer.write(build_batch([b"x" * 256])))
        await timed("remove voter 1 (the leader)", remove_voter(
            client, 1, uuid_text_to_bytes(c.directory_id(1)), deadline_s=30))
        writer.leader = None
        await timed("first write after", writer.write(build_batch([b"x" * 256]), deadline_s=30))
        await add_voter(client, 1, uuid_text_to_bytes(c.directory_id(1)), [("CONTROLLER", "127.0.0.1", c.ports[1])],
                        deadline_s=30)
        targets = [(i, uuid_text_to_bytes(c.directory_id(i)), [("CONTROLLER", "127.0.0.1", c.ports[i])])
                   for i in (4, 5, 6)]

        async def reassign():
            await reassign_voters(client, targets, deadline_s=30)
            while True:
                d = await client.describe(10)
                if d.target_voters is None and sorted(v.replica_id for v in d.voters) == [4, 5, 6]:
                    return
                await asyncio.sleep(0.01)
        await timed("reassign {1,2,3} -> {4,5,6}", reassign())
        out["  per step (6 steps)"] = out["reassign {1,2,3} -> {4,5,6}"] / 6
        writer.leader = None
        await timed("first write after reassign", writer.write(build_batch([b"x" * 256]), deadline_s=30))
    finally:
        await client.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    results: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="kraft-membership-") as d:
            c = LocalCluster(d, 6, overrides=LOW_LATENCY, dynamic=True).create()
            try:
                c.start()

                def observers_caught_up():
                    from tests.integration.quorum_helpers import describe
                    desc = asyncio.run(describe(c, 5))
                    seen = {o.replica_id for o in desc.observers if o.log_end_offset >= desc.high_watermark}
                    return {2, 3, 4, 5, 6} <= seen
                wait_for(observers_caught_up, 30)
                for k, v in asyncio.run(_round(c)).items():
                    results.setdefault(k, []).append(v)
            finally:
                c.close()
    print(f"| step ({args.rounds} rounds) | median ms | max ms |")
    print("|---|---:|---:|")
    for k, vs in results.items():
        print(f"| {k} | {statistics.median(vs):.1f} | {max(vs):.1f} |")


if __name__ == "__main__":
    main()
