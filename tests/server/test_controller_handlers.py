"""ControllerHandlers (kraft/server/controller_handlers.py) driven by a real RaftCore over an
InMemoryLog behind a real RaftDriver: Produce as the metadata writer, DescribeQuorum, the
KRaft RPCs' singleton rules, ApiVersions. Decodable but invalid requests get Kafka's error
codes and leave the log untouched."""

from __future__ import annotations

import asyncio
import inspect
import random
import time

import pytest

from kraft.errors import ErrorCode, InvalidRequestError
from kraft.protocol import (METADATA_TOPIC_ID, ApiVersionsRequest, BeginQuorumEpochRequest, DescribeQuorumRequest,
                            EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest, MetadataRequest,
                            ProduceRequest, RequestHeader, VoteRequest, response_version,
                            EncodedBody, response_class)
from kraft.raft import RaftConfig, RaftCore
from kraft.records import SnapshotFooterRecord, build_batch, build_control_record_batch, iter_batches
from kraft.server.controller_handlers import SERVED_APIS, ControllerHandlers
from kraft.server.request_context import RequestContext
from kraft.server.raft_driver import RaftDriver, wall_ms

from controller_helpers import FlushingLog
from controller_helpers import NoStateFile as _StateFile
from controller_helpers import NullListener as _Listener
from controller_helpers import SilentPeer as _SilentPeer
from server_helpers import run, settle

TOPIC = "__cluster_metadata"
ENDPOINTS = [(1, "h1", 9091), (2, "h2", 9092), (3, "h3", 9093)]
CONFIG = RaftConfig(election_timeout_ms=20, fetch_timeout_ms=200, request_timeout_ms=300, fetch_max_wait_ms=50,
                    election_backoff_max_ms=20, retry_backoff_ms=5, append_linger_ms=0, cluster_id="c")


class Node:
    """One controller: core + driver + handlers (no sockets)."""

    def __init__(self, voters=(1,)):
        self.log = FlushingLog()
        self.core = RaftCore(1, self.log, CONFIG, voters, random.Random(1), now_ms=wall_ms())
        peers = {i: (h, p) for i, h, p in ENDPOINTS if i in voters}
        self.driver = RaftDriver(self.core, self.log, _StateFile(), _Listener(), peers=peers, cluster_id="c",
                                 voters=voters, client_factory=_SilentPeer)
        self.log.driver = self.driver
        self.handlers = ControllerHandlers(self.driver, [e for e in ENDPOINTS if e[0] in voters])
        self._cid = 0

    async def start_leader(self):
        self.driver.start()
        assert await settle(lambda: self.core.is_leader() and self.core.high_watermark > 0)

    async def call(self, request, version):
        self._cid += 1
        ctx = RequestContext(RequestHeader(request.API_KEY, version, self._cid, "t"), "CONTROLLER", "test:1",
                             time.monotonic_ns())
        result = self.handlers.handle(ctx, request)
        if inspect.isawaitable(result):  # a coroutine, an asyncio future or a Reply
            result = await asyncio.wait_for(result, 5)
        if result is None:
            return None
        v = response_version(request.API_KEY, version)
        if isinstance(result, EncodedBody):  # a spliced cached encoding: it must decode at v
            return response_class(request.API_KEY).decode(result, v)
        type(result).decode(result.encode(v), v)  # it must be encodable at the version it is sent at
        return result

    async def close(self):
        await self.driver.close()


def leader_test(body):
    async def main():
        node = Node()
        await node.start_leader()
        try:
            await body(node)
        finally:
            await node.close()
    run(main())


def produce(records, *, acks=-1, topic=TOPIC, partition=0, version=11, topics=None, timeout_ms=5000):
    P = ProduceRequest
    if topics is None:
        topics = [P.Topic(name=topic, partition_data=[P.Topic.Partition(index=partition, records=records)])]
    return P(acks=acks, timeout_ms=timeout_ms, topic_data=topics)


def values(n, tag="v"):
    return build_batch([f"{tag}{i}".encode() for i in range(n)])


def _partition(resp):
    [topic] = resp.responses
    [part] = topic.partition_responses
    return topic, part


def _data_values(log):
    return [v for b in log.batches() if not b.is_control for v in b.values()]


