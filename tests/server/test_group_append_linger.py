"""The group coordinator's write batching (``group.coordinator.append.linger.ms``, Kafka's
coordinator runtime, default 5 ms), on a running loop with a stand-in shard and produce path:
appends of separate requests within the linger land in one batch, written once the first has
waited the linger and not before; transactional writes are not held back; a full batch is
written at once; 0 writes at the end of the loop turn; close cancels a pending linger.
What a broken batching would violate: several batches for one linger (no batching), a write
before the linger (no wait), a transactional commit held back, a write after close."""

from __future__ import annotations

import asyncio
import struct
import time

from kraft.config import INT_SETTINGS, STR_SETTINGS
from kraft.coordinator.group_records import offset_commit_record
from kraft.coordinator.shard_state import Append
from kraft.protocol import ProduceResponse
from kraft.server.group_driver import COALESCE_RECORDS, GroupDriver, _Loaded

P = 7  # the __consumer_offsets partition of the stand-in shard


class Shard:
    partition = P

    def __init__(self):
        self.appends = []

    def take_appends(self):
        out, self.appends = self.appends, []
        return out

    def unload(self):
        pass


class Produce:
    """Records each batch the driver appends: (loop time, records, transactional)."""

    def __init__(self):
        self.batches = []

    def handle(self, req, version, listener, internal=False):
        batch = req.topic_data[0].partition_data[0].records
        (attributes,) = struct.unpack_from(">h", batch, 21)
        (count,) = struct.unpack_from(">i", batch, 57)
        self.batches.append((time.monotonic(), count, bool(attributes & 0x10)))
        R = ProduceResponse
        return R(responses=[R.Topic(name=req.topic_data[0].name, partition_responses=[
            R.Topic.Partition(index=P, error_code=0)])])


def make(linger_ms: int):
    values = {k: v[0] for k, v in INT_SETTINGS.items()}
    values.update(STR_SETTINGS)
    values["group.coordinator.append.linger.ms"] = linger_ms
    produce = Produce()
    driver = GroupDriver(None, produce, values)
    shard = Shard()
    loaded = driver.shards[P] = _Loaded(shard, 0, None)
    loaded.ready = True
    return driver, shard, produce


def commit(shard, driver, n: int = 1, producer_id: int = -1, done=None):
    """A request's appends: ``n`` offset records, then the driver drains the shard."""
    records = [offset_commit_record("g", "t", i, 42, 0, "", 0) for i in range(n)]
    shard.appends.append(Append(records, on_durable=(lambda: done.append(n)) if done is not None else None,
                                producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1))
    driver._drain(P)


def test_appends_within_the_linger_share_one_batch_written_after_the_linger():
    async def run():
        driver, shard, produce = make(80)
        done: list = []
        start = time.monotonic()
        for _ in range(3):  # three requests, each in its own loop turn
            commit(shard, driver, 2, done=done)
            await asyncio.sleep(0.005)
        assert produce.batches == []  # nothing written before the linger is over
        await asyncio.sleep(0.15)
        assert [(n, txn) for _, n, txn in produce.batches] == [(6, False)]
        assert produce.batches[0][0] - start >= 0.075  # held for the linger, from the first append
        assert done == [2, 2, 2]  # every request answered once the batch is durable
        driver.close()
    asyncio.run(run())


def written_within(linger_ms: int, wait_s: float, *commits) -> list:
    """(records, transactional) of the batches written ``wait_s`` after ``commits`` (keyword
    dicts for ``commit``) were queued in one turn, with the given linger."""
    async def run():
        driver, shard, produce = make(linger_ms)
        for kwargs in commits:
            commit(shard, driver, **kwargs)
        await asyncio.sleep(wait_s)
        driver.close()
        return [(n, txn) for _, n, txn in produce.batches]
    return asyncio.run(run())


def test_a_transactional_append_is_not_held_back():
    # a loop turn or two, far less than the linger: written at once, the transactional one
    # alone in a batch of its producer
    batches = written_within(1000, 0.02, dict(n=3), dict(n=1, producer_id=12))
    assert sorted(batches) == [(1, True), (3, False)]


def test_a_full_batch_is_written_without_waiting():
    assert [n for n, _ in written_within(1000, 0.02, dict(n=COALESCE_RECORDS))] == [COALESCE_RECORDS]


def test_no_linger_writes_at_the_end_of_the_loop_turn():
    async def run():
        driver, shard, produce = make(0)
        commit(shard, driver, 2)
        commit(shard, driver, 1)  # the same turn: the same batch
        assert produce.batches == []  # not inside the request's own call
        await asyncio.sleep(0)
        assert [n for _, n, _ in produce.batches] == [3]
        driver.close()
    asyncio.run(run())


def test_close_cancels_a_pending_linger():
    async def run():
        driver, shard, produce = make(30)
        commit(shard, driver, 1)
        driver.close()
        await asyncio.sleep(0.08)
        assert produce.batches == []
    asyncio.run(run())
