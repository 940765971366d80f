"""Benchmarks of the Raft core alone (no network, no disk): simulator throughput for a
3-voter cluster, the cost of the leader handling one Fetch, and the same Fetch with its wire
edges (decode the request bytes, step the core, fit and encode the answer; and on the
follower: build and encode the request, decode the answer).

    python bench/bench_raft_core.py            # both, a few seconds each
    KRAFT_NO_EXTENSIONS=1 python bench/bench_raft_core.py   # with the pure-Python codec

Numbers are wall-clock on this machine; tests never assert on them.
"""

from __future__ import annotations

import argparse
import random
import time

import kraft.records as records
from kraft.protocol import FetchRequest, FetchResponse, VoteRequest
from kraft.raft import Flush, InboundRequest, InboundResponse, RaftConfig, RaftCore, Respond, Send, rpcs
from kraft.server.wire_versions import ResponseFitter, upgrade_request
from kraft.testing import InMemoryLog, NetworkFaults, SimCluster

ENDPOINTS = [(1, "localhost", 9093), (2, "localhost", 9094), (3, "localhost", 9095)]


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
                epoch = e.request.topics[0].partitions[0].replica_epoch
                core.step(InboundResponse(2, e.correlation_id, rpcs.vote_response(0, -1, epoch, True)), now)
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
    caught_up = InboundRequest(2, rpcs.fetch_request(2, epoch, end, epoch, 0), "h")
    batch = log.batches()[-1]
    one_batch = InboundRequest(3, rpcs.fetch_request(3, epoch, batch.base_offset, epoch, 0), "h")
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


def bench_fetch_wire(n: int) -> dict:
    """The Fetch hot path with its wire edges at v17, as a controller serves it."""
    core, log, now = leader_core(batches=200, batch_records=10, value_size=100)
    epoch, end = core.epoch, log.end_offset()
    fit = ResponseFitter(ENDPOINTS).fit
    out = {}
    for name, offset in (("caught_up", end), ("one_batch", log.batches()[-1].base_offset)):
        raw = rpcs.fetch_request(2, epoch, offset, epoch, 0).encode(17)

        def leader_side():
            wire = FetchRequest.decode(raw, 17)
            upgrade_request(wire, 17)
            core.step(InboundRequest(-1, wire, "h"), now)
            resp = [e for e in core.poll_effects().effects if type(e) is Respond][0].response
            body = bytearray()
            fit(resp, 17).encode_into(body, 17)
            return body

        answer = leader_side()

        def follower_side():
            body = bytearray()
            rpcs.fetch_request(2, epoch, offset, epoch, 500, 8 << 20, -1, None, "c").encode_into(body, 17)
            return FetchResponse.decode(answer, 17)

        for side, fn in (("leader", leader_side), ("follower", follower_side)):
            for _ in range(1000):
                fn()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            out[f"{name}_{side}_us"] = (time.perf_counter() - t0) / n * 1e6
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
    w = bench_fetch_wire(args.fetches)
    print(f"with wire edges (v17), caught up: leader decode+step+encode {w['caught_up_leader_us']:.1f} us, "
          f"follower encode request + decode answer {w['caught_up_follower_us']:.1f} us")
    print(f"with wire edges (v17), one batch: leader {w['one_batch_leader_us']:.1f} us, "
          f"follower {w['one_batch_follower_us']:.1f} us")
    s = bench_simulator(args.sim_seconds)
    print(f"simulator, 3 voters, proposals every 2 ms: {s['steps_per_s']:.0f} steps/s "
          f"({s['events']} events in {s['wall_s']:.2f} s wall, {s['sim_speedup']:.1f}x real time, "
          f"{s['committed_records']} offsets committed)")


if __name__ == "__main__":
    main()
