"""Every (API, version) a broker listener advertises in ApiVersions gets a decodable, correct
answer over a real TCP connection to a real BrokerNode, and the connection stays open — on the
success path and on error paths. The advertised table must match the cases below exactly, so
advertising a new API or version without a case here fails the test (as for the controller
listener in tests/server/test_every_advertised_version.py)."""

from __future__ import annotations

import asyncio
import struct
import uuid

from kraft.errors import ErrorCode
from kraft.protocol import (AlterReplicaLogDirsRequest, ApiVersionsRequest, DeleteRecordsRequest, DescribeLogDirsRequest,
                            DescribeTopicPartitionsRequest, FetchRequest, GetTelemetrySubscriptionsRequest,
                            InitProducerIdRequest, PushTelemetryRequest, WriteTxnMarkersRequest, DescribeProducersRequest,
                            ListOffsetsRequest, MetadataRequest, OffsetForLeaderEpochRequest, ProduceRequest,
                            decode_response, encode_request)
from kraft.protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from kraft.records import build_batch, iter_batches
from kraft.server.broker_node import BrokerNode, broker_config, static_image

from group_version_cases import OFFSETS, check_consumer_group_versions, check_group_versions
from txn_version_cases import TXNS, check_txn_versions

E = ErrorCode
TOPIC = "t"


class Conn:
    def __init__(self, reader, writer):
        self.reader, self.writer, self.cid = reader, writer, 0

    async def ask(self, request, version):
        self.cid += 1
        self.writer.write(encode_request(request, version, self.cid, "every-version"))
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 10))[0]
        frame = await asyncio.wait_for(self.reader.readexactly(size), 10)
        header, resp = decode_response(frame, type(request).API_KEY, version)
        assert header.correlation_id == self.cid
        return resp


def _produce(version, partition=0, topic=TOPIC):
    P = ProduceRequest
    return P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[P.Topic(name=topic, partition_data=[
        P.Topic.Partition(index=partition, records=build_batch([b"v%d" % version]))])])


def _fetch(version, topic_id, offset=0, epoch=-1):
    F = FetchRequest
    t = F.Topic(topic=TOPIC, topic_id=topic_id, partitions=[F.Topic.Partition(
        partition=0, current_leader_epoch=epoch, fetch_offset=offset, partition_max_bytes=1 << 20)])
    return F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[t], forgotten_topics_data=[])


def _list_offsets(ts):
    L = ListOffsetsRequest
    return L(replica_id=-1, isolation_level=0, topics=[L.Topic(name=TOPIC, partitions=[
        L.Topic.Partition(partition_index=0, current_leader_epoch=-1, timestamp=ts)])])


def _epoch(epoch, partition=0):
    O = OffsetForLeaderEpochRequest
    return O(replica_id=-1, topics=[O.Topic(topic=TOPIC, partitions=[
        O.Topic.Partition(partition=partition, current_leader_epoch=-1, leader_epoch=epoch)])])