# --- Produce ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [3, 9, 11, 12])
@pytest.mark.parametrize("acks", [-1, 1])
def test_produce_answers_once_committed_with_the_base_offset(version, acks):
    async def body(node):
        start = node.log.end_offset()
        resp = await node.call(produce(values(3), acks=acks, version=version), version)
        topic, part = _partition(resp)
        assert (topic.name, part.index, part.error_code, part.base_offset) == (TOPIC, 0, 0, start)
        assert node.core.high_watermark >= start + 3
        resp = await node.call(produce(values(2, "w"), acks=acks), 11)
        assert _partition(resp)[1].base_offset == start + 3
        assert _data_values(node.log) == [b"v0", b"v1", b"v2", b"w0", b"w1"]
    leader_test(body)


def test_produce_with_acks_zero_gets_no_answer_but_is_written():
    async def body(node):
        assert await node.call(produce(values(2), acks=0), 11) is None
        assert await settle(lambda: _data_values(node.log) == [b"v0", b"v1"])
    leader_test(body)


def test_produce_of_several_batches_is_one_atomic_group():
    async def body(node):
        start = node.log.end_offset()
        resp = await node.call(produce(values(2, "a") + values(3, "b")), 11)
        assert _partition(resp)[1].base_offset == start
        assert _data_values(node.log) == [b"a0", b"a1", b"b0", b"b1", b"b2"]
    leader_test(body)


def test_produce_not_committed_in_time_is_request_timed_out_with_its_base_offset():
    async def body(node):
        node.log.request_flush = lambda: None  # the disk stalls: nothing commits any more
        start = node.log.end_offset()
        part = _partition(await node.call(produce(values(2), timeout_ms=30), 11))[1]
        assert (part.error_code, part.base_offset) == (ErrorCode.REQUEST_TIMED_OUT, start)
        assert node.log.end_offset() == start + 2  # written, fate unknown: a timeout is indeterminate
    leader_test(body)


def test_produce_pending_when_leadership_ends_is_not_leader_or_follower():
    async def body(node):
        node.log.request_flush = lambda: None
        pending = asyncio.ensure_future(node.call(produce(values(1), timeout_ms=10_000), 11))
        await settle(lambda: len(node.driver.commits) == 1)
        await node.driver.close()  # fails every commit waiter with NotLeaderError
        assert _partition(await pending)[1].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    leader_test(body)


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_produce_with_invalid_acks_is_rejected(acks):
    async def body(node):
        end = node.log.end_offset()
        resp = await node.call(produce(values(1), acks=acks), 11)
        assert _partition(resp)[1].error_code == ErrorCode.INVALID_REQUIRED_ACKS
        assert node.log.end_offset() == end
    leader_test(body)


WRONG_PLACES = {
    "other topic": dict(topic="other"),
    "other partition": dict(partition=1),
    "two partitions": dict(topics=[ProduceRequest.Topic(name=TOPIC, partition_data=[
        ProduceRequest.Topic.Partition(index=0, records=values(1)),
        ProduceRequest.Topic.Partition(index=1, records=values(1))])]),
    "two topics": dict(topics=[ProduceRequest.Topic(name=TOPIC, partition_data=[
        ProduceRequest.Topic.Partition(index=0, records=values(1))])] * 2),
    "no topics": dict(topics=[]),
}


@pytest.mark.parametrize("kwargs", WRONG_PLACES.values(), ids=list(WRONG_PLACES))
def test_produce_anywhere_but_the_metadata_partition_is_unknown_topic_or_partition(kwargs):
    async def body(node):
        end = node.log.end_offset()
        resp = await node.call(produce(values(1), **kwargs), 11)
        codes = [p.error_code for t in resp.responses for p in t.partition_responses]
        assert codes and set(codes) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert node.log.end_offset() == end
    leader_test(body)


def test_produce_error_response_names_the_requested_partitions():
    async def body(node):
        resp = await node.call(produce(values(1), topic="other", partition=3), 11)
        assert [(t.name, [p.index for p in t.partition_responses]) for t in resp.responses] == [("other", [3])]
    leader_test(body)


