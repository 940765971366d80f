"""acks=all answers only for the leader epoch the records were appended in (Kafka's
DelayedProduce: ``checkEnoughReplicasReachOffset`` answers NOT_LEADER_OR_FOLLOWER once the
broker no longer leads). Found by tools/replication_checker.py: a leader paused past its
session appended queued batches when it woke, was told it had been replaced, truncated them
as a follower and then — its high watermark now following the new leader's — answered the
parked acks=all requests with success and offsets that hold other records."""

from __future__ import annotations

import asyncio
import os

from test_broker_handlers import BAR, Broker, produce, run

from kraft.errors import ErrorCode
from kraft.metadata import MetadataDelta, PartitionChangeRecord
from kraft.records import build_batch
from kraft.records.format import Compression

E = ErrorCode


def deposed(broker) -> None:
    """``bar``-0 (replicas 1 and 3, led here at epoch 0) is now led by broker 3."""
    d = MetadataDelta(broker.state.image)
    d.replay(PartitionChangeRecord(partition_id=0, topic_id=BAR, leader=3))
    broker.set_image(d.apply())


def test_a_parked_acks_all_write_is_not_acknowledged_by_the_high_watermark_of_a_later_leader(tmp_path):
    broker = Broker(tmp_path)
    try:
        async def go():
            parked = broker.call(produce(build_batch([b"appended-while-leader"]), topic="bar", acks=-1,
                                         timeout_ms=10_000), 9)
            assert asyncio.isfuture(parked) and not parked.done()  # broker 3 has not fetched it
            deposed(broker)
            plog = broker.logs.get("bar", 0)
            # As a follower it truncates its tail and fetches the new leader's records: its
            # HW (the leader's) and its flushed offset now cover the offset it answered for.
            plog.log.flush()
            plog.high_watermark = plog.log.end_offset
            broker.handlers.on_high_watermark(plog)
            broker.handlers.on_flushed(plog, plog.log.flushed_offset)
            return await asyncio.wait_for(parked, 5)
        part = run(go()).responses[0].partition_responses[0]
        assert part.error_code == E.NOT_LEADER_OR_FOLLOWER
    finally:
        broker.close()


def test_a_write_checked_off_the_loop_is_not_appended_once_the_broker_no_longer_leads(tmp_path):
    broker = Broker(tmp_path)
    try:
        async def go():
            # Compressed and too large to check on the loop (incompressible): inflated on the
            # worker thread, appended on a later loop turn.
            big = [os.urandom(1024) for _ in range(20)]
            pending = broker.call(produce(build_batch(big, compression=Compression.GZIP), topic="bar", acks=1), 9)
            assert asyncio.isfuture(pending)
            deposed(broker)
            return await pending
        part = run(go()).responses[0].partition_responses[0]
        assert part.error_code == E.NOT_LEADER_OR_FOLLOWER
        assert broker.logs.get("bar", 0).log.end_offset == 0  # nothing appended as a non-leader
    finally:
        broker.close()


def test_acks_all_still_completes_for_a_leader_that_kept_its_epoch(tmp_path):
    broker = Broker(tmp_path)
    try:
        async def go():
            parked = broker.call(produce(build_batch([b"ok"]), topic="bar", acks=-1, timeout_ms=10_000), 9)
            plog = broker.logs.get("bar", 0)
            plog.log.flush()
            plog.high_watermark = plog.log.end_offset  # broker 3 fetched it
            broker.handlers.on_high_watermark(plog)
            return await asyncio.wait_for(parked, 5)
        part = run(go()).responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (E.NONE, 0)
    finally:
        broker.close()


def test_a_write_committed_in_its_epoch_is_acknowledged_even_if_the_lease_lapsed_meanwhile(tmp_path):
    """Not serving (no controller heard from within the session) stops new appends, but the
    HW of the same leader epoch covering a parked write means the ISR has it: answering
    NOT_LEADER_OR_FOLLOWER would tell librdkafka "not persisted", and after an epoch bump it
    sends the records again (duplicates from an idempotent producer)."""
    broker = Broker(tmp_path)
    try:
        async def go():
            parked = broker.call(produce(build_batch([b"committed"]), topic="bar", acks=-1, timeout_ms=10_000), 9)
            broker.state.is_serving = lambda: False
            plog = broker.logs.get("bar", 0)
            plog.log.flush()
            plog.high_watermark = plog.log.end_offset
            broker.handlers.on_high_watermark(plog)
            return await asyncio.wait_for(parked, 5)
        part = run(go()).responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (E.NONE, 0)
    finally:
        broker.close()
