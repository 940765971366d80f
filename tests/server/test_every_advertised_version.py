"""Every (API, version) a controller advertises in ApiVersions gets a decodable answer over a
real TCP connection to a real KafkaServer serving ControllerHandlers, and the connection stays
open — on the success path and on every error path (not leader, diverging log, snapshot
needed, wrong partition) at every version. Kafka's rule: what a version advertises, it answers;
a field that version cannot carry is degraded the way Kafka does, never a closed connection.

The server is asked for its table first, and the table must match the cases below exactly, so
advertising a new API or version without a case here fails the test."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kraft.errors import ErrorCode
from kraft.protocol import (METADATA_TOPIC_ID, ApiVersionsRequest, BeginQuorumEpochRequest, BrokerHeartbeatRequest,
                            BrokerRegistrationRequest, CreatePartitionsRequest, CreateTopicsRequest,
                            DeleteTopicsRequest, DescribeClusterRequest, UnregisterBrokerRequest,
                            DescribeQuorumRequest, EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest,
                            ProduceRequest, Struct, VoteRequest, decode_response, encode_request)
from kraft.types import OffsetAndEpoch
from kraft.raft.voters import ReplicaKey
from kraft.records import SnapshotFooterRecord, SnapshotHeaderRecord, build_batch, build_control_record_batch
from admin_api_cases import admin_cases
from partition_api_cases import partition_cases
from controller_helpers import Controller
from server_helpers import RawConnection, api_versions_frame, decode_api_versions, run, settle

TOPIC = "__cluster_metadata"
DIR1 = uuid.UUID(int=0x11).bytes  # the leader's directory id: DescribeQuorum must drop it below v2
OK = ErrorCode.NONE
NOT_LEADER = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH}


async def _leader_with_snapshot() -> Controller:
    """A single-voter leader whose log starts after a snapshot: a fetch from offset 0 needs it."""
    node = Controller([ReplicaKey(1, DIR1)], directory_id=DIR1)
    await node.start()
    assert await settle(lambda: node.core.is_leader() and node.core.high_watermark > 0)
    last, committed = node.driver.propose([b"a", b"b", b"c"])
    await asyncio.wait_for(committed, 5)
    sid = OffsetAndEpoch(last + 1, node.core.epoch)
    writer = node.log.create_snapshot(sid)
    writer.append(build_control_record_batch(SnapshotHeaderRecord(0))
                  + build_control_record_batch(SnapshotFooterRecord(), base_offset=1))
    writer.freeze()
    assert node.log.delete_before_snapshot(sid)
    last, committed = node.driver.propose([b"d"])  # something to read past the snapshot
    await asyncio.wait_for(committed, 5)
    node.snapshot_id = sid
    # One registered, unfenced broker, so CreateTopics has somewhere to place replicas.
    assert await settle(lambda: node.controller.active)
    reg = asyncio.get_running_loop().create_future()
    node.controller.submit(62, _registration(0, 1), 0, 0, reg)
    node.broker_epoch = (await asyncio.wait_for(reg, 5)).broker_epoch
    hb = asyncio.get_running_loop().create_future()
    node.controller.submit(63, BrokerHeartbeatRequest(broker_id=1, broker_epoch=node.broker_epoch,
                                                      current_metadata_offset=node.log.end_offset()), 0, 0, hb)
    assert not (await asyncio.wait_for(hb, 5)).is_fenced
    # A metadata.version that stores SCRAM credentials (3.5-IV2 or later), as `storage format` writes.
    node.controller.bootstrap_features = {"metadata.version": 21}
    node.controller._maybe_bootstrap()  # what the node's first tick as the active controller does
    assert await settle(lambda: node.controller.view.features.metadata_version == 21)
    return node


# --- request builders: (case name, request, check(response, version)) per version ----------------


def _codes(obj) -> list[int]:
    """Every error_code in a response, top level and nested."""
    out = []
    if isinstance(obj, list):
        for x in obj:
            out += _codes(x)
    elif isinstance(obj, Struct):
        for f in type(obj).FIELDS:
            v = getattr(obj, f.name, None)
            if f.name == "error_code" and isinstance(v, int):
                out.append(v)
            elif isinstance(v, (list, Struct)):
                out += _codes(v)
    return out


def _expect(*allowed):
    allowed = {int(c) for c in allowed}

    def check(resp, version):
        bad = [c for c in _codes(resp) if c != 0]
        if OK in allowed and not bad:
            return
        assert bad and set(bad) <= allowed, f"v{version}: error codes {_codes(resp)}, expected {sorted(allowed)}"
    return check


def _fetch(version, *, offset, last_epoch, leader_epoch, topic_ok=True):
    F = FetchRequest
    part = F.Topic.Partition(partition=0 if topic_ok else 7, current_leader_epoch=leader_epoch, fetch_offset=offset,
                             partition_max_bytes=1 << 20)
    if version >= 12:
        part.last_fetched_epoch = last_epoch
    topic = F.Topic(partitions=[part])
    if version >= 13:
        topic.topic_id = METADATA_TOPIC_ID
    else:
        topic.topic = TOPIC
    req = F(cluster_id="c", max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[topic])
    if version >= 15:
        req.replica_state = F.ReplicaState(replica_id=2, replica_epoch=-1)
    else:
        req.replica_id = 2
    return req


def _fetch_cases(node, version):
    epoch, sid = node.core.epoch, node.snapshot_id
    end = node.log.end_offset()
    old = version < 12  # no LastFetchedEpoch: Kafka's KafkaRaftClient answers INVALID_REQUEST

    def valid(resp, v):
        _expect(ErrorCode.INVALID_REQUEST if old else OK)(resp, v)
        if not old:
            [p] = resp.responses[0].partitions
            assert p.records and p.high_watermark == node.core.high_watermark, f"v{v}: no records"

    def diverging(resp, v):
        _expect(ErrorCode.INVALID_REQUEST if old else OK)(resp, v)
        if not old:
            assert resp.responses[0].partitions[0].diverging_epoch.epoch == epoch, f"v{v}"

    def snapshot(resp, v):
        _expect(ErrorCode.INVALID_REQUEST if old else OK)(resp, v)
        if not old:
            got = resp.responses[0].partitions[0].snapshot_id
            assert (got.end_offset, got.epoch) == (sid.offset, sid.epoch), f"v{v}"

    return [
        ("valid", _fetch(version, offset=sid.offset, last_epoch=sid.epoch, leader_epoch=epoch), valid),
        ("diverging", _fetch(version, offset=end + 5, last_epoch=epoch, leader_epoch=epoch), diverging),
        ("snapshot needed", _fetch(version, offset=0, last_epoch=0, leader_epoch=epoch), snapshot),
        ("newer epoch", _fetch(version, offset=sid.offset, last_epoch=sid.epoch, leader_epoch=epoch + 1),
         _expect(*NOT_LEADER, ErrorCode.INVALID_REQUEST) if old else _expect(ErrorCode.UNKNOWN_LEADER_EPOCH)),
        ("wrong partition", _fetch(version, offset=0, last_epoch=0, leader_epoch=epoch, topic_ok=False),
         _expect(ErrorCode.INVALID_REQUEST)),
    ]


def _produce(version, records, partition=0):
    P = ProduceRequest
    topic = P.Topic(partition_data=[P.Topic.Partition(index=partition, records=records)])
    if version >= 13:
        topic.topic_id = METADATA_TOPIC_ID
    else:
        topic.name = TOPIC
    return P(acks=-1, timeout_ms=5000, topic_data=[topic])


def _produce_cases(node, version):
    return [("valid", _produce(version, build_batch([b"x"])), _expect(OK)),
            ("wrong partition", _produce(version, build_batch([b"x"]), partition=3),
             _expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))]


def _vote(version, epoch, partition=0):
    V = VoteRequest
    p = V.Topic.Partition(partition_index=partition, replica_epoch=epoch, replica_id=2, last_offset_epoch=0,
                          last_offset=0)
    return V(cluster_id="c", voter_id=1, topics=[V.Topic(topic_name=TOPIC, partitions=[p])])


def _begin(version, epoch, partition=0):
    B = BeginQuorumEpochRequest
    return B(cluster_id="c", voter_id=1, topics=[B.Topic(topic_name=TOPIC, partitions=[
        B.Topic.Partition(partition_index=partition, leader_id=2, leader_epoch=epoch)])])


def _end(version, epoch, partition=0):
    E = EndQuorumEpochRequest
    return E(cluster_id="c", topics=[E.Topic(topic_name=TOPIC, partitions=[
        E.Topic.Partition(partition_index=partition, leader_id=2, leader_epoch=epoch)])])


def _election_cases(make):
    def cases(node, version):
        epoch = node.core.epoch
        # Vote: a candidate's bumped epoch must exceed its last offset's epoch (0 here).
        stale = max(epoch, 1) if make is _vote else max(epoch - 1, 0)
        return [("stale", make(version, stale), _expect(OK, *NOT_LEADER)),
                ("wrong partition", make(version, epoch, partition=5), _expect(ErrorCode.INVALID_REQUEST))]
    return cases


def _fetch_snapshot(node, position=0, partition=0, leader_epoch=None, sid=None):
    S = FetchSnapshotRequest
    sid = sid or node.snapshot_id
    return S(cluster_id="c", replica_id=2, max_bytes=1 << 20, topics=[S.Topic(name=TOPIC, partitions=[
        S.Topic.Partition(partition=partition, current_leader_epoch=node.core.epoch if leader_epoch is None
                          else leader_epoch, snapshot_id=S.SnapshotId(end_offset=sid.offset, epoch=sid.epoch),
                          position=position)])])


def _fetch_snapshot_cases(node, version):
    return [("valid", _fetch_snapshot(node), _expect(OK)),
            ("unknown snapshot", _fetch_snapshot(node, sid=OffsetAndEpoch(1, 0)), _expect(ErrorCode.SNAPSHOT_NOT_FOUND)),
            ("newer epoch", _fetch_snapshot(node, leader_epoch=node.core.epoch + 1),
             _expect(ErrorCode.UNKNOWN_LEADER_EPOCH)),
            ("wrong partition", _fetch_snapshot(node, partition=4), _expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))]


def _describe_quorum_cases(node, version):
    D = DescribeQuorumRequest
    ours = D(topics=[D.Topic(topic_name=TOPIC, partitions=[D.Topic.Partition(partition_index=0)])])
    other = D(topics=[D.Topic(topic_name="other", partitions=[D.Topic.Partition(partition_index=0)])])
    return [("valid", ours, _expect(OK)), ("wrong partition", other, _expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))]


def _describe_cluster_cases(node, version):
    D = DescribeClusterRequest
    if version == 0:
        return [("brokers", D(), _expect(OK))]
    return [("controllers", D(endpoint_type=2), _expect(OK)),
            ("brokers", D(endpoint_type=1), _expect(OK))]  # from the metadata image


def _registration(version, broker_id, cluster_id="c"):
    R = BrokerRegistrationRequest
    return R(broker_id=broker_id, cluster_id=cluster_id, incarnation_id=uuid.UUID(int=broker_id + 1),
             listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)], rack=None,
             features=[R.Feature(name="metadata.version", min_supported_version=7, max_supported_version=25)])


def _create_topics_cases(node, version):
    T = CreateTopicsRequest.Topic
    ok = CreateTopicsRequest(topics=[T(name=f"t{version}", num_partitions=1, replication_factor=1),
                                     T(name=f"keep{version}", num_partitions=1, replication_factor=1)])
    bad = CreateTopicsRequest(topics=[T(name="bad/name", num_partitions=1, replication_factor=1),
                                      T(name="rf", num_partitions=1, replication_factor=3)])
    return [("create", ok, _expect(OK)),
            ("errors", bad, _expect(ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.INVALID_REPLICATION_FACTOR))]


def _delete_topics_cases(node, version):
    name = f"t{version + 1}"  # created by the CreateTopics sweep (versions 2..7)
    if version >= 6:
        T = DeleteTopicsRequest.Topic
        ok, unknown = DeleteTopicsRequest(topics=[T(name=name)]), DeleteTopicsRequest(topics=[T(name="nope")])
    else:
        ok, unknown = DeleteTopicsRequest(topic_names=[name]), DeleteTopicsRequest(topic_names=["nope"])
    return [("delete", ok, _expect(OK)), ("unknown", unknown, _expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))]


def _create_partitions_cases(node, version):
    T = CreatePartitionsRequest.Topic
    return [("grow", CreatePartitionsRequest(topics=[T(name="keep7", count=version + 2)]), _expect(OK)),
            ("unknown", CreatePartitionsRequest(topics=[T(name="nope", count=2)]),
             _expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))]


def _registration_cases(node, version):
    return [("register", _registration(version, 50 + version), _expect(OK)),
            ("other cluster", _registration(version, 60, cluster_id="other"),
             _expect(ErrorCode.INCONSISTENT_CLUSTER_ID))]


def _heartbeat_cases(node, version):
    H = BrokerHeartbeatRequest
    return [("live", H(broker_id=1, broker_epoch=node.broker_epoch, current_metadata_offset=0), _expect(OK)),
            ("unknown", H(broker_id=77, broker_epoch=0, current_metadata_offset=0),
             _expect(ErrorCode.BROKER_ID_NOT_REGISTERED))]


def _unregister_cases(node, version):
    return [("unregister", UnregisterBrokerRequest(broker_id=50), _expect(OK)),
            ("unknown", UnregisterBrokerRequest(broker_id=77), _expect(ErrorCode.BROKER_ID_NOT_REGISTERED))]


def _api_versions_cases(node, version):
    return [("plain", ApiVersionsRequest(client_software_name="t", client_software_version="1"), _expect(OK))]


def _voter_change_cases(api_key, expected):
    """KIP-853 voter changes: this controller is a static quorum (kraft.version 0)."""
    def cases(node, version):
        from kraft.protocol import AddRaftVoterRequest, RemoveRaftVoterRequest, UpdateRaftVoterRequest
        from kraft.raft.rpcs import directory_uuid
        d = directory_uuid(b"d" * 16)
        if api_key == 80:
            L = AddRaftVoterRequest.Listener
            req = AddRaftVoterRequest(timeout_ms=1000, voter_id=9, voter_directory_id=d,
                                      listeners=[L(name="CONTROLLER", host="h", port=1)])
        elif api_key == 81:
            req = RemoveRaftVoterRequest(voter_id=1, voter_directory_id=d)
        elif api_key == 10002:  # kraft's ReassignRaftVoters
            from kraft.protocol import ReassignRaftVotersRequest as R
            req = R(target_voters=[R.TargetVoter(voter_id=9, voter_directory_id=d, listeners=[])])
        else:
            U = UpdateRaftVoterRequest
            req = U(current_leader_epoch=node.core.epoch, voter_id=1, voter_directory_id=d,
                    listeners=[U.Listener(name="CONTROLLER", host="h", port=1)],
                    kraft_version_feature=U.KRaftVersionFeature(min_supported_version=0, max_supported_version=1))
        return [("static quorum", req, _expect(expected))]
    return cases


CASES = {0: _produce_cases, 1: _fetch_cases, 18: _api_versions_cases, 52: _election_cases(_vote),
         53: _election_cases(_begin), 54: _election_cases(_end), 55: _describe_quorum_cases,
         59: _fetch_snapshot_cases, 60: _describe_cluster_cases, 19: _create_topics_cases, 20: _delete_topics_cases,
         37: _create_partitions_cases, 62: _registration_cases, 63: _heartbeat_cases, 64: _unregister_cases,
         **{k: _voter_change_cases(k, ErrorCode.UNSUPPORTED_VERSION) for k in (80, 81, 82, 10002)},
         **admin_cases(_expect, OK), **partition_cases(_expect, OK)}
CONTROLLER_WRITES = (19, 20, 37, 62, 63, 64, 33, 44, 30, 31, 57, 67, 43, 45, 56, 51, 49, 73)


async def _advertised(port) -> dict[int, tuple[int, int]]:
    conn = await RawConnection.open(port)
    await conn.send(api_versions_frame(1))
    _, resp = decode_api_versions(await conn.read_frame())
    await conn.close()
    return {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}


async def _ask(conn: RawConnection, api_key: int, version: int, request, cid: int):
    """Send ``request`` followed by an ApiVersions probe; both must be answered in order."""
    await conn.send(encode_request(request, version, cid, "sweep") + api_versions_frame(cid + 1))
    frame = await conn.read_frame()
    assert frame is not None, f"api {api_key} v{version}: connection closed instead of answering"
    header, resp = decode_response(frame, api_key, version)
    assert header.correlation_id == cid
    probe = await conn.read_frame()
    assert probe is not None, f"api {api_key} v{version}: connection closed after answering"
    assert decode_api_versions(probe)[0] == cid + 1
    return resp


async def _sweep(node: Controller, only=None) -> list[str]:
    table = await _advertised(node.server.port)
    assert set(table) == set(CASES), "an advertised API has no case in this test (or a case is not advertised)"
    conn = await RawConnection.open(node.server.port)
    cid, done = 100, []
    try:
        for api_key, (lo, hi) in sorted(table.items()):
            if only is not None and api_key not in only:
                continue
            for version in range(lo, hi + 1):
                for name, request, check in CASES[api_key](node, version):
                    cid += 2
                    resp = await _ask(conn, api_key, version, request, cid)
                    check(resp, version)
                    done.append(f"{api_key}v{version}:{name}")
    finally:
        await conn.close()
    return done


def test_every_advertised_version_is_answered_by_the_leader_on_every_path():
    async def main():
        node = await _leader_with_snapshot()
        try:
            done = await _sweep(node)
            assert node.core.is_leader()
        finally:
            await node.close()
        # Fetch alone: 4..17, five paths each; nothing was skipped.
        assert sum(d.startswith("1v") for d in done) == 14 * 5
    run(main(), timeout=60)


def _follower_cases(node, version, api_key):
    """What a node that is not the leader answers (its epoch is the current one)."""
    epoch = node.core.epoch
    if api_key == 1:
        req = _fetch(version, offset=0, last_epoch=0, leader_epoch=epoch)
        return [("not leader", req, _expect(ErrorCode.INVALID_REQUEST) if version < 12
                 else _expect(ErrorCode.NOT_LEADER_OR_FOLLOWER))]
    if api_key == 0:
        return [("not leader", _produce(version, build_batch([b"x"])), _expect(ErrorCode.NOT_LEADER_OR_FOLLOWER))]
    if api_key == 59:
        return [("not leader", _fetch_snapshot(node, sid=OffsetAndEpoch(1, 0), leader_epoch=epoch),
                 _expect(ErrorCode.NOT_LEADER_OR_FOLLOWER))]
    if api_key == 55:
        return [(n, r, _expect(ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                for n, r, _ in _describe_quorum_cases(node, version)]
    if api_key in (80, 81, 82, 10002):
        return _voter_change_cases(api_key, ErrorCode.NOT_LEADER_OR_FOLLOWER)(node, version)
    if api_key == 32:  # a pure read of this node's committed image, which has no topics
        return [(n, r, _expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)) for n, r, _ in _LEADER_CASES[32](node, version)]
    if api_key in CONTROLLER_WRITES:
        node.broker_epoch = 0
        return [(n, r, _expect(ErrorCode.NOT_CONTROLLER)) for n, r, _ in _LEADER_CASES[api_key](node, version)]
    return _LEADER_CASES[api_key](node, version)


_LEADER_CASES = dict(CASES)


def test_every_advertised_version_is_answered_by_a_node_that_is_not_the_leader():
    async def main():
        # Three voters, silent peers, a long election timeout: the node stays a non-leader
        # in epoch 0 for the whole sweep.
        node = Controller([1, 2, 3], election_timeout_ms=60_000)
        await node.start()
        node.snapshot_id = OffsetAndEpoch(1, 0)
        try:
            for key in CASES:
                CASES[key] = (lambda k: lambda n, v: _follower_cases(n, v, k))(key)
            await _sweep(node)
            assert not node.core.is_leader()
        finally:
            CASES.update(_LEADER_CASES)
            await node.close()
    run(main(), timeout=60)


@pytest.mark.parametrize("version", range(4, 18))
def test_fetch_errors_are_visible_at_versions_without_a_top_level_error_code(version):
    """v4-6 have no top-level ErrorCode: a request-level error must then sit on the partition
    (Kafka's FetchResponse reports errors per partition before v7) rather than vanish."""
    async def main():
        node = await _leader_with_snapshot()
        try:
            conn = await RawConnection.open(node.server.port)
            req = _fetch(version, offset=0, last_epoch=0, leader_epoch=node.core.epoch, topic_ok=False)
            resp = await _ask(conn, 1, version, req, 7)
            assert ErrorCode.INVALID_REQUEST in _codes(resp)
            await conn.close()
        finally:
            await node.close()
    run(main())