async def _scenario(tmp_path):
    node = BrokerNode(broker_config(1, str(tmp_path / "logs"), props={"group.initial.rebalance.delay.ms": 0,
                                                             # a hand-built transaction below, outside any
                                                             # coordinator's: KIP-890's check would refuse it
                                                             "transaction.partition.verification.enable": "false"}),
                      cluster_id="cid")
    await node.start()
    image = static_image(node.registration_record(), {TOPIC: 1, OFFSETS: 1, TXNS: 1})
    node.publish(image)
    topic_id = image.topics.by_name[TOPIC].id
    reader, writer = await asyncio.open_connection("127.0.0.1", node.port())
    conn = Conn(reader, writer)
    checked = set()
    try:
        table = {}
        for v in range(0, 5):
            resp = await conn.ask(ApiVersionsRequest(client_software_name="t", client_software_version="1"), v)
            assert resp.error_code == 0, v
            table = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
            if v >= 3:  # KIP-584 features in tagged fields
                features = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
                assert features["metadata.version"][1] >= 21 and features["kraft.version"] == (0, 1), features
            checked.add((18, v))
        assert table == {0: (3, 11), 1: (4, 17), 2: (1, 10), 3: (0, 12), 18: (0, 4), 21: (0, 2), 22: (0, 5), 23: (2, 4), 27: (0, 1), 61: (0, 0),
                         35: (1, 4), 71: (0, 0), 72: (0, 0), 75: (0, 0), 8: (0, 9), 9: (0, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5),
                         14: (0, 5), 15: (0, 5), 16: (0, 5), 42: (0, 2), 47: (0, 0), 68: (0, 1), 69: (0, 0),
                         24: (0, 5), 25: (0, 4), 26: (0, 4), 28: (0, 4), 65: (0, 0), 66: (0, 2),
                         17: (0, 1), 36: (0, 2), 34: (1, 2)}
        # On a listener without SASL Kafka answers both ILLEGAL_SASL_STATE (tests/server/test_sasl.py:
        # every version on a SASL listener).
        for v in range(0, 2):
            assert (await conn.ask(SaslHandshakeRequest(mechanism="PLAIN"), v)).error_code == E.ILLEGAL_SASL_STATE
            checked.add((17, v))
        for v in range(0, 3):
            assert (await conn.ask(SaslAuthenticateRequest(auth_bytes=b""), v)).error_code == E.ILLEGAL_SASL_STATE
            checked.add((36, v))
        # the group coordinator loads its shard on its first tick
        for _ in range(100):
            if node.handlers.groups.shards.get(0) is not None and node.handlers.groups.shards[0].ready:
                break
            await asyncio.sleep(0.02)
        await check_group_versions(conn, node.port(), TOPIC, checked)
        await check_consumer_group_versions(conn, TOPIC, topic_id, checked)

        for v in range(0, 13):
            resp = await conn.ask(MetadataRequest(topics=[] if v == 0 else None), v)
            assert [(b.node_id, b.port) for b in resp.brokers] == [(1, node.port())], v
            [t] = [t for t in resp.topics if t.name not in (OFFSETS, TXNS)]
            assert (t.name, t.error_code, t.partitions[0].leader_id) == (TOPIC, 0, 1), v
            if v >= 10:
                assert t.topic_id == topic_id
            resp = await conn.ask(MetadataRequest(topics=[MetadataRequest.Topic(name="nope")]), v)
            assert resp.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION, v
            checked.add((3, v))

        produced = 0
        for v in range(3, 12):
            p = (await conn.ask(_produce(v), v)).responses[0].partition_responses[0]
            assert (p.error_code, p.base_offset) == (0, produced), v
            produced += 1
            p = (await conn.ask(_produce(v, topic="nope"), v)).responses[0].partition_responses[0]
            assert p.error_code == E.UNKNOWN_TOPIC_OR_PARTITION, v
            checked.add((0, v))

        for v in range(4, 18):
            resp = await conn.ask(_fetch(v, topic_id), v)
            p = resp.responses[0].partitions[0]
            assert (p.error_code, p.high_watermark) == (0, produced), v
            got = [r.value for b in iter_batches(bytes(p.records)) for r in b]
            assert got == [b"v%d" % x for x in range(3, 12)], v
            p = (await conn.ask(_fetch(v, topic_id, offset=produced + 1), v)).responses[0].partitions[0]
            assert p.error_code == E.OFFSET_OUT_OF_RANGE, v
            if v >= 9:
                resp = await conn.ask(_fetch(v, topic_id, epoch=1), v)
                p = resp.responses[0].partitions[0]
                assert p.error_code == E.UNKNOWN_LEADER_EPOCH, v
                if v >= 16:  # KIP-951: the current leader's endpoint comes with it
                    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, 0), v
                    assert [(e.node_id, e.port) for e in resp.node_endpoints] == [(1, node.port())], v
            checked.add((1, v))

        for v in range(1, 11):
            p = (await conn.ask(_list_offsets(-1), v)).topics[0].partitions[0]
            assert (p.error_code, p.offset) == (0, produced), v
            p = (await conn.ask(_list_offsets(-2), v)).topics[0].partitions[0]
            assert (p.error_code, p.offset) == (0, 0), v
            if v >= 7:
                p = (await conn.ask(_list_offsets(-3), v)).topics[0].partitions[0]
                assert p.error_code == 0 and 0 <= p.offset < produced, v
            if v >= 8:  # earliest local: the log start (no remote tier)
                p = (await conn.ask(_list_offsets(-4), v)).topics[0].partitions[0]
                assert (p.error_code, p.offset) == (0, 0), v
            if v >= 9:  # last tiered: none
                p = (await conn.ask(_list_offsets(-5), v)).topics[0].partitions[0]
                assert (p.error_code, p.offset, p.leader_epoch) == (0, -1, -1), v
            checked.add((2, v))

        for v in range(2, 5):
            p = (await conn.ask(_epoch(0), v)).topics[0].partitions[0]
            assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, produced), v
            p = (await conn.ask(_epoch(0, partition=3), v)).topics[0].partitions[0]
            assert p.error_code == E.UNKNOWN_TOPIC_OR_PARTITION, v
            checked.add((23, v))

        for v in range(1, 5):
            resp = await conn.ask(DescribeLogDirsRequest(topics=None), v)
            [d] = resp.results
            [t] = [t for t in d.topics if t.name not in (OFFSETS, TXNS)]
            assert (t.name, t.partitions[0].partition_index, t.partitions[0].offset_lag) == (TOPIC, 0, 0), v
            assert t.partitions[0].partition_size > 0
            resp = await conn.ask(DescribeLogDirsRequest(topics=[DescribeLogDirsRequest.Topic(
                topic="nope", partitions=[0])]), v)
            assert resp.results[0].topics == [], v
            checked.add((35, v))

        A = AlterReplicaLogDirsRequest
        for v in range(1, 3):  # the one log dir: "moving" there is done at once; an unknown one is refused
            here = str(tmp_path / "logs")
            for path, code in ((here, 0), (str(tmp_path / "nowhere"), E.LOG_DIR_NOT_FOUND)):
                resp = await conn.ask(A(dirs=[A.Dir(path=path, topics=[A.Dir.Topic(name=TOPIC, partitions=[0])])]), v)
                assert resp.results[0].partitions[0].error_code == code, v
            checked.add((34, v))

        D = DeleteRecordsRequest
        for v in range(0, 3):  # one more record each time, then its start moves to just below the end
            await conn.ask(_produce(3), 3)
            produced += 1
            resp = await conn.ask(D(timeout_ms=5000, topics=[D.Topic(name=TOPIC, partitions=[
                D.Topic.Partition(partition_index=0, offset=produced - 1)])]), v)
            p = resp.topics[0].partitions[0]
            assert (p.error_code, p.low_watermark) == (0, produced - 1), v
            p = (await conn.ask(_list_offsets(-2), 4)).topics[0].partitions[0]
            assert p.offset == produced - 1, v
            resp = await conn.ask(D(timeout_ms=5000, topics=[D.Topic(name=TOPIC, partitions=[
                D.Topic.Partition(partition_index=0, offset=produced + 1), D.Topic.Partition(
                    partition_index=7, offset=0)])]), v)
            assert [p.error_code for p in resp.topics[0].partitions] == [E.OFFSET_OUT_OF_RANGE,
                                                                        E.UNKNOWN_TOPIC_OR_PARTITION], v
            checked.add((21, v))

        T = DescribeTopicPartitionsRequest
        resp = await conn.ask(T(topics=[T.Topic(name=TOPIC), T.Topic(name="nope")], response_partition_limit=1), 0)
        assert [(t.name, t.error_code, [p.leader_id for p in t.partitions]) for t in resp.topics] == \
            [("nope", E.UNKNOWN_TOPIC_OR_PARTITION, []), (TOPIC, 0, [1])]
        assert resp.topics[1].topic_id == topic_id and resp.next_cursor is None
        resp = await conn.ask(T(topics=[], response_partition_limit=1), 0)  # every topic, one partition each
        assert [t.name for t in resp.topics] == [OFFSETS] and resp.next_cursor.topic_name == TXNS
        resp = await conn.ask(T(topics=[], response_partition_limit=1, cursor=resp.next_cursor), 0)
        assert [t.name for t in resp.topics] == [TXNS] and resp.next_cursor.topic_name == TOPIC
        resp = await conn.ask(T(topics=[], response_partition_limit=1, cursor=resp.next_cursor), 0)
        assert [t.name for t in resp.topics] == [TOPIC] and resp.next_cursor is None
        checked.add((75, 0))

        sub = await conn.ask(GetTelemetrySubscriptionsRequest(client_instance_id=uuid.UUID(int=0)), 0)
        assert sub.error_code == 0 and sub.client_instance_id.int != 0 and sub.requested_metrics == [""]
        checked.add((71, 0))
        P = PushTelemetryRequest
        resp = await conn.ask(P(client_instance_id=sub.client_instance_id, subscription_id=sub.subscription_id,
                                terminating=False, compression_type=0, metrics=b""), 0)
        assert resp.error_code == 0
        resp = await conn.ask(P(client_instance_id=uuid.uuid4(), subscription_id=sub.subscription_id,
                                terminating=False, compression_type=0, metrics=b""), 0)
        assert resp.error_code == E.UNKNOWN_SUBSCRIPTION_ID
        checked.add((72, 0))

        pids = set()
        for v in range(0, 6):
            resp = await conn.ask(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), v)
            assert (resp.error_code, resp.producer_epoch) == (0, 0) and resp.producer_id >= 0, v
            pids.add(resp.producer_id)
            checked.add((22, v))
        assert len(pids) == 6  # a new producer id each time

        W = WriteTxnMarkersRequest
        pid = min(pids)
        for v in range(0, 2):  # a transactional batch, then its COMMIT marker (and a refused stale one)
            P = ProduceRequest
            resp = await conn.ask(P(transactional_id="tx", acks=-1, timeout_ms=5000, topic_data=[P.Topic(
                name=TOPIC, partition_data=[P.Topic.Partition(index=0, records=build_batch(
                    [b"t%d" % v], producer_id=pid, producer_epoch=0, base_sequence=v, transactional=True))])]), 8)
            p = resp.responses[0].partition_responses[0]
            assert p.error_code == 0, (v, p)
            txn_first = p.base_offset

            def marker(coord_epoch, topic=TOPIC, partition=0):
                return W(markers=[W.Marker(producer_id=pid, producer_epoch=0, transaction_result=True,
                                           coordinator_epoch=coord_epoch, topics=[W.Marker.Topic(
                                               name=topic, partition_indexes=[partition])])])
            resp = await conn.ask(marker(5 + v), v)
            assert resp.markers[0].producer_id == pid
            assert resp.markers[0].topics[0].partitions[0].error_code == 0, v
            end = (await conn.ask(_list_offsets(-1), 4)).topics[0].partitions[0].offset
            assert end > txn_first + 1, v  # the marker took an offset after the batch
            resp = await conn.ask(marker(4 + v), v)  # an older coordinator epoch
            assert resp.markers[0].topics[0].partitions[0].error_code == E.TRANSACTION_COORDINATOR_FENCED, v
            resp = await conn.ask(marker(9, topic="nope"), v)
            assert resp.markers[0].topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION, v
            checked.add((27, v))

        DP = DescribeProducersRequest
        resp = await conn.ask(DP(topics=[DP.Topic(name=TOPIC, partition_indexes=[0, 7]),
                                         DP.Topic(name="nope", partition_indexes=[0])]), 0)
        p0, p7 = resp.topics[0].partitions
        assert (p7.error_code, resp.topics[1].partitions[0].error_code) == (E.UNKNOWN_TOPIC_OR_PARTITION,) * 2
        states = {s.producer_id: s for s in p0.active_producers}
        s = states[pid]
        assert (p0.error_code, s.producer_epoch, s.last_sequence, s.coordinator_epoch,
                s.current_txn_start_offset) == (0, 0, 1, 6, -1), s
        checked.add((61, 0))

        # last: its transactions' markers take offsets of TOPIC's partition
        await check_txn_versions(conn, node, TOPIC, checked)
        advertised = {(k, v) for k, (lo, hi) in table.items() for v in range(lo, hi + 1)}
        assert checked == advertised
    finally:
        writer.close()
        await node.shutdown()


def test_every_advertised_version_is_answered(tmp_path):
    asyncio.run(asyncio.wait_for(_scenario(tmp_path), 60))