def _flip_crc_covered_byte(data: bytes) -> bytes:
    buf = bytearray(data)
    buf[-2] ^= 0x01
    return bytes(buf)


CORRUPT = {
    "crc mismatch": lambda: _flip_crc_covered_byte(values(3)),
    "control batch": lambda: build_control_record_batch(SnapshotFooterRecord()),
    "no records": lambda: b"",
    "null records": lambda: None,
    "partial batch only": lambda: values(3)[:40],
    "valid then a bad header": lambda: values(1) + b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 60,
}


@pytest.mark.parametrize("make_records", CORRUPT.values(), ids=list(CORRUPT))
def test_produce_of_corrupt_records_is_corrupt_message_and_writes_nothing(make_records):
    async def body(node):
        end = node.log.end_offset()
        resp = await node.call(produce(make_records()), 11)
        part = _partition(resp)[1]
        assert part.error_code == ErrorCode.CORRUPT_MESSAGE
        assert part.error_message  # v8+: says why
        assert node.log.end_offset() == end
    leader_test(body)


def test_produce_larger_than_one_raft_batch_is_refused_without_writing():
    async def body(node):
        end = node.log.end_offset()
        for records in (build_batch([b"x"] * 10_001), build_batch([b"x" * (9 << 20)])):
            part = _partition(await node.call(produce(records), 11))[1]
            assert part.error_code == ErrorCode.MESSAGE_TOO_LARGE and part.error_message
        assert node.log.end_offset() == end
    leader_test(body)


def test_produce_of_a_null_record_value_is_answered_with_an_error():
    async def body(node):
        end = node.log.end_offset()
        part = _partition(await node.call(produce(build_batch([None, b"a"])), 11))[1]
        assert part.error_code != ErrorCode.NONE
        assert node.log.end_offset() == end
    leader_test(body)


def test_produce_v13_addresses_the_metadata_topic_by_id():
    async def body(node):
        P = ProduceRequest
        req = P(acks=-1, timeout_ms=5000, topic_data=[P.Topic(topic_id=METADATA_TOPIC_ID, partition_data=[
            P.Topic.Partition(index=0, records=values(1))])])
        resp = await node.call(req, 13)
        assert _partition(resp)[1].error_code == ErrorCode.NONE
    leader_test(body)


def _follower_test(body):
    async def main():
        node = Node(voters=(1, 2, 3))
        node.driver.start()
        B = BeginQuorumEpochRequest
        await node.call(B(cluster_id="c", voter_id=1, topics=[B.Topic(topic_name=TOPIC, partitions=[
            B.Topic.Partition(partition_index=0, leader_id=2, leader_epoch=5)])]), 1)
        assert (node.core.leader_id, node.core.epoch, node.core.is_leader()) == (2, 5, False)
        try:
            await body(node)
        finally:
            await node.close()
    run(main())


@pytest.mark.parametrize("version", [9, 10, 11])
def test_produce_on_a_follower_names_the_current_leader(version):
    async def body(node):
        end = node.log.end_offset()
        resp = await node.call(produce(values(1)), version)
        part = _partition(resp)[1]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert node.log.end_offset() == end
        if version >= 10:
            assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (2, 5)
            assert [(e.node_id, e.host, e.port) for e in resp.node_endpoints] == ENDPOINTS
    _follower_test(body)


def _zstd_batch_that_does_not_decompress():
    """A zstd batch with a valid CRC whose payload is not zstd: only decompressing finds out."""
    from kraft.records import Compression, crc32c
    batch = bytearray(build_batch([b"v" * 100], compression=Compression.ZSTD))
    batch[61:] = b"\x5a" * (len(batch) - 61)  # the compressed records (header is 61 bytes)
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)


FOLLOWER_PAYLOADS = {
    "flipped byte": lambda: values(3)[:-1] + b"\xff",
    "undecompressable zstd": _zstd_batch_that_does_not_decompress,
    "control batch": lambda: build_control_record_batch(SnapshotFooterRecord()),
}


