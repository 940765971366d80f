"""Benchmarks of the Raft core alone (no network, no disk): simulator throughput for a
3-voter cluster, and the cost of the leader handling one Fetch.

    python bench/bench_raft_core.py            # both, a few seconds each
    KRAFT_NO_EXTENSIONS=1 python bench/bench_raft_core.py   # with the pure-Python codec

Numbers are wall-clock on this machine; tests never assert on them.
"""

from __future__ import annotations

import argparse
import random
import time

import kraft.records as records
from kraft.raft import FetchRequest, InboundRequest, RaftConfig, RaftCore
from kraft.testing import InMemoryLog, NetworkFaults, SimCluster


def bench_simulator(sim_seconds: int) -> dict:
    c = SimCluster(1, 3, faults=NetworkFaults(min_delay_ms=1, max_delay_ms=2), check_invariants=False,
                   config=RaftConfig(cluster_id="bench", append_linger_ms=5))
    c.start_all()
    c.wait_for_leader()
    rng = random.Random(1)

    def client():
        c.propose([b"x" * 100 for _ in range(rng.randint(1, 5))])
        c.schedule(c.now + 2, client)

    client()
    events0, t0 = c.events, time.perf_counter()
    c.run_for(sim_seconds * 1000)
    wall = time.perf_counter() - t0
    events = c.events - events0
    hw = c.leader().core.high_watermark
    return {"events": events, "wall_s": wall, "steps_per_s": events / wall,
            "sim_speedup": sim_seconds / wall, "committed_records": hw}


def leader_core(batches: int, batch_records: int, value_size: int):
    log = InMemoryLog()
    core = RaftCore(1, log, RaftConfig(append_linger_ms=0), (1, 2, 3), random.Random(0))
    # Win an election by hand: pre-vote and vote granted by node 2.
    from kraft.raft import Send, VoteRequest, VoteResponse, InboundResponse, Flush
    now = 0
    for _ in range(10):
        now = core.poll_effects().next_deadline_ms
        core.tick(now)
        if core.role == "prospective":
            break
    for _ in range(2):
        for e in core.poll_effects().effects:
            if isinstance(e, Flush):
                log.flush(e.up_to)
                core.on_flushed(e.up_to, now)
            if isinstance(e, Send) and isinstance(e.request, VoteRequest) and e.destination == 2:
                core.step(InboundResponse(2, e.correlation_id, VoteResponse(0, -1, e.request.candidate_epoch, True)), now)
    assert core.is_leader(), core.state
    for _ in range(batches):
        core.propose([b"v" * value_size for _ in range(batch_records)], now)  # linger 0: appended now
    for e in core.poll_effects().effects:
        if isinstance(e, Flush):
            log.flush(e.up_to)
            core.on_flushed(e.up_to, now)
    core.poll_effects()
    return core, log, now


def bench_fetch(n: int) -> dict:
    core, log, now = leader_core(batches=200, batch_records=10, value_size=100)
    epoch, end = core.epoch, log.end_offset()
    caught_up = InboundRequest(2, FetchRequest(2, epoch, end, epoch, 0), "h")
    batch = log.batches()[-1]
    one_batch = InboundRequest(3, FetchRequest(3, epoch, batch.base_offset, epoch, 0), "h")
    out = {}
    for name, req in (("fetch_caught_up_us", caught_up), ("fetch_one_batch_us", one_batch)):
        step, poll = core.step, core.poll_effects
        for _ in range(1000):
            step(req, now)
            poll()
        t0 = time.perf_counter()
        for _ in range(n):
            step(req, now)
            poll()
        out[name] = (time.perf_counter() - t0) / n * 1e6
    out["one_batch_bytes"] = batch.size
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim-seconds", type=int, default=60)
    ap.add_argument("--fetches", type=int, default=50_000)
    args = ap.parse_args()
    print(f"records codec: {records.IMPLEMENTATION}")
    f = bench_fetch(args.fetches)
    print(f"leader Fetch, follower caught up (empty answer): {f['fetch_caught_up_us']:.1f} us")
    print(f"leader Fetch returning one {f['one_batch_bytes']}-byte batch: {f['fetch_one_batch_us']:.1f} us")
    s = bench_simulator(args.sim_seconds)
    print(f"simulator, 3 voters, proposals every 2 ms: {s['steps_per_s']:.0f} steps/s "
          f"({s['events']} events in {s['wall_s']:.2f} s wall, {s['sim_speedup']:.1f}x real time, "
          f"{s['committed_records']} offsets committed)")


if __name__ == "__main__":
    main()
