"""Load generation inside client processes, the same for every system: closed loop (a fixed
number of writes in flight), open loop (writes sent on a fixed schedule whatever the answers,
latency measured from the scheduled send time so a stall is not hidden) and the failover
probe. A system enters only through its ``Writer`` (connect/write/recover/close).

Runs in processes forked by ``run_clients``; the parent passes a go time on the system-wide
monotonic clock, so every process measures the same window. Decides nothing about which
figures to report (bench_peers does)."""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import signal
import time

VALUE = b"v" * 256
WARMUP_S = 1.0


def make_writer(spec: dict, worker: int):
    module = importlib.import_module(f"bench.peers.{spec['kind']}")
    return module.Writer(spec, worker, VALUE)


class _Recovery:
    """At most one ``writer.recover`` at a time, whoever saw the failure first; the first
    few distinct errors are kept for the report."""

    def __init__(self, writer):
        self.writer, self.task, self.errors, self.seen = writer, None, 0, []

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        text = f"{type(exc).__name__}: {exc}"[:200]
        if len(self.seen) < 3 and text not in self.seen:
            self.seen.append(text)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self.writer.recover(exc))


async def _closed(writer, go: float, seconds: float, in_flight: int, count: int, keep_latency: bool):
    end = go + seconds
    lat: list[float] = []
    done = 0
    recovery = _Recovery(writer)

    async def task():
        nonlocal done
        while True:
            t = time.monotonic()
            if t >= end:
                return
            try:
                await writer.write(count)
            except Exception as exc:  # noqa: BLE001 - counted; a load run keeps going
                recovery.failed(exc)
                await asyncio.sleep(0.01)
                continue
            now = time.monotonic()
            if t >= go and now <= end:
                done += count
                if keep_latency:
                    lat.append(now - t)

    await asyncio.sleep(max(0.0, go - time.monotonic()))
    cpu0 = time.process_time()
    await asyncio.gather(*(task() for _ in range(in_flight)))
    return {"writes": done, "errors": recovery.errors, "error_samples": recovery.seen, "latencies": lat,
            "client_cpu": time.process_time() - cpu0}


async def _open(writer, go: float, seconds: float, rate: float, count: int, max_outstanding: int):
    """Writes due at go + i/rate are sent then, unless ``max_outstanding`` are already
    waiting: those are skipped (counted), so an overloaded system shows as a lower sent rate
    rather than as a client buried under its own queue."""
    lat: list[float] = []
    skipped = in_window = 0
    outstanding: set = set()
    end = go + seconds
    recovery = _Recovery(writer)

    async def one(scheduled: float):
        nonlocal in_window
        try:
            await writer.write(count)
            now = time.monotonic()
            lat.append(now - scheduled)
            in_window += now <= end
        except Exception as exc:  # noqa: BLE001 - counted
            recovery.failed(exc)

    n = int(seconds * rate)
    await asyncio.sleep(max(0.0, go - time.monotonic()))
    cpu0 = time.process_time()
    i = 0
    while i < n:
        now = time.monotonic()
        while i < n and go + i / rate <= now:  # everything due by now, in one burst
            if len(outstanding) < max_outstanding:
                t = asyncio.ensure_future(one(go + i / rate))
                outstanding.add(t)
                t.add_done_callback(outstanding.discard)
            else:
                skipped += 1
            i += 1
        if i < n:
            await asyncio.sleep(max(0.0, go + i / rate - time.monotonic()))
    cpu = time.process_time() - cpu0
    if outstanding:
        await asyncio.wait(list(outstanding), timeout=30)
    # writes: committed inside the window (the achieved rate); latencies: every write sent.
    return {"writes": in_window * count, "errors": recovery.errors, "error_samples": recovery.seen,
            "skipped": skipped, "sent": int(seconds * rate) - skipped, "latencies": lat,
            "client_cpu": cpu, "unfinished": len(outstanding)}


async def _worker(spec, worker, job, ready, go_at, out):
    writer = make_writer(spec, worker)
    await writer.connect()
    # Warm-up: connections open, caches filled, before anyone measures.
    warm_end = time.monotonic() + WARMUP_S
    count = job.get("count", 1)

    async def warm():
        while time.monotonic() < warm_end:
            try:
                await writer.write(count)
            except Exception:  # noqa: BLE001 - warm-up only
                await asyncio.sleep(0.01)
    await asyncio.gather(*(warm() for _ in range(min(job.get("in_flight", 8), 64))))
    ready.put(worker)
    while go_at.value == 0.0:
        await asyncio.sleep(0.002)
    go = go_at.value
    if job["mode"] == "closed":
        res = await _closed(writer, go, job["seconds"], job["in_flight"], count, job.get("latency", False))
    else:
        res = await _open(writer, go, job["seconds"], job["rate"], count, job["max_outstanding"])
    await writer.close()
    out.put((worker, res))


