"""A coordinator's own write (``ProduceHandler.handle(..., internal=True)``) is appended at once
when no queued request writes to its partition, even while clients' compressed requests to
other partitions wait for their check: an EndTxn answer waits for the PrepareCommit record to
be durable and nothing else. Writes to one partition keep their arrival order."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os

from kraft.protocol import ProduceRequest
from kraft.records import Compression, build_batch
from kraft.server.broker_node import BrokerNode, broker_config, static_image

P = ProduceRequest


class HeldChecks:
    """An executor whose jobs run only when released: compressed requests stay queued."""

    def __init__(self):
        self.jobs = []

    def submit(self, fn, *args):
        fut = concurrent.futures.Future()
        self.jobs.append((fut, fn, args))
        return fut

    def release(self):
        for fut, fn, args in self.jobs:
            fut.set_result(fn(*args))
        self.jobs.clear()

    def shutdown(self, **_):
        pass


def request(topic, values, compression=Compression.NONE):
    return P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.Topic(name=topic, partition_data=[
        P.Topic.Partition(index=0, records=build_batch(values, keys=[b"k"] * len(values), compression=compression))])])


def codes(resp):
    return [(t.name, p.error_code, p.base_offset) for t in resp.responses for p in t.partition_responses]


async def _scenario(tmp_path):
    node = BrokerNode(broker_config(1, str(tmp_path / "logs")), cluster_id="cid")
    await node.start()
    try:
        node.publish(static_image(node.registration_record(), {"t": 1, "__transaction_state": 1}))
        produce = node.handlers.produce
        held = produce._executor = HeldChecks()
        # Incompressible records: past the size a request is checked on the loop at.
        values = [os.urandom(400) for _ in range(50)]
        queued = produce.handle(request("t", values, Compression.GZIP), 9, "")
        assert isinstance(queued, asyncio.Future) and not queued.done()

        # The coordinator's write to its own partition does not wait behind it ...
        own = produce.handle(request("__transaction_state", [b"prepare"]), 9, "", internal=True)
        assert not isinstance(own, asyncio.Future) and codes(own) == [("__transaction_state", 0, 0)]
        # ... but a write to a partition with a queued request keeps its place.
        after = produce.handle(request("t", [b"after"]), 9, "", internal=True)
        assert isinstance(after, asyncio.Future) and not after.done()
        held.release()
        first, second = await asyncio.wait_for(asyncio.gather(queued, after), 10)
        assert codes(first) == [("t", 0, 0)] and codes(second) == [("t", 0, 50)]
    finally:
        await node.shutdown()


def test_a_coordinator_write_passes_compressed_requests_to_other_partitions_only(tmp_path):
    asyncio.run(asyncio.wait_for(_scenario(tmp_path), 30))
