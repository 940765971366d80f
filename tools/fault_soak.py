"""Fault soak: a 3-node quorum of real processes under write load while faults hit it, then a
check that nothing acknowledged was lost and no two nodes disagree.

Faults, one at a time at random (every ``--interval`` seconds on average):
  * kill -9 of a node (leader or follower), restarted a few seconds later;
  * SIGSTOP / SIGCONT of a node for 1-5 s (a long GC pause);
  * a network partition isolating one node: every node reaches every other through its own
    TCP proxy (node i's ``controller.quorum.voters`` names proxies), and a cut proxy
    black-holes its traffic (no reset: the peers must notice by timeout);
  * a full disk: each node's data directory is a small tmpfs (when this runs as root and
    can mount); a ballast file fills it, the node must stop with a non-zero exit, and it is
    restarted once the space is back;
  * bit flips: a killed node's last segment gets a flipped byte past its recovery point,
    so the restart must detect it (CRC) and fetch the rest again from the leader;
  * restarts: one node SIGTERMed and started again; and (a quarter of the faults) the whole
    quorum: a rolling restart, every node SIGTERMed at once, every node SIGKILLed at once.

Before the load, 3 simulated brokers register and ``--topics`` topics of 4 partitions (RF 3,
1,000 partitions by default) are created, so the controllers' image is large and the metadata
log, with snapshots every 4 MB, spans snapshots: every restart loads a snapshot and replays
a log suffix, and at the end every controller must hold the same image (the digest each
logs when it stops) with every one of those partitions in it.

Writers send single-record batches with unique values (acks=-1, several in flight). A write
that fails or times out is indeterminate: never retried, not counted as acknowledged.

At the end every fault is healed, every node restarted and caught up, the nodes stopped,
and their logs read from disk:
  * lost      = acknowledged values missing from the log, or at another offset;
  * divergent = offsets where two nodes hold different batches;
  * longest unavailability = the longest time without any acknowledged write;
  * images = the controllers' final images, which must be one (same digest).

    python tools/fault_soak.py --minutes 10 [--seed S] [--interval 4] [--writers 8]

Exit status 0 only with 0 lost, 0 divergent and one image. Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kraft.cli.local_cluster import LocalCluster, free_ports  # noqa: E402
from kraft.client.controller_client import ControllerClient, SimulatedBroker  # noqa: E402
from kraft.client.quorum import QuorumClient, QuorumWriter  # noqa: E402
from kraft.errors import KraftError  # noqa: E402
from kraft.log import LogConfig, SegmentedLog  # noqa: E402
from kraft.log.replicated_log import METADATA_DIR  # noqa: E402
from kraft.records import build_batch, iter_batches  # noqa: E402

TMPFS_MB = 512
# Small segments and frequent snapshots, so rolls and snapshots happen under the faults; the
# retention is long enough to keep every record on disk, because the verdict looks every
# acknowledged value up in the nodes' segments (a run of 10 minutes writes ~150 MB a node).
NODE_OVERRIDES = {
    "controller.quorum.append.linger.ms": "1",
    "metadata.log.segment.bytes": str(8 << 20),
    "metadata.log.max.record.bytes.between.snapshots": str(4 << 20),
    "metadata.max.retention.bytes": str(1 << 30),
}


class SoakFailed(Exception):
    pass


class Proxy:
    """127.0.0.1:listen -> 127.0.0.1:target; ``cut`` black-holes every byte until ``heal``,
    which then closes what was held (the peers reconnect)."""

    def __init__(self, target: int, port: int):
        self.target, self.port = target, port
        self.cut = False
        self._server = None
        self._pipes: set = set()

    async def start(self):
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)

    async def _accept(self, reader, writer):
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()  # the node is down: refused, as it would be without the proxy
            return
        pair = (writer, up_w)
        self._pipes.add(pair)
        try:
            await asyncio.gather(self._pump(reader, up_w), self._pump(up_r, writer))
        except asyncio.CancelledError:
            pass  # the soak is ending
        finally:
            self._pipes.discard(pair)
            for w in pair:
                w.close()

    async def _pump(self, reader, writer):
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    break
                while self.cut:  # black hole: hold it, send nothing, answer nothing
                    await asyncio.sleep(0.05)
                    if reader.at_eof():
                        return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def heal(self):
        was = self.cut
        self.cut = False
        if was:
            for pair in list(self._pipes):
                for w in pair:
                    w.close()

    async def close(self):
        self.heal()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


class ProxiedCluster(LocalCluster):
    """Node i reaches node j through proxy (i, j); clients use the real listeners."""

    def __init__(self, directory, **kw):
        super().__init__(directory, **kw)
        self.proxy_ports = {(i, j): p for (i, j), p in zip(
            [(i, j) for i in self.ids for j in self.ids if i != j], free_ports(len(self.ids) * (len(self.ids) - 1)))}

    def write_configs(self) -> None:
        super().write_configs()
        for i in self.ids:
            voters = ",".join(f"{j}@127.0.0.1:{self.ports[j] if j == i else self.proxy_ports[(i, j)]}"
                              for j in self.ids)
            path = self.config_path(i)
            with open(path) as f:
                lines = [ln for ln in f if not ln.startswith("controller.quorum.voters=")]
            lines.append(f"controller.quorum.voters={voters}\n")
            with open(path, "w") as f:
                f.writelines(lines)


class Soak:
    def __init__(self, args, directory: str):
        self.args = args
        self.rng = random.Random(args.seed)
        self.dir = directory
        # INFO: each node logs its image's digest when it stops (the final comparison).
        self.cluster = ProxiedCluster(directory, log_level="INFO", overrides=NODE_OVERRIDES)
        self.proxies = {}
        self.tmpfs = []
        self.acked: dict[bytes, int] = {}
        self.indeterminate = 0
        self.ack_times: list[float] = []
        self.faults: dict[str, int] = {}
        self.down: set[int] = set()
        self.log: list[str] = []

    # --- setup --------------------------------------------------------------------------
    def mount_disks(self) -> None:
        if not self.args.disk_faults or os.geteuid() != 0:
            return
        for i in self.cluster.ids:
            d = self.cluster.data_dir(i)
            os.makedirs(d, exist_ok=True)
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_MB}m", "tmpfs", d],
                               capture_output=True, text=True)
            if r.returncode != 0:
                self.note(f"no tmpfs ({r.stderr.strip()}): full-disk faults off")
                self.unmount_disks()
                return
            self.tmpfs.append(d)

    def unmount_disks(self) -> None:
        for d in self.tmpfs:
            subprocess.run(["umount", "-l", d], capture_output=True)
        self.tmpfs = []

    def note(self, msg: str) -> None:
        line = f"[{time.monotonic() - self.t0:7.1f}s] {msg}"
        self.log.append(line)
        if self.args.verbose:
            print(line, flush=True)

    # --- load ---------------------------------------------------------------------------
    async def writer(self, k: int, until: float) -> None:
        client = QuorumClient([self.cluster.address(i) for i in self.cluster.ids], request_timeout_ms=3000)
        w = QuorumWriter(client)
        seq = 0
        while time.monotonic() < until:
            seq += 1
            value = f"w{k}-{seq}".encode()
            try:
                offset = await w.write(build_batch([value]), deadline_s=5)
            except (KraftError, OSError, asyncio.TimeoutError):
                self.indeterminate += 1
                w.leader = None
                await asyncio.sleep(0.05)
                continue
            self.acked[value] = offset
            self.ack_times.append(time.monotonic())
        await client.close()

    # --- faults -------------------------------------------------------------------------
    async def faults_loop(self, until: float) -> None:
        kinds = ["kill", "pause", "partition", "bitflip", "restart"] + (["disk"] if self.tmpfs else [])
        whole = ["rolling", "term_all", "kill_all"]
        while time.monotonic() < until - 5:
            await asyncio.sleep(self.rng.uniform(0.5, 1.5) * self.args.interval)
            kind = self.rng.choice(whole if self.rng.random() < self.args.whole_cluster_share else kinds)
            node = self.rng.choice(self.cluster.ids)
            self.faults[kind] = self.faults.get(kind, 0) + 1
            try:
                await getattr(self, f"fault_{kind}")(node)
            except Exception as exc:  # a fault helper failing is a soak bug: say so, go on
                self.note(f"fault {kind} on node {node} failed: {exc!r}")

    async def fault_kill(self, node: int) -> None:
        self.note(f"kill -9 node {node}")
        self.cluster.kill(node)
        await asyncio.sleep(self.rng.uniform(1, 4))
        self.cluster.start(node)

    async def fault_restart(self, node: int) -> None:
        self.note(f"SIGTERM node {node}, then start it")
        await asyncio.to_thread(self.cluster.stop, node, 30)
        self.cluster.start(node)

    async def fault_rolling(self, _node: int) -> None:
        for i in self.cluster.ids:
            self.note(f"rolling restart: node {i}")
            await asyncio.to_thread(self.cluster.stop, i, 30)
            self.cluster.start(i)
            await asyncio.sleep(self.rng.uniform(1, 3))

    async def fault_term_all(self, _node: int) -> None:
        await self._all_at_once(signal.SIGTERM)

    async def fault_kill_all(self, _node: int) -> None:
        await self._all_at_once(signal.SIGKILL)

    async def _all_at_once(self, sig) -> None:
        c = self.cluster
        self.note(f"{signal.Signals(sig).name} every node at once")
        await asyncio.to_thread(c.signal_all, sig, 30)
        await asyncio.sleep(self.rng.uniform(0.5, 2))
        c.start()

    async def fault_pause(self, node: int) -> None:
        proc = self.cluster.procs.get(node)
        if proc is None or proc.poll() is not None:
            return
        secs = self.rng.uniform(1, 5)
        self.note(f"SIGSTOP node {node} for {secs:.1f}s")
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(secs)
        finally:
            os.kill(proc.pid, signal.SIGCONT)

    async def fault_partition(self, node: int) -> None:
        secs = self.rng.uniform(2, 6)
        self.note(f"isolate node {node} for {secs:.1f}s")
        links = [p for (i, j), p in self.proxies.items() if node in (i, j)]
        for p in links:
            p.cut = True
        await asyncio.sleep(secs)
        for p in links:
            p.heal()

    async def fault_disk(self, node: int) -> None:
        d = self.cluster.data_dir(node)
        ballast = os.path.join(d, "ballast")
        self.note(f"fill the disk of node {node}")
        try:
            with open(ballast, "wb") as f:
                chunk = bytes(1 << 20)
                while True:
                    f.write(chunk)
                    f.flush()
        except OSError:
            pass
        proc = self.cluster.procs[node]
        for _ in range(100):  # the next append or fsync fails: the node must stop, non-zero
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.1)
        code = proc.poll()
        self.note(f"node {node} with a full disk: exit code {code}")
        if code == 0:
            self.note(f"ERROR: node {node} exited 0 on a full disk")
            self.faults["disk_exit_0"] = self.faults.get("disk_exit_0", 0) + 1
        os.unlink(ballast)
        if code is None:
            return  # nothing was written meanwhile (it was not the leader and got no data)
        self.cluster.kill(node)
        await asyncio.sleep(0.5)
        self.cluster.start(node)

    async def fault_bitflip(self, node: int) -> None:
        self.note(f"kill -9 node {node} and flip a byte in its last segment's tail")
        self.cluster.kill(node)
        directory = os.path.join(self.cluster.data_dir(node), METADATA_DIR)
        segs = sorted(f for f in os.listdir(directory) if f.endswith(".log"))
        if segs:
            path = os.path.join(directory, segs[-1])
            size = os.path.getsize(path)
            if size > 4096:
                at = self.rng.randrange(size - 2048, size)
                with open(path, "r+b") as f:
                    f.seek(at)
                    b = f.read(1)
                    f.seek(at)
                    f.write(bytes([b[0] ^ (1 << self.rng.randrange(8))]))
        await asyncio.sleep(self.rng.uniform(0.5, 2))
        self.cluster.start(node)

    # --- the run ------------------------------------------------------------------------
    async def main(self) -> dict:
        c = self.cluster
        for (i, j), port in c.proxy_ports.items():
            self.proxies[(i, j)] = Proxy(c.ports[j], port)
            await self.proxies[(i, j)].start()
        c.create()
        c.start()
        admin = QuorumClient([c.address(i) for i in c.ids])
        await admin.describe(60)
        brokers = await self.create_topics()
        self.t0 = time.monotonic()
        until = self.t0 + self.args.minutes * 60
        await asyncio.gather(self.faults_loop(until),
                             *(self.writer(k, until) for k in range(self.args.writers)))
        self.note("load done; healing and restarting every node")
        for p in self.proxies.values():
            p.heal()
        for i in c.ids:
            if c.procs.get(i) is None or c.procs[i].poll() is not None:
                c.start(i)
        hw = await self.settle(admin)
        await admin.close()
        for b in brokers:
            await b.stop()
        await brokers[0].client.close()
        c.stop(timeout=30)
        for p in self.proxies.values():
            await p.close()
        return {**self.verdict(hw), **self.images()}

    async def create_topics(self) -> list:
        """Simulated brokers (they keep heartbeating) and ``--topics`` x 4 partitions, RF 3."""
        c = self.cluster
        client = ControllerClient([c.address(i) for i in c.ids])
        brokers = [SimulatedBroker(client, 100 + i, c.cluster_id, heartbeat_interval_s=1.0) for i in range(3)]
        for b in brokers:
            await b.register()
            b.start()
        for _ in range(300):  # placement needs unfenced brokers
            if not any(b.fenced for b in brokers):
                break
            await asyncio.sleep(0.1)
        for k in range(0, self.args.topics, 50):
            names = [(f"soak-{i:04d}", 4, 3) for i in range(k, min(k + 50, self.args.topics))]
            resp = await client.create_topics(names, deadline_s=60)
            bad = [(t.name, t.error_code) for t in resp.topics if t.error_code not in (0, 36)]  # 36: exists
            if bad:
                raise SoakFailed(f"could not create the soak's topics: {bad[:3]}")
        self.note(f"{self.args.topics} topics x 4 partitions created")
        return brokers

    def images(self) -> dict:
        """Each node's image as it logged it when it stopped last: (topics, partitions, digest)."""
        pattern = re.compile(r"metadata image at offset \d+: (\d+) topics, (\d+) partitions, .*digest (\w+)")
        seen = {}
        for i in self.cluster.ids:
            with open(self.cluster.log_path(i), errors="replace") as f:
                found = pattern.findall(f.read())
            seen[i] = found[-1] if found else None
        return {"images": len({v for v in seen.values()}), "image_partitions": min(
            (int(v[1]) for v in seen.values() if v), default=0), "image_by_node": seen}

    async def settle(self, admin) -> int:
        """Wait until every node holds the high watermark; returns it."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                d = await admin.describe(10)
                ends = {v.replica_id: v.log_end_offset for v in d.voters}
                if d.high_watermark > 0 and all(ends.get(i, -1) >= d.high_watermark for i in self.cluster.ids):
                    return d.high_watermark
            except KraftError:
                pass
            await asyncio.sleep(0.5)
        states = {i: self.cluster.procs[i].poll() for i in self.cluster.ids}
        raise SoakFailed(f"the cluster did not converge within 120 s after healing (exit codes {states}; "
                         f"node logs in {self.dir})")

    def verdict(self, hw: int) -> dict:
        logs = {i: node_batches(self.cluster, i) for i in self.cluster.ids}
        divergent = 0
        for off in sorted(set().union(*logs.values())):
            if off >= hw:
                continue
            copies = {logs[i].get(off) for i in logs}
            if len(copies) > 1:
                divergent += 1
        values = {}
        reference = logs[self.cluster.ids[0]]
        for raw in reference.values():
            for b in iter_batches(raw):
                if not b.is_control:
                    for r in b:
                        values[r.value] = r.offset
        start = min(min(lg) if lg else 0 for lg in logs.values())
        lost = sum(1 for v, off in self.acked.items() if off >= start and values.get(v) != off)
        below_start = sum(1 for off in self.acked.values() if off < start)
        gaps = [b - a for a, b in zip(self.ack_times, self.ack_times[1:])] if len(self.ack_times) > 1 else [0]
        return {"seconds": round(time.monotonic() - self.t0), "acked": len(self.acked),
                "indeterminate": self.indeterminate, "lost": lost, "divergent": divergent,
                "acked_below_log_start": below_start,
                "longest_unavailability_s": round(max(gaps), 2), "faults": self.faults, "high_watermark": hw}


def node_batches(cluster, node_id: int) -> dict[int, bytes]:
    directory = os.path.join(cluster.data_dir(node_id), METADATA_DIR)
    log = SegmentedLog.open(directory, LogConfig(background_flush=False))
    try:
        out, pos = {}, log.start_offset
        while pos < log.end_offset:
            for b in iter_batches(log.read(pos, 1 << 20)):
                out[b.base_offset] = b.tobytes()
                pos = b.next_offset
    finally:
        log.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--interval", type=float, default=4.0, help="mean seconds between faults")
    ap.add_argument("--writers", type=int, default=8, help="writes in flight")
    ap.add_argument("--no-disk-faults", dest="disk_faults", action="store_false")
    ap.add_argument("--topics", type=int, default=250, help="topics of 4 partitions created before the load")
    ap.add_argument("--whole-cluster-share", type=float, default=0.25,
                    help="fraction of faults that restart the whole quorum (rolling, all SIGTERM, all SIGKILL)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", help="write the summary here too")
    args = ap.parse_args()
    directory = tempfile.mkdtemp(prefix="kraft-soak-")
    soak = Soak(args, directory)
    soak.t0 = time.monotonic()
    soak.mount_disks()
    keep = False
    try:
        result = asyncio.run(soak.main())
    except SoakFailed as exc:
        keep = True
        result = {"error": str(exc), "lost": -1, "divergent": -1, "faults": soak.faults}
    finally:
        soak.cluster.close()
        if keep and soak.tmpfs:  # copy the nodes' data out of the tmpfs before it goes
            for i in soak.cluster.ids:
                shutil.copytree(soak.cluster.data_dir(i), f"{directory}/saved-node-{i}", dirs_exist_ok=True)
        soak.unmount_disks()
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    result["seed"] = args.seed
    print(json.dumps(result))
    if result.get("error"):
        print("\n".join(soak.log[-40:]), file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**result, "events": soak.log}, f, indent=1)
    ok = result["lost"] == 0 and result["divergent"] == 0 and result.get("images") == 1
    return 0 if ok and result.get("image_partitions", 0) >= 4 * args.topics else 1


if __name__ == "__main__":
    sys.exit(main())
