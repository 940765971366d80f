"""Partition logs share their log dir's flusher threads: many partitions, a bounded number of
threads, and the durability contract unchanged (a flushed offset is reported only after an
fdatasync that covers it; an acks=all record survives SIGKILL of the broker)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid

import pytest

from kraft.broker.partition_logs import PartitionLogs
from kraft.client.consumer import Consumer
from kraft.client.node_client import NodeClient
from kraft.log import LogConfig, files
from kraft.protocol import ProduceRequest
from kraft.records import build_batch
from tests.broker.broker_helpers import BrokerProcess

TID = uuid.UUID(int=0xABC)


def _wait(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("partitions", [300, pytest.param(2000, marks=pytest.mark.slow)])
def test_many_partitions_use_a_bounded_number_of_flusher_threads(tmp_path, partitions):
    before = threading.active_count()
    logs = PartitionLogs([str(tmp_path / "a"), str(tmp_path / "b")], LogConfig(append_linger_ms=5.0),
                         flusher_threads=2)
    try:
        plogs = [logs.create("many", p, TID) for p in range(partitions)]
        for plog in plogs:
            plog.log.append(bytearray(build_batch([b"x"])), leader_epoch=0)
            plog.log.request_flush()
        _wait(lambda: all(p.log.flushed_offset == 1 for p in plogs))
        flushers = [t for t in threading.enumerate() if t.name.startswith("kraft-flusher")]
        assert len(flushers) == 4  # two per log dir, not one per partition
        assert threading.active_count() - before <= 4 + 1  # + the directory deleter
    finally:
        logs.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("kraft-flusher") and t.is_alive()]


def test_a_flushed_offset_is_reported_only_after_an_fdatasync_covering_it(tmp_path, monkeypatch):
    synced: dict[str, int] = {}  # segment path -> file size when its last fdatasync began
    lock = threading.Lock()
    real = files.fdatasync

    def recording_fdatasync(fd, path):
        size = os.fstat(fd).st_size
        real(fd, path)
        with lock:
            synced[path] = max(size, synced.get(path, 0))
    monkeypatch.setattr(files, "fdatasync", recording_fdatasync)
    ends: dict = {}  # (partition, end offset) -> segment bytes that hold it
    violations, reported = [], []

    def on_flushed(plog, offset):
        with lock:
            need = ends.get((plog.partition, offset))
            have = synced.get(plog.log.segments[-1].path, 0)
            reported.append((plog.partition, offset))
            if need is None or have < need:
                violations.append((plog.partition, offset, need, have))
    logs = PartitionLogs([str(tmp_path / "d")], LogConfig(append_linger_ms=2.0), on_flushed=on_flushed,
                         flusher_threads=2)
    try:
        plogs = [logs.create("t", p, TID) for p in range(50)]
        for round_ in range(20):
            for plog in plogs:
                with lock:
                    plog.log.append(bytearray(build_batch([b"r%d" % round_] * 3)), leader_epoch=0)
                    ends[(plog.partition, plog.log.end_offset)] = plog.log.segments[-1].size
                if round_ % 3 == 0:
                    plog.log.request_flush()
        _wait(lambda: all(p.log.flushed_offset == 60 for p in plogs))
    finally:
        logs.close()
    assert violations == []
    assert {p for p, o in reported if o == 60} == set(range(50))


async def _produce_each(bootstrap, topic, partitions):
    host, port = bootstrap.split(":")
    client = NodeClient(host, int(port), request_timeout_ms=30_000)
    P = ProduceRequest
    try:
        resp = await client.request(P(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[P.Topic(
            name=topic, partition_data=[P.Topic.Partition(index=p, records=build_batch([b"p%d" % p]))
                                        for p in range(partitions)])]), 9)
        return {r.index: r.error_code for r in resp.responses[0].partition_responses}
    finally:
        await client.close()


async def _read_each(bootstrap, topic, partitions):
    got = {}
    async with Consumer(bootstrap, max_wait_ms=50) as c:
        await c.assign([(topic, p) for p in range(partitions)])
        await c.seek_to_beginning()
        for _ in range(100):
            for part in await c.poll(timeout_ms=1000):
                got[part.partition] = part.values()
            if len(got) == partitions:
                break
    return got


def test_an_acknowledged_record_on_each_of_many_partitions_survives_sigkill(tmp_path):
    n = 300
    log_dir = str(tmp_path / "logs")
    with BrokerProcess(log_dir, {"many": n}) as b:
        codes = asyncio.run(_produce_each(b.bootstrap, "many", n))
        assert codes == {p: 0 for p in range(n)}
        b.kill()
    with BrokerProcess(log_dir, {"many": n}) as b:
        got = asyncio.run(_read_each(b.bootstrap, "many", n))
    assert got == {p: [b"p%d" % p] for p in range(n)}