@pytest.mark.parametrize("make_records", FOLLOWER_PAYLOADS.values(), ids=list(FOLLOWER_PAYLOADS))
@pytest.mark.parametrize("version", [3, 11])
def test_produce_on_a_follower_is_not_leader_before_the_payload_is_looked_at(make_records, version):
    """Kafka checks leadership before validating records (ReplicaManager.appendRecords ->
    Partition.appendRecordsToLeader): a follower answers 6 whatever the batches hold, so a
    client retries at the leader instead of failing on a decompression error the leader
    would not have."""
    async def body(node):
        end = node.log.end_offset()
        resp = await node.call(produce(make_records()), version)
        assert _partition(resp)[1].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert node.log.end_offset() == end
    _follower_test(body)


# --- DescribeQuorum ------------------------------------------------------------------------------


def describe(topic=TOPIC, partitions=(0,), topics=None):
    D = DescribeQuorumRequest
    if topics is None:
        topics = [D.Topic(topic_name=topic, partitions=[D.Topic.Partition(partition_index=p) for p in partitions])]
    return D(topics=topics)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_on_the_leader(version):
    async def body(node):
        resp = await node.call(describe(), version)
        assert resp.error_code == 0
        [topic] = resp.topics
        [p] = topic.partitions
        assert (topic.topic_name, p.partition_index, p.error_code, p.leader_id) == (TOPIC, 0, 0, 1)
        assert p.leader_epoch == node.core.epoch and p.high_watermark == node.core.high_watermark
        assert [v.replica_id for v in p.current_voters] == [1]
        assert p.current_voters[0].log_end_offset == node.log.end_offset()
        if version >= 2:
            assert [(n.node_id, [(lst.name, lst.host, lst.port) for lst in n.listeners]) for n in resp.nodes] == \
                [(1, [("CONTROLLER", "h1", 9091)])]
    leader_test(body)


@pytest.mark.parametrize("request_", [describe(topic="other"), describe(partitions=(1,)), describe(partitions=(0, 1)),
                                      describe(topics=[])], ids=["topic", "partition", "two partitions", "none"])
def test_describe_quorum_of_another_partition_is_unknown_topic_or_partition(request_):
    async def body(node):
        resp = await node.call(request_, 2)
        codes = [p.error_code for t in resp.topics for p in t.partitions]
        assert codes and set(codes) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    leader_test(body)


def test_describe_quorum_error_names_the_requested_partition():
    async def body(node):
        resp = await node.call(describe(topic="other", partitions=(4,)), 2)
        assert [(t.topic_name, [p.partition_index for p in t.partitions]) for t in resp.topics] == [("other", [4])]
    leader_test(body)


def test_describe_quorum_on_a_follower_is_not_leader_or_follower():
    async def body(node):
        resp = await node.call(describe(), 2)
        codes = [resp.error_code] + [p.error_code for t in resp.topics for p in t.partitions]
        assert ErrorCode.NOT_LEADER_OR_FOLLOWER in codes
    _follower_test(body)


# --- KRaft RPCs -----------------------------------------------------------------------------------


def _vote(partitions, topic=TOPIC):
    V = VoteRequest
    return V(cluster_id="c", voter_id=1, topics=[V.Topic(topic_name=topic, partitions=[
        V.Topic.Partition(partition_index=i, replica_epoch=1, replica_id=2, last_offset_epoch=0, last_offset=0)
        for i in partitions])])


def _begin(partitions, topic=TOPIC):
    B = BeginQuorumEpochRequest
    return B(cluster_id="c", voter_id=1, topics=[B.Topic(topic_name=topic, partitions=[
        B.Topic.Partition(partition_index=i, leader_id=2, leader_epoch=9) for i in partitions])])


def _end(partitions, topic=TOPIC):
    E = EndQuorumEpochRequest
    return E(cluster_id="c", topics=[E.Topic(topic_name=topic, partitions=[
        E.Topic.Partition(partition_index=i, leader_id=2, leader_epoch=9) for i in partitions])])


def _fetch(partitions, topic_id=METADATA_TOPIC_ID):
    F = FetchRequest
    return F(cluster_id="c", replica_state=F.ReplicaState(replica_id=2, replica_epoch=-1), max_wait_ms=0,
             min_bytes=0, topics=[F.Topic(topic_id=topic_id, partitions=[
                 F.Topic.Partition(partition=i, current_leader_epoch=1, fetch_offset=0, last_fetched_epoch=0,
                                   partition_max_bytes=1000) for i in partitions])])


