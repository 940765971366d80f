"""The KRaft RPCs on the wire: what the core builds survives the codec at the versions we send,
old versions are brought to the newest form on the way in (kraft/server/wire_versions.py) and
answered in a form they can carry on the way out. The core consumes the decoded objects
themselves, so there is no translation to test beyond these edges."""

import uuid

import pytest

from kraft.errors import ErrorCode
from kraft.protocol import (METADATA_TOPIC_ID, ZERO_UUID, DescribeQuorumResponse, EndQuorumEpochRequest, FetchRequest,
                            FetchResponse, VoteRequest)
from kraft.raft import OffsetAndEpoch, rpcs
from kraft.server.wire_versions import SEND_VERSIONS, ResponseFitter, upgrade_request

ENDPOINTS = [(1, "localhost", 9093), (2, "localhost", 9094)]
DIR = uuid.UUID(int=7).bytes

REQUESTS = [
    rpcs.fetch_request(2, 3, 10, 2, max_wait_ms=500, replica_directory_id=DIR, cluster_id="c"),
    rpcs.vote_request(4, 1, 3, 99, pre_vote=True, candidate_directory_id=DIR, voter_id=2, cluster_id="c"),
    rpcs.vote_request(5, 3, 0, 0),
    rpcs.begin_quorum_epoch_request(1, 5, voter_id=2, voter_directory_id=DIR, cluster_id="c"),
    rpcs.end_quorum_epoch_request(1, 5, (2, 3), cluster_id="c"),
    rpcs.fetch_snapshot_request(2, 5, OffsetAndEpoch(100, 4), 4096, replica_directory_id=DIR, cluster_id="c"),
]


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: type(r).__name__)
def test_every_request_the_core_sends_survives_the_codec_at_its_send_version(req):
    version = SEND_VERSIONS[type(req)]
    assert type(req).decode(req.encode(version), version) == req


RESPONSES = [
    rpcs.fetch_response(0, 1, 5, 7, 0, b"abc", diverging_epoch=OffsetAndEpoch(40, 3)),
    rpcs.fetch_response(0, 1, 5, 7, 50, snapshot_id=OffsetAndEpoch(50, 2)),
    rpcs.fetch_response(ErrorCode.INCONSISTENT_CLUSTER_ID, -1, -1),
    rpcs.fetch_response(ErrorCode.FENCED_LEADER_EPOCH, 2, 9),
    rpcs.vote_response(0, -1, 4, True),
    rpcs.begin_quorum_epoch_response(74, 1, 6),
    rpcs.end_quorum_epoch_response(0, 1, 6),
    rpcs.fetch_snapshot_response(0, 1, 6, OffsetAndEpoch(100, 4), 1000, 0, b"xyz"),
]
SEND_VERSION_OF_API = {cls.API_KEY: v for cls, v in SEND_VERSIONS.items()}


@pytest.mark.parametrize("resp", RESPONSES, ids=lambda r: type(r).__name__)
def test_every_response_survives_the_codec_at_our_send_version_with_endpoints(resp):
    version = SEND_VERSION_OF_API[resp.API_KEY]
    fitted = ResponseFitter(ENDPOINTS).fit(resp, version)
    decoded = type(fitted).decode(fitted.encode(version), version)
    # Kafka's RaftUtil names the leader the answer reports (when it is known), no one else.
    leader = rpcs.response_partition(resp)
    leader = leader.leader_id if hasattr(leader, "leader_id") else leader.current_leader.leader_id
    assert [(e.node_id, e.host, e.port) for e in decoded.node_endpoints] == [e for e in ENDPOINTS if e[0] == leader]
    assert rpcs.response_error(decoded) == rpcs.response_error(resp)
    if isinstance(fitted, FetchResponse):
        fitted.responses[0].topic = ""  # addressed by topic id only from v13
    assert decoded.to_dict() == fitted.to_dict()


def test_whole_request_errors_go_top_level_and_others_to_the_partition():
    wire = rpcs.fetch_response(ErrorCode.INCONSISTENT_CLUSTER_ID, -1, -1)
    assert wire.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID and wire.responses[0].partitions[0].error_code == 0
    wire = rpcs.fetch_response(ErrorCode.FENCED_LEADER_EPOCH, 1, 3)
    assert wire.error_code == 0 and wire.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH


