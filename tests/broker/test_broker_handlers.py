"""The broker's client request handlers over a MetadataImage and real partition logs, without
a network: the rules of Kafka's KafkaApis / ReplicaManager / Partition for RF 1 (leader and
epoch checks, size limits, high watermark, fetch parking, timestamps)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from types import SimpleNamespace

import pytest

from kraft.broker.broker_state import BrokerLimits, BrokerState
from kraft.broker.handlers import BrokerHandlers
from kraft.broker.produce_handler import INLINE_COMPRESSED
from kraft.broker.image_publisher import publish_image
from kraft.broker.partition_logs import PartitionLogs
from kraft.errors import ErrorCode
from kraft.log import LogConfig
from kraft.metadata import (ConfigRecord, MetadataDelta, PartitionChangeRecord, PartitionRecord,
                            RegisterBrokerRecord, TopicRecord)
from kraft.metadata.image import EMPTY_IMAGE
from kraft.protocol import (EncodedParts, FetchRequest, ListOffsetsRequest, MetadataRequest,
                            OffsetForLeaderEpochRequest, ProduceRequest, decode_response,
                            encode_response_parts)
from kraft.protocol.headers import RequestHeader
from kraft.records import build_batch, iter_batches
from kraft.records.format import Compression

FOO, BAR = uuid.UUID(int=0xF00), uuid.UUID(int=0xBA2)
E = ErrorCode


def _broker(bid, fenced=False):
    return RegisterBrokerRecord(broker_id=bid, incarnation_id=uuid.UUID(int=bid), broker_epoch=1, end_points=[
        RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host=f"h{bid}", port=9000 + bid)], rack=f"r{bid}",
        fenced=fenced)


def _image():
    d = MetadataDelta(EMPTY_IMAGE)
    for b in (1, 2):
        d.replay(_broker(b))
    d.replay(_broker(3, fenced=True))
    d.replay(TopicRecord(name="foo", topic_id=FOO))
    d.replay(PartitionRecord(partition_id=0, topic_id=FOO, replicas=[1], isr=[1], leader=1, leader_epoch=5,
                             partition_epoch=0))
    d.replay(PartitionRecord(partition_id=1, topic_id=FOO, replicas=[2, 1], isr=[2, 1], leader=2, leader_epoch=3,
                             partition_epoch=0))
    d.replay(TopicRecord(name="bar", topic_id=BAR))  # RF 2 led here: the HW waits for a follower
    d.replay(PartitionRecord(partition_id=0, topic_id=BAR, replicas=[1, 3], isr=[1, 3], leader=1, leader_epoch=0,
                             partition_epoch=0))
    return d.apply()


class Broker:
    def __init__(self, tmp_path, **limits):
        self.logs = PartitionLogs([str(tmp_path)], LogConfig(append_linger_ms=0.0))
        self.state = BrokerState(1, self.logs, cluster_id="cid", limits=BrokerLimits(**limits))
        # The broker's clock stands still, near the wall clock writers stamp records with (records
        # more than message.timestamp.after.max.ms ahead of it are refused, as in Kafka).
        self.now = now = int(time.time() * 1000)
        self.handlers = BrokerHandlers(self.state, clock_ms=lambda: now)
        image = _image()
        publish_image(self.logs, EMPTY_IMAGE, image, 1)
        self.state.image = image
        self.logs.on_flushed = None

    def set_image(self, image):
        publish_image(self.logs, self.state.image, image, 1)
        self.state.image = image

    def call(self, request, version, listener="PLAINTEXT"):
        ctx = SimpleNamespace(header=SimpleNamespace(api_version=version), listener=listener)
        return self.handlers.handle(ctx, request)

    def close(self):
        self.handlers.close()
        self.logs.close()


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def produce(records, *, topic="foo", partition=0, acks=1, timeout_ms=1000):
    P = ProduceRequest
    return P(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        P.Topic(name=topic, partition_data=[P.Topic.Partition(index=partition, records=records)])])


def fetch(offset=0, *, topic="foo", partition=0, epoch=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
          partition_max_bytes=1 << 20, topic_id=None):
    F = FetchRequest
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[F.Topic(topic=topic, topic_id=topic_id, partitions=[
                 F.Topic.Partition(partition=partition, current_leader_epoch=epoch, fetch_offset=offset,
                                   partition_max_bytes=partition_max_bytes)])], forgotten_topics_data=[])


def decoded(resp, api_key=1, version=11):
    """A Fetch answer as the client would decode it (EncodedParts go through the framing)."""
    if isinstance(resp, EncodedParts):
        frame = b"".join(bytes(p) for p in encode_response_parts(RequestHeader(api_key, version, 7, "c"), api_key,
                                                                 version, resp))
        return decode_response(frame[4:], api_key, version)[1]
    return resp


def values(records):
    return [r.value for b in iter_batches(bytes(records)) for r in b]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 20))


# --- Metadata -------------------------------------------------------------------------------


def test_metadata_names_a_controller_it_lists_and_never_lists_no_broker(broker):
    """librdkafka waits for a named controller it has no address for, and takes an empty
    broker list as a failed request: either way an admin call at cluster start waited a
    minute. The answer names a listed broker and lists at least the one answering."""
    req = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    broker.state.controller_id = 7  # not registered
    assert broker.call(req, 12).controller_id == 1
    d = MetadataDelta(EMPTY_IMAGE)
    d.replay(_broker(1, fenced=True))
    d.replay(_broker(2, fenced=True))
    broker.set_image(d.apply())
    broker.state.is_serving = lambda: False  # registered, still fenced
    resp = broker.call(req, 12)
    assert [(b.node_id, b.host) for b in resp.brokers] == [(1, "h1")] and resp.controller_id == 1
    broker.state.is_serving = lambda: True  # serving, no broker unfenced in the image yet: itself
    assert [b.node_id for b in broker.call(req, 12).brokers] == [1]


@pytest.mark.parametrize("version", [0, 1, 4, 9, 12])
def test_metadata_lists_unfenced_brokers_on_the_listener_and_every_topic(broker, version):
    req = MetadataRequest(topics=[] if version == 0 else None, allow_auto_topic_creation=False)
    resp = broker.call(req, version)
    assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(1, "h1", 9001), (2, "h2", 9002)]
    assert (resp.cluster_id, resp.controller_id) == ("cid", 1)
    topics = {t.name: t for t in resp.topics}
    assert sorted(topics) == ["bar", "foo"]
    foo = {p.partition_index: p for p in topics["foo"].partitions}
    assert (foo[1].leader_id, foo[1].leader_epoch, foo[1].replica_nodes, foo[1].isr_nodes) == (2, 3, [2, 1], [2, 1])
    bar = topics["bar"].partitions[0]
    assert bar.offline_replicas == [3]  # fenced broker 3
    assert topics["foo"].topic_id == FOO


def test_metadata_unknown_topic_and_other_listener(broker):
    resp = broker.call(MetadataRequest(topics=[MetadataRequest.Topic(name="nope")]), 12)
    assert [(t.name, t.error_code) for t in resp.topics] == [("nope", E.UNKNOWN_TOPIC_OR_PARTITION)]
    resp = broker.call(MetadataRequest(topics=[MetadataRequest.Topic(name=None, topic_id=uuid.UUID(int=9))]), 12)
    assert resp.topics[0].error_code == E.UNKNOWN_TOPIC_ID
    resp = broker.call(MetadataRequest(topics=None), 12, listener="OTHER")
    assert resp.brokers == []
    assert all(p.error_code == E.LEADER_NOT_AVAILABLE and p.leader_id == -1
               for t in resp.topics for p in t.partitions)


# --- Produce --------------------------------------------------------------------------------


def test_produce_appends_and_answers_the_base_offset(broker):
    r1 = broker.call(produce(build_batch([b"a", b"b"])), 9)
    r2 = broker.call(produce(build_batch([b"c"])), 9)
    p1, p2 = r1.responses[0].partition_responses[0], r2.responses[0].partition_responses[0]
    assert (p1.error_code, p1.base_offset, p2.base_offset, p2.log_start_offset) == (0, 0, 2, 0)
    assert p1.log_append_time_ms == -1
    plog = broker.logs.get("foo", 0)
    assert plog.high_watermark == 3 and plog.log.latest_epoch == 5  # leader epoch patched into the batch
    assert values(broker.logs.get("foo", 0).log.read(0, 1 << 20)) == [b"a", b"b", b"c"]


def test_produce_acks_zero_gets_no_answer_but_appends(broker):
    assert broker.call(produce(build_batch([b"a"]), acks=0), 9) is None
    assert broker.logs.get("foo", 0).log.end_offset == 1


def test_a_failed_acks_zero_produce_closes_the_connection(broker):
    """Kafka's closeConnection: the client's only way to hear of NOT_LEADER and the like."""
    from kraft.protocol.framing import CLOSE_CONNECTION
    assert broker.call(produce(build_batch([b"a"]), partition=1, acks=0), 9) is CLOSE_CONNECTION


def test_produce_to_a_partition_led_elsewhere_names_the_leader(broker):
    resp = broker.call(produce(build_batch([b"a"]), partition=1), 10)
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == E.NOT_LEADER_OR_FOLLOWER
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 3)
    assert [(e.node_id, e.host, e.port) for e in resp.node_endpoints] == [(2, "h2", 9002)]
    assert broker.logs.get("foo", 1).log.end_offset == 0


@pytest.mark.parametrize("case,code", [
    ("unknown topic", E.UNKNOWN_TOPIC_OR_PARTITION), ("bad acks", E.INVALID_REQUIRED_ACKS),
    ("bad crc", E.CORRUPT_MESSAGE), ("too large", E.MESSAGE_TOO_LARGE)])
def test_produce_errors_leave_the_log_unchanged(tmp_path, case, code):
    b = Broker(tmp_path, message_max_bytes=200)
    try:
        batch = bytearray(build_batch([b"x"]))
        req = produce(batch)
        if case == "unknown topic":
            req = produce(batch, topic="nope")
        elif case == "bad acks":
            req = produce(batch, acks=2)
        elif case == "bad crc":
            batch[-1] ^= 1
            req = produce(batch)
        else:
            req = produce(build_batch([b"y" * 300]))
        p = b.call(req, 9).responses[0].partition_responses[0]
        assert p.error_code == code
        assert b.logs.get("foo", 0).log.end_offset == 0
    finally:
        b.close()


def test_compressed_produce_is_checked_off_the_loop_and_keeps_arrival_order(broker):
    big = [os.urandom(1024) for _ in range(20)]  # incompressible: 20 KiB compressed, past INLINE_COMPRESSED

    async def go():
        first = broker.call(produce(build_batch(big, compression=Compression.GZIP)), 9)
        second = broker.call(produce(build_batch([b"z1", b"z2"], compression=Compression.GZIP)), 9)
        third = broker.call(produce(build_batch([b"plain"])), 9)
        # the second would be checked on the loop, but not past the queued first; the third queues too
        assert asyncio.isfuture(first) and asyncio.isfuture(second) and asyncio.isfuture(third)
        return await first, await second, await third
    r1, r2, r3 = run(go())
    assert [r.responses[0].partition_responses[0].base_offset for r in (r1, r2, r3)] == [0, 20, 22]
    assert values(broker.logs.get("foo", 0).log.read(0, 1 << 20)) == big + [b"z1", b"z2", b"plain"]


def test_a_small_compressed_produce_is_checked_on_the_loop_unless_it_decompresses_to_much_more(broker):
    """Two thread hops cost more than checking a few KiB: a small compressed request is answered
    at once. A small one that decompresses past INLINE_DECOMPRESSED (a zip bomb, or just very
    compressible records) still goes to the worker, so the loop never decompresses much."""
    async def go():
        small = broker.call(produce(build_batch([b"s1", b"s2"], compression=Compression.LZ4)), 9)
        assert not asyncio.isfuture(small)
        packed = build_batch([b"\0" * 65536 for _ in range(8)], compression=Compression.LZ4)  # 512 KiB
        assert len(packed) <= INLINE_COMPRESSED
        large = broker.call(produce(packed), 9)
        assert asyncio.isfuture(large)
        return small, await large
    small, large = run(go())
    assert small.responses[0].partition_responses[0].error_code == 0
    assert large.responses[0].partition_responses[0].error_code == 0
    assert large.responses[0].partition_responses[0].base_offset == 2


def test_acks_all_waits_for_the_fsync_and_rf2_times_out_without_a_follower(broker):
    async def go():
        ok = broker.call(produce(build_batch([b"a"]), acks=-1), 9)
        stuck = broker.call(produce(build_batch([b"b"]), topic="bar", acks=-1, timeout_ms=50), 9)
        return await ok, await stuck
    async def wired():  # on_flushed reaches the handler through the loop, as BrokerNode wires it
        loop = asyncio.get_running_loop()
        for plog in broker.logs:
            plog.log.set_flush_listener(
                lambda off, p=plog: loop.call_soon_threadsafe(broker.handlers.on_flushed, p, off))
        return await go()
    ok, stuck = run(wired())
    assert ok.responses[0].partition_responses[0].error_code == 0
    assert broker.logs.get("foo", 0).log.flushed_offset >= 1
    assert stuck.responses[0].partition_responses[0].error_code == E.REQUEST_TIMED_OUT
    bar = broker.logs.get("bar", 0)
    assert bar.log.end_offset == 1 and bar.high_watermark == 0  # appended, not yet replicated


def test_acks_all_wait_fails_once_leadership_moved_even_if_the_hw_covers_its_offsets(broker):
    """A deposed leader must not acknowledge: its waiting offsets may be truncated and refilled
    with the new leader's records, and its HW (now the new leader's) then covers those (Kafka's
    checkEnoughReplicasReachOffset answers NOT_LEADER_OR_FOLLOWER). Found by the replication
    simulator (seeds 36, 39: a success for a record that was not in the log)."""
    async def go():
        waiting = broker.call(produce(build_batch([b"mine"]), topic="bar", acks=-1, timeout_ms=10_000), 9)
        assert asyncio.isfuture(waiting)  # replica 3 has not fetched: the HW is 0
        d = MetadataDelta(broker.state.image)  # broker 3 takes over in leader epoch 1
        d.replay(PartitionChangeRecord(partition_id=0, topic_id=BAR, leader=3, isr=[3]))
        broker.set_image(d.apply())
        bar = broker.logs.get("bar", 0)
        bar.log.truncate_to(0)  # as a follower: the leader diverged at 0
        bar.log.append(build_batch([b"theirs"], base_offset=0, partition_leader_epoch=1), assign_offsets=False)
        bar.log.flush()
        bar.high_watermark = 1  # the new leader's HW covers offset 0: "theirs"
        broker.handlers.on_flushed(bar, bar.log.flushed_offset)
        return await waiting
    resp = run(go())
    assert resp.responses[0].partition_responses[0].error_code == E.NOT_LEADER_OR_FOLLOWER


def _moved(image, leader, *, replicas=(3,), isr=(3,)):
    """``bar``-0 led by ``leader`` in a new leader epoch (a reassignment completing, a failover)."""
    d = MetadataDelta(image)
    d.replay(PartitionChangeRecord(partition_id=0, topic_id=BAR, leader=leader, replicas=list(replicas),
                                   isr=list(isr)))
    return d.apply()


@pytest.mark.parametrize("replicas", [(3,), (3, 1)], ids=["moved-away", "now-a-follower"])
def test_an_acks_all_wait_is_answered_not_leader_when_leadership_moves(broker, replicas):
    """Kafka's DelayedProduce: a write waiting for the ISR on a partition this broker stops
    leading (the reassignment moved it away and its log is deleted, or it became a follower)
    is answered NOT_LEADER_OR_FOLLOWER at once, never left to time out, and never acknowledged
    by the follower-side HW later."""
    async def go():
        waiting = broker.call(produce(build_batch([b"b"]), topic="bar", acks=-1, timeout_ms=10_000), 11)
        await asyncio.sleep(0)
        assert not waiting.done()
        assert broker.handlers.produce.release_unled() == 0  # same image: still led, still waiting
        broker.set_image(_moved(broker.state.image, 3, replicas=replicas))
        assert broker.handlers.produce.release_unled() == 1
        return await asyncio.wait_for(waiting, 1)
    p = run(go()).responses[0].partition_responses[0]
    assert p.error_code == E.NOT_LEADER_OR_FOLLOWER and p.base_offset == -1
    assert p.current_leader.leader_id == 3
    assert (broker.logs.get("bar", 0) is None) == (1 not in replicas)


def test_log_append_time_topic_stamps_the_batch(broker):
    d = MetadataDelta(broker.state.image)
    d.replay(ConfigRecord(resource_type=2, resource_name="foo", name="message.timestamp.type", value="LogAppendTime"))
    broker.set_image(d.apply())
    p = broker.call(produce(build_batch([b"a", b"b"], timestamp=5)), 9).responses[0].partition_responses[0]
    assert p.log_append_time_ms == broker.now
    [batch] = list(iter_batches(broker.logs.get("foo", 0).log.read(0, 1 << 20), validate=True))
    assert [r.timestamp for r in batch] == [broker.now, broker.now]


# --- Fetch ----------------------------------------------------------------------------------


def test_fetch_returns_zero_copy_views_of_the_segment(broker):
    broker.call(produce(build_batch([b"a", b"b"])), 9)
    broker.call(produce(build_batch([b"c"])), 9)
    resp = broker.call(fetch(1), 11)
    assert isinstance(resp, EncodedParts) and any(isinstance(p, memoryview) for p in resp)
    p = decoded(resp).responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (0, 3, 3, 0)
    assert values(p.records) == [b"a", b"b", b"c"]  # whole batches: the one holding offset 1 first


@pytest.mark.parametrize("version", [4, 11, 12, 13])
def test_fetch_encodes_every_version_with_spliced_records(broker, version):
    broker.call(produce(build_batch([b"a"])), 9)
    req = fetch(0, topic_id=FOO) if version >= 13 else fetch(0)
    resp = decoded(broker.call(req, version), version=version)
    assert values(resp.responses[0].partitions[0].records) == [b"a"]


def test_fetch_errors(broker):
    broker.call(produce(build_batch([b"a"])), 9)
    code = lambda req, v=11: decoded(broker.call(req, v)).responses[0].partitions[0].error_code  # noqa: E731
    assert code(fetch(5)) == E.OFFSET_OUT_OF_RANGE
    assert code(fetch(0, epoch=4)) == E.FENCED_LEADER_EPOCH
    assert code(fetch(0, epoch=6)) == E.UNKNOWN_LEADER_EPOCH
    assert code(fetch(0, epoch=5)) == E.NONE
    # Partition 1 is led by broker 2 and followed here: a consumer's Fetch before v11 goes to the
    # leader only; from v11 (client metadata, KIP-392) a follower answers it too
    assert code(fetch(0, partition=1), 10) == E.NOT_LEADER_OR_FOLLOWER
    assert code(fetch(0, partition=1)) == E.NONE
    assert code(fetch(0, partition=1, epoch=2)) == E.FENCED_LEADER_EPOCH  # the epoch is checked alike
    assert code(fetch(0, topic="nope")) == E.UNKNOWN_TOPIC_OR_PARTITION
    assert code(fetch(0, topic_id=uuid.UUID(int=99)), 13) == E.UNKNOWN_TOPIC_ID
    incremental = fetch(0)
    incremental.session_id, incremental.session_epoch = 42, 1
    assert broker.call(incremental, 11).error_code == E.FETCH_SESSION_ID_NOT_FOUND


def test_fetch_limits_bytes_per_partition_and_in_all(broker):
    for i in range(3):
        broker.call(produce(build_batch([b"v%d" % i])), 9)
    size = len(build_batch([b"v0"]))
    p = decoded(broker.call(fetch(0, partition_max_bytes=size * 2), 11)).responses[0].partitions[0]
    assert values(p.records) == [b"v0", b"v1"]
    p = decoded(broker.call(fetch(0, max_bytes=1), 11)).responses[0].partitions[0]
    assert values(p.records) == [b"v0"]  # the first batch even beyond max_bytes


def test_fetch_sees_only_what_is_below_the_high_watermark(broker):
    broker.call(produce(build_batch([b"a"]), topic="bar"), 9)
    p = decoded(broker.call(fetch(0, topic="bar"), 11)).responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, len(p.records or b"")) == (0, 0, 0)


def test_parked_fetch_answers_when_a_produce_arrives(broker):
    async def go():
        parked = broker.call(fetch(0, max_wait_ms=10_000, min_bytes=1), 11)
        assert asyncio.isfuture(parked) and not parked.done()
        broker.call(produce(build_batch([b"late"])), 9)
        return decoded(await parked)
    assert values(run(go()).responses[0].partitions[0].records) == [b"late"]


def test_parked_fetch_answers_empty_at_max_wait(broker):
    async def go():
        return decoded(await broker.call(fetch(0, max_wait_ms=20, min_bytes=1), 11))
    p = run(go()).responses[0].partitions[0]
    assert (p.error_code, len(p.records or b"")) == (0, 0)


def test_parked_fetch_sees_a_leadership_change(broker):
    async def go():
        parked = broker.call(fetch(0, max_wait_ms=10_000, min_bytes=1, epoch=5), 11)
        d = MetadataDelta(broker.state.image)
        d.replay(PartitionChangeRecord(partition_id=0, topic_id=FOO, leader=2))
        broker.set_image(d.apply())
        broker.handlers.fetch.wake(broker.logs.get("foo", 0))
        return decoded(await parked)
    assert run(go()).responses[0].partitions[0].error_code in (E.NOT_LEADER_OR_FOLLOWER, E.FENCED_LEADER_EPOCH)


# --- ListOffsets and OffsetForLeaderEpoch ---------------------------------------------------


def list_offsets(ts, partition=0, epoch=-1):
    L = ListOffsetsRequest
    return L(replica_id=-1, isolation_level=0, topics=[L.Topic(name="foo", partitions=[
        L.Topic.Partition(partition_index=partition, current_leader_epoch=epoch, timestamp=ts)])])


def test_list_offsets_earliest_latest_by_timestamp_and_max(broker):
    broker.call(produce(build_batch([b"a", b"b"], timestamps=[100, 300])), 9)
    broker.call(produce(build_batch([b"c"], timestamp=200)), 9)
    got = lambda ts, v=8: broker.call(list_offsets(ts), v).topics[0].partitions[0]  # noqa: E731
    assert (got(-2).offset, got(-1).offset, got(-1).leader_epoch) == (0, 3, 5)
    assert (got(150).timestamp, got(150).offset) == (300, 1)
    assert (got(250).timestamp, got(250).offset) == (300, 1)
    assert (got(301).offset, got(301).timestamp) == (-1, -1)
    assert (got(-3).timestamp, got(-3).offset) == (300, 1)
    assert broker.call(list_offsets(-1, partition=1), 8).topics[0].partitions[0].error_code == \
        E.NOT_LEADER_OR_FOLLOWER
    assert broker.call(list_offsets(-1, epoch=9), 8).topics[0].partitions[0].error_code == E.UNKNOWN_LEADER_EPOCH


def test_offset_for_leader_epoch_answers_from_the_epoch_cache(broker):
    broker.call(produce(build_batch([b"a", b"b"])), 9)
    O = OffsetForLeaderEpochRequest

    def ask(epoch, current=-1):
        req = O(replica_id=-1, topics=[O.Topic(topic="foo", partitions=[
            O.Topic.Partition(partition=0, current_leader_epoch=current, leader_epoch=epoch)])])
        return broker.call(req, 4).topics[0].partitions[0]
    p = ask(5)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 5, 2)
    p = ask(3)  # before the first epoch: Kafka answers (requested epoch, start of the first one)
    assert (p.leader_epoch, p.end_offset) == (3, 0)
    p = ask(6)  # above every epoch: undefined
    assert (p.leader_epoch, p.end_offset) == (-1, -1)
    assert ask(5, current=4).error_code == E.FENCED_LEADER_EPOCH


def test_a_decompression_bomb_is_refused_off_the_loop_and_the_log_is_unchanged(tmp_path):
    from kraft.testing.hostile import gzip_bomb_batch
    b = Broker(tmp_path, max_decompressed_bytes=1 << 20)
    try:
        async def go():
            fut = b.call(produce(gzip_bomb_batch(8 << 20)), 9)
            assert asyncio.isfuture(fut)  # checked on the worker thread, not inline
            return await fut
        p = run(go()).responses[0].partition_responses[0]
        assert p.error_code == E.RECORD_LIST_TOO_LARGE
        assert b.logs.get("foo", 0).log.end_offset == 0
    finally:
        b.close()


def test_api_versions_at_an_unknown_version_is_answered_with_the_supported_range(broker):
    from kraft.protocol import ApiVersionsRequest
    resp = broker.call(ApiVersionsRequest(), 9)
    assert resp.error_code == E.UNSUPPORTED_VERSION
    assert [(a.api_key, a.min_version, a.max_version) for a in resp.api_keys] == [(18, 0, 4)]


@pytest.mark.parametrize("version", [11, 12, 13, 16])
def test_fetch_of_a_topics_partitions_apart_in_the_request_decodes_with_every_record(broker, version):
    """A Fetch whose partitions of one topic are not next to each other (a fetch session's
    order once leadership moved, a client's own order): the answer groups them by topic, and
    every partition's records must still land in its own field (the answer was cut at the
    wrong places and no client could decode it)."""
    d = MetadataDelta(broker.state.image)
    d.replay(PartitionRecord(partition_id=2, topic_id=FOO, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                             partition_epoch=0))
    broker.set_image(d.apply())
    d = MetadataDelta(broker.state.image)
    d.replay(PartitionRecord(partition_id=0, topic_id=BAR, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                             partition_epoch=1))
    broker.set_image(d.apply())  # bar-0 without its fenced follower: its high watermark moves
    for topic, p in (("foo", 0), ("bar", 0), ("foo", 2)):
        answer = broker.call(produce(build_batch([f"{topic}-{p}".encode()]), topic=topic, partition=p), 9)
        assert answer.responses[0].partition_responses[0].error_code == 0
    F = FetchRequest
    by_id = version >= 13

    def topic(name, tid, p):
        return F.Topic(topic=None if by_id else name, topic_id=tid if by_id else None, partitions=[
            F.Topic.Partition(partition=p, current_leader_epoch=-1, fetch_offset=0, partition_max_bytes=1 << 20)])
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[topic("foo", FOO, 0), topic("bar", BAR, 0), topic("foo", FOO, 2)],
            forgotten_topics_data=[])
    resp = decoded(broker.call(req, version), version=version)
    got = {(t.topic_id if by_id else t.topic, p.partition_index): values(p.records)
           for t in resp.responses for p in t.partitions}
    foo, bar = (FOO, BAR) if by_id else ("foo", "bar")
    assert got == {(foo, 0): [b"foo-0"], (bar, 0): [b"bar-0"], (foo, 2): [b"foo-2"]}