def _fetch_snapshot(partitions, topic=TOPIC):
    S = FetchSnapshotRequest
    return S(cluster_id="c", replica_id=2, topics=[S.Topic(name=topic, partitions=[
        S.Topic.Partition(partition=i, current_leader_epoch=1, snapshot_id=S.SnapshotId(end_offset=1, epoch=1),
                          position=0) for i in partitions])])


RPCS = {"Vote": (_vote, 2), "BeginQuorumEpoch": (_begin, 1), "EndQuorumEpoch": (_end, 1), "Fetch": (_fetch, 17),
        "FetchSnapshot": (_fetch_snapshot, 1)}


@pytest.mark.parametrize("make,version", RPCS.values(), ids=list(RPCS))
def test_kraft_rpc_with_two_partitions_is_invalid_request(make, version):
    async def body(node):
        epoch, end = node.core.epoch, node.log.end_offset()
        resp = await node.call(make((0, 1)), version)
        assert resp.error_code == ErrorCode.INVALID_REQUEST
        assert (node.core.epoch, node.core.is_leader(), node.log.end_offset()) == (epoch, True, end)
    leader_test(body)


@pytest.mark.parametrize("make,version", [RPCS[k] for k in ("Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch")],
                         ids=["Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch"])
def test_kraft_rpc_for_another_partition_is_invalid_request_as_in_kafka(make, version):
    async def body(node):
        resp = await node.call(make((1,)), version)
        assert resp.error_code == ErrorCode.INVALID_REQUEST
    leader_test(body)


def test_a_fetch_from_a_voter_is_answered_by_the_core():
    async def body(node):
        resp = await node.call(_fetch((0,)), 17)
        assert resp.error_code == 0
        [t] = resp.responses
        [p] = t.partitions
        assert p.current_leader.leader_id == 1 and p.high_watermark == node.core.high_watermark
        assert list(iter_batches(p.records))[0].is_control  # the leader's LeaderChange record
    leader_test(body)


def test_a_kraft_rpc_the_core_answers_at_once_is_answered_without_a_loop_turn():
    """A Vote, or a Fetch with data waiting, leaves the handler as a response, not as
    something the connection must wait a loop turn (or three) for."""
    async def body(node):
        for make, version in (RPCS["Vote"], RPCS["Fetch"]):
            ctx = RequestContext(RequestHeader(make((0,)).API_KEY, version, 1, "t"), "CONTROLLER", "test:1",
                                 time.monotonic_ns())
            result = node.handlers.handle(ctx, make((0,)))
            assert not inspect.isawaitable(result), type(result)
            assert result.error_code == 0
    leader_test(body)


def test_a_vote_for_an_old_epoch_is_refused_by_the_leader():
    async def body(node):
        resp = await node.call(_vote((0,)), 2)
        [t] = resp.topics
        [p] = t.partitions
        assert resp.error_code == 0 and p.vote_granted is False
        assert p.leader_id == 1 and p.leader_epoch == node.core.epoch
    leader_test(body)


# --- ApiVersions and the rest -------------------------------------------------------------------------


def test_api_versions_lists_only_what_the_controller_listener_serves():
    async def body(node):
        resp = await node.call(ApiVersionsRequest(), 3)
        table = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
        assert set(table) == set(SERVED_APIS) and table[1][1] == 17
        for api_key, (lo, hi) in table.items():
            assert lo <= hi
        old = await node.call(ApiVersionsRequest(), 9)  # unsupported: answered for v0
        assert old.error_code == ErrorCode.UNSUPPORTED_VERSION
    leader_test(body)


def test_an_api_not_served_here_raises_invalid_request():
    async def body(node):
        with pytest.raises(InvalidRequestError):
            await node.call(MetadataRequest(topics=[]), 1)
    leader_test(body)


def test_a_trailing_partial_batch_is_ignored_as_kafka_trims_it():
    async def body(node):
        resp = await node.call(produce(values(1) + b"\x00\x01\x02"), 11)
        assert _partition(resp)[1].error_code == ErrorCode.NONE
        assert _data_values(node.log) == [b"v0"]
    leader_test(body)
