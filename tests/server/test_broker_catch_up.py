"""A starting broker acts on metadata only once it has caught up with the metadata log's high
watermark (Kafka's initial catch-up), and judges strays only then, by topic id.

The bug this guards against: commits reach a restarted broker in chunks, and the broker
published the first chunk's image; every local partition of a topic not yet replayed was
renamed ``-stray`` and recreated empty (a whole cluster restart lost every acknowledged
record of a topic once the metadata log was a few thousand records long)."""

from __future__ import annotations

import asyncio
import os
import uuid

from kraft.broker.metadata_follower import InitialCatchUp
from kraft.broker.partition_logs import PartitionLogs
from kraft.log import LogConfig
from kraft.metadata import PartitionRecord, RegisterBrokerRecord, TopicRecord, encode_record
from kraft.records import build_batch, iter_batches
from kraft.server.broker_node import broker_config
from kraft.server.broker_role import BrokerRole

TOPICS = 40


def _tid(i: int) -> uuid.UUID:
    return uuid.UUID(int=1000 + i)


def _records() -> list:
    E = RegisterBrokerRecord.BrokerEndpoint
    out = [RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.UUID(int=1), broker_epoch=0,
                                end_points=[E(name="PLAINTEXT", host="h", port=1, security_protocol=0)],
                                features=[], rack=None, fenced=False)]
    for i in range(TOPICS):
        out.append(TopicRecord(name=f"t{i:02d}", topic_id=_tid(i)))
        for p in range(2):
            out.append(PartitionRecord(partition_id=p, topic_id=_tid(i), replicas=[1], isr=[1], removing_replicas=[],
                                       adding_replicas=[], leader=1, leader_epoch=0, partition_epoch=0))
    return out


def _chunks(records, per_batch: int) -> list:
    """Committed batches of ``per_batch`` records, as a ListenerCursor hands them over."""
    out, offset = [], 0
    for i in range(0, len(records), per_batch):
        part = records[i:i + per_batch]
        raw = build_batch([encode_record(r) for r in part], base_offset=offset, timestamp=0)
        out.append(list(iter_batches(raw)))
        offset += len(part)
    return out


def _local_logs(log_dir: str) -> None:
    """Every partition of every topic on disk with one record, as a previous run left them."""
    logs = PartitionLogs([log_dir], LogConfig(segment_bytes=1 << 20, max_batch_bytes=None))
    for i in range(TOPICS):
        for p in range(2):
            logs.create(f"t{i:02d}", p, _tid(i)).log.append(
                build_batch([b"kept"], base_offset=0, timestamp=0), leader_epoch=0)
    logs.close()


async def _accepts(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except ConnectionRefusedError:
        return False
    writer.close()
    return True


def test_catch_up_target_is_the_first_known_high_watermark():
    hw = {"v": -1}
    gate = InitialCatchUp(lambda: hw["v"])
    assert not gate.reached(50) and gate.target is None  # unknown: never caught up
    hw["v"] = 40
    assert not gate.reached(39) and gate.target == 40
    hw["v"] = 90  # the target stays what it was when first known
    assert gate.reached(40) and gate.done and gate.target == 40
    assert gate.reached(0)  # done stays done


def test_a_restarted_broker_publishes_nothing_until_caught_up_and_keeps_its_logs(tmp_path):
    log_dir = str(tmp_path / "logs")
    _local_logs(log_dir)
    records = _records()
    chunks = _chunks(records, 10)
    hw = {"v": -1}

    async def scenario():
        role = BrokerRole(broker_config(1, log_dir), "cluster", high_watermark=lambda: hw["v"])
        await role.start()
        try:
            lc = role.lifecycle
            assert lc.heartbeat_request(-1).want_fence
            role.follower.handle_commit(chunks[0])  # the high watermark is not known yet
            hw["v"] = len(records)  # now it is: everything must be applied before acting
            for chunk in chunks[1:-1]:
                role.follower.handle_commit(chunk)
                assert role.node.state.image.topics.by_id == {}, "acted on a partial metadata image"
                assert lc.heartbeat_request(role.follower.last_applied_offset).want_fence
            assert not os.path.exists(log_dir) or not [n for n in os.listdir(log_dir) if n.endswith("-stray")]
            assert not await _accepts(role.node.port()), "clients let in before the broker caught up"
            role.follower.handle_commit(chunks[-1])
            await asyncio.sleep(0.05)
            assert await _accepts(role.node.port())
            image = role.node.state.image
            assert len(image.topics.by_id) == TOPICS
            assert not lc.heartbeat_request(role.follower.last_applied_offset).want_fence
            for i in range(TOPICS):
                for p in range(2):
                    plog = role.node.logs.get(f"t{i:02d}", p)
                    assert plog is not None and plog.log.end_offset == 1, f"t{i:02d}-{p} lost its record"
        finally:
            await role.shutdown()

    asyncio.run(scenario())
    assert [n for n in os.listdir(log_dir) if n.endswith("-stray")] == []


def test_a_caught_up_broker_publishes_without_another_commit(tmp_path):
    """The target can be reached by what was applied before it was known (a commit then
    says nothing new): the broker still publishes."""
    log_dir = str(tmp_path / "logs")
    records = _records()
    hw = {"v": -1}

    async def scenario():
        role = BrokerRole(broker_config(1, log_dir), "cluster", high_watermark=lambda: hw["v"])
        await role.start()
        try:
            for chunk in _chunks(records, 25):
                role.follower.handle_commit(chunk)
            assert role.node.state.image.topics.by_id == {}
            hw["v"] = len(records)
            for _ in range(100):
                await asyncio.sleep(0.02)
                if role.catch_up.done:
                    break
            assert role.catch_up.done and len(role.node.state.image.topics.by_id) == TOPICS
        finally:
            await role.shutdown()

    asyncio.run(scenario())