def _as_plain_child() -> None:
    """Forked children must not run the parent's cleanup handlers (they own no servers)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _worker_main(spec, worker, job, ready, go_at, out):
    _as_plain_child()
    try:
        asyncio.run(_worker(spec, worker, job, ready, go_at, out))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent instead of a hang
        ready.put(worker)
        out.put((worker, {"error": repr(exc)}))


def run_clients(spec: dict, jobs: list[dict], cpu_of_servers, timeout: float = 120.0) -> dict:
    """Fork one process per job, wait until all are warmed up, start them together and collect
    their results. Returns the merged result with server CPU seconds over the window
    (``cpu_of_servers()`` gives the servers' (user, system) CPU seconds so far)."""
    ctx = multiprocessing.get_context("fork")
    ready, out = ctx.Queue(), ctx.Queue()
    go_at = ctx.Value("d", 0.0)
    procs = [ctx.Process(target=_worker_main, args=(spec, w, job, ready, go_at, out), daemon=True)
             for w, job in enumerate(jobs)]
    for p in procs:
        p.start()
    try:
        for _ in procs:
            ready.get(timeout=timeout)
        go = time.monotonic() + 0.1
        seconds = jobs[0]["seconds"]
        go_at.value = go
        time.sleep(max(0.0, go - time.monotonic()))
        cpu0 = cpu_of_servers()  # (user, system) seconds
        time.sleep(max(0.0, go + seconds - time.monotonic()))
        cpu1 = cpu_of_servers()
        server_user, server_system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        results = [out.get(timeout=timeout)[1] for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
    failed = [r["error"] for r in results if "error" in r]
    if failed:
        raise RuntimeError(f"client process failed: {failed[0]}")
    merged = {"seconds": seconds, "server_cpu": server_user + server_system, "server_user_cpu": server_user,
              "server_system_cpu": server_system, "processes": len(jobs),
              "writes": sum(r["writes"] for r in results), "errors": sum(r["errors"] for r in results),
              "client_cpu": sum(r["client_cpu"] for r in results),
              "skipped": sum(r.get("skipped", 0) for r in results),
              "sent": sum(r.get("sent", 0) for r in results),
              "error_samples": sorted({e for r in results for e in r.get("error_samples", [])})[:5],
              "unfinished": sum(r.get("unfinished", 0) for r in results),
              "latencies": sorted(x for r in results for x in r["latencies"])}
    return merged


# --- failover -------------------------------------------------------------------------------

async def _probe(spec, ready, killed_at, out):
    """Connected and writing; once the parent has killed the leader, send a write every 5 ms
    (without waiting for earlier ones) and report when the first of them commits."""
    writer = make_writer(spec, 999)
    await writer.connect()
    for _ in range(50):
        try:
            await asyncio.wait_for(writer.write(1), 2)
            break
        except Exception as exc:  # noqa: BLE001 - the cluster may still be settling
            await writer.recover(exc)
    else:
        raise RuntimeError("no write committed before the kill")
    ready.put(1)
    while killed_at.value == 0.0:
        await asyncio.sleep(0.001)
    first = None
    pending: set = set()
    recovering = None
    deadline = killed_at.value + 60

    async def attempt():
        await asyncio.wait_for(writer.write(1), 10)
        return time.monotonic()

    while first is None and time.monotonic() < deadline:
        pending.add(asyncio.ensure_future(attempt()))
        done, pending = await asyncio.wait(pending, timeout=0.005, return_when=asyncio.FIRST_COMPLETED)
        for d in done:
            if d.cancelled():
                continue  # cancelled by the writer's recovery (etcd's closes its channel)
            exc = d.exception()
            if exc is None:
                first = d.result() if first is None else min(first, d.result())
            elif recovering is None or recovering.done():
                recovering = asyncio.ensure_future(writer.recover(exc))
        while len(pending) > 2000:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    await writer.close()
    out.put(None if first is None else first - killed_at.value)


def _probe_main(spec, ready, killed_at, out):
    _as_plain_child()
    try:
        asyncio.run(_probe(spec, ready, killed_at, out))
    except BaseException as exc:  # noqa: BLE001 - reported instead of a hang
        ready.put(repr(exc))  # if it failed before the kill, the parent must not kill
        out.put(repr(exc))


def failover_once(cluster, timeout: float = 90.0):
    """Seconds from SIGKILL of the leader to the first commit of a write sent after it."""
    ctx = multiprocessing.get_context("fork")
    ready, out = ctx.Queue(), ctx.Queue()
    killed_at = ctx.Value("d", 0.0)
    p = ctx.Process(target=_probe_main, args=(cluster.spec(cluster.ids), ready, killed_at, out), daemon=True)
    p.start()
    try:
        state = ready.get(timeout=timeout)
        if state != 1:
            raise RuntimeError(f"failover probe could not write before the kill: {state}")
        leader = cluster.leader()
        t = time.monotonic()
        cluster.kill(leader)
        killed_at.value = t
        took = out.get(timeout=timeout)
    finally:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join()
    if isinstance(took, str):
        raise RuntimeError(f"failover probe failed: {took}")
    return leader, took