def test_old_fetch_versions_address_the_topic_by_name_and_the_replica_at_the_top():
    wire = FetchRequest(replica_id=3, max_wait_ms=100, min_bytes=1, topics=[FetchRequest.Topic(
        topic="__cluster_metadata", partitions=[FetchRequest.Topic.Partition(
            partition=0, current_leader_epoch=2, fetch_offset=5, last_fetched_epoch=1,
            partition_max_bytes=1000)])])
    decoded = FetchRequest.decode(wire.encode(12), 12)
    assert rpcs.fetch_partition(decoded) is None  # no topic id before v13
    upgrade_request(decoded, 12)
    p = rpcs.fetch_partition(decoded)
    assert decoded.topics[0].topic_id == METADATA_TOPIC_ID and decoded.replica_state.replica_id == 3
    assert (p.fetch_offset, p.last_fetched_epoch, p.partition_max_bytes) == (5, 1, 1000)


def test_an_old_fetch_for_another_topic_name_stays_unaddressed():
    wire = FetchRequest(replica_id=3, topics=[FetchRequest.Topic(topic="other", partitions=[
        FetchRequest.Topic.Partition(partition=0, fetch_offset=5, partition_max_bytes=1000)])])
    decoded = FetchRequest.decode(wire.encode(11), 11)
    upgrade_request(decoded, 11)
    assert rpcs.fetch_partition(decoded) is None


def test_end_quorum_epoch_v0_successor_ids_become_candidates():
    wire = EndQuorumEpochRequest(topics=[EndQuorumEpochRequest.Topic(topic_name="__cluster_metadata", partitions=[
        EndQuorumEpochRequest.Topic.Partition(partition_index=0, leader_id=1, leader_epoch=4,
                                              preferred_successors=[3, 2])])])
    decoded = EndQuorumEpochRequest.decode(wire.encode(0), 0)
    upgrade_request(decoded, 0)
    assert [c.candidate_id for c in rpcs.named_partition(decoded).preferred_candidates] == [3, 2]


def test_vote_v2_carries_pre_vote():
    wire = rpcs.vote_request(4, 1, 3, 99, pre_vote=True)
    assert VoteRequest.decode(wire.encode(2), 2).topics[0].partitions[0].pre_vote is True


@pytest.mark.parametrize("version", range(4, 12))
def test_fetch_before_v12_degrades_a_diverging_log_to_offset_out_of_range(version):
    resp = ResponseFitter(ENDPOINTS).fit(rpcs.fetch_response(0, 1, 5, 7, 0, diverging_epoch=OffsetAndEpoch(40, 3)),
                                         version)
    decoded = FetchResponse.decode(resp.encode(version), version)
    p = decoded.responses[0].partitions[0]
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and not p.records
    assert p.current_leader.leader_id == -1 and not decoded.node_endpoints


@pytest.mark.parametrize("version", [4, 5, 6, 7, 12, 17])
def test_fetch_request_level_errors_stay_visible_at_every_version(version):
    """v4-6 have no top-level ErrorCode: there the error moves onto the partition."""
    resp = ResponseFitter(ENDPOINTS).fit(rpcs.fetch_response(ErrorCode.INVALID_REQUEST, -1, -1), version)
    decoded = FetchResponse.decode(resp.encode(version), version)
    assert rpcs.response_error(decoded) == ErrorCode.INVALID_REQUEST
    assert (decoded.error_code == 0) == (version < 7)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_carries_directory_ids_and_nodes_only_from_v2(version):
    voters = [rpcs.replica_state(1, DIR, 10, 5, 5), rpcs.replica_state(2, None, -1)]
    resp = ResponseFitter(ENDPOINTS).fit(rpcs.describe_quorum_response(0, 1, 3, 10, voters), version)
    decoded = DescribeQuorumResponse.decode(resp.encode(version), version)
    got = decoded.topics[0].partitions[0].current_voters
    assert [v.replica_id for v in got] == [1, 2] and got[0].log_end_offset == 10
    assert got[0].replica_directory_id == (uuid.UUID(bytes=DIR) if version >= 2 else ZERO_UUID)
    assert len(decoded.nodes) == (2 if version >= 2 else 0)
