"""Helpers for tests that run real ``kraft server start`` processes."""

from __future__ import annotations

import asyncio
import os
import re
import time

from kraft.errors import KraftError
from kraft.log import LogConfig, SegmentedLog
from kraft.records import build_batch, iter_batches
from kraft.client.quorum import QuorumClient, QuorumWriter
from kraft.log.replicated_log import METADATA_DIR


def run(coro):
    return asyncio.run(coro)


async def describe(cluster, timeout: float = 30.0):
    client = QuorumClient([cluster.address(i) for i in cluster.controller_ids])
    try:
        return await client.describe(timeout)
    finally:
        await client.close()


async def write_batches(cluster, n_batches: int, per_batch: int = 10, tag: str = "r", deadline_s: float = 30.0):
    """Write and return [(base_offset, [values])] for every acknowledged batch."""
    client = QuorumClient([cluster.address(i) for i in cluster.controller_ids])
    writer = QuorumWriter(client)
    acked = []
    try:
        for b in range(n_batches):
            values = [f"{tag}-{b}-{i}".encode() for i in range(per_batch)]
            acked.append((await writer.write_through_failures(build_batch(values), deadline_s=deadline_s), values))
    finally:
        await client.close()
    return acked


def node_batches(cluster, node_id: int) -> dict[int, bytes]:
    """Every batch in a stopped node's metadata log, by base offset (raw bytes)."""
    directory = os.path.join(cluster.data_dir(node_id), METADATA_DIR)
    log = SegmentedLog.open(directory, LogConfig(background_flush=False))
    try:
        out, pos = {}, log.start_offset
        while pos < log.end_offset:
            data = log.read(pos, 1 << 20)
            for b in iter_batches(data):
                out[b.base_offset] = b.tobytes()
                pos = b.next_offset
    finally:
        log.close()
    return out


def node_values(batches: dict[int, bytes]) -> dict[int, bytes]:
    """offset -> value of every data record."""
    out = {}
    for raw in batches.values():
        for b in iter_batches(raw):
            if not b.is_control:
                for r in b:
                    out[r.offset] = r.value
    return out


_APPLIED = re.compile(r"applied up to offset (\d+), (\d+) records, digest ([0-9a-f]+)")


def applied_states(cluster) -> dict[int, tuple[int, int, str]]:
    """The last 'applied up to' line each node logged when it stopped cleanly."""
    states = {}
    for i in cluster.ids:
        with open(cluster.log_path(i)) as f:
            found = _APPLIED.findall(f.read())
        if found:
            off, n, digest = found[-1]
            states[i] = (int(off), int(n), digest)
    return states


def wait_caught_up(cluster, node_id: int, timeout: float = 30.0):
    """Describe until ``node_id``'s log end offset reaches the high watermark."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            d = run(describe(cluster, 5))
        except KraftError:
            continue
        eo = {v.replica_id: v.log_end_offset for v in d.voters}
        if eo.get(node_id, -1) >= d.high_watermark > 0:
            return d
        time.sleep(0.1)
    raise AssertionError(f"node {node_id} did not catch up within {timeout} s")
