"""Raft core messages survive the trip through Kafka's wire schemas unchanged, and the
singleton-partition rules of KRaft RPCs are enforced on the way in."""

import pytest

from kraft.errors import ErrorCode, InvalidRequestError
from kraft.protocol import METADATA_TOPIC_ID, FetchRequest, VoteRequest
from kraft.raft import messages as rm
from kraft.server import raft_wire as w

REQUESTS = [
    rm.FetchRequest(replica_id=2, current_leader_epoch=3, fetch_offset=10, last_fetched_epoch=2,
                    max_wait_ms=500, replica_epoch=-1, cluster_id="c"),
    rm.VoteRequest(candidate_epoch=4, candidate_id=1, last_offset_epoch=3, last_offset=99, pre_vote=True,
                   voter_id=2, cluster_id="c"),
    rm.VoteRequest(candidate_epoch=5, candidate_id=3, last_offset_epoch=0, last_offset=0, pre_vote=False),
    rm.BeginQuorumEpochRequest(leader_id=1, leader_epoch=5, voter_id=2, cluster_id="c"),
    rm.EndQuorumEpochRequest(leader_id=1, leader_epoch=5, preferred_successors=(2, 3), cluster_id="c"),
    rm.FetchSnapshotRequest(replica_id=2, current_leader_epoch=5, snapshot_id=rm.OffsetAndEpoch(100, 4),
                            position=4096, cluster_id="c"),
]


def _plain(msg):
    """memoryview fields (zero-copy records) as bytes, for comparison."""
    return type(msg)(**{f: bytes(v) if isinstance(v, memoryview) else v
                        for f in msg.__dataclass_fields__ for v in [getattr(msg, f)]})


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: type(r).__name__)
def test_request_round_trips_through_the_wire(req):
    wire, version = w.request_to_wire(req)
    decoded = type(wire).decode(wire.encode(version), version)
    assert w.request_from_wire(decoded, version) == req


RESPONSES = [
    (rm.FetchRequest, rm.FetchResponse(error_code=0, leader_id=1, leader_epoch=5, high_watermark=7,
                                       log_start_offset=0, records=b"abc",
                                       diverging_epoch=rm.EpochEndOffset(3, 40))),
    (rm.FetchRequest, rm.FetchResponse(error_code=0, leader_id=1, leader_epoch=5, high_watermark=7,
                                       log_start_offset=50, snapshot_id=rm.OffsetAndEpoch(50, 2))),
    (rm.FetchRequest, rm.FetchResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID, leader_id=-1,
                                       leader_epoch=-1)),
    (rm.FetchRequest, rm.FetchResponse(error_code=ErrorCode.FENCED_LEADER_EPOCH, leader_id=2, leader_epoch=9)),
    (rm.VoteRequest, rm.VoteResponse(error_code=0, leader_id=-1, leader_epoch=4, vote_granted=True)),
    (rm.BeginQuorumEpochRequest, rm.BeginQuorumEpochResponse(error_code=74, leader_id=1, leader_epoch=6)),
    (rm.EndQuorumEpochRequest, rm.EndQuorumEpochResponse(error_code=0, leader_id=1, leader_epoch=6)),
    (rm.FetchSnapshotRequest, rm.FetchSnapshotResponse(error_code=0, leader_id=1, leader_epoch=6,
                                                       snapshot_id=rm.OffsetAndEpoch(100, 4), size=1000,
                                                       position=0, unaligned_records=b"xyz")),
]


@pytest.mark.parametrize("request_type,resp", RESPONSES, ids=lambda x: getattr(x, "__name__", ""))
def test_response_round_trips_through_the_wire(request_type, resp):
    version = w.SEND_VERSIONS[request_type]
    wire = w.response_to_wire(resp, version, [(1, "localhost", 9093)])
    decoded = type(wire).decode(wire.encode(version), version)
    assert _plain(w.response_from_wire(decoded, request_type)) == resp


def test_whole_request_errors_go_top_level_and_others_to_the_partition():
    wire = w.response_to_wire(rm.FetchResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID, leader_id=-1,
                                               leader_epoch=-1), 17)
    assert wire.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert wire.responses[0].partitions[0].error_code == 0
    wire = w.response_to_wire(rm.FetchResponse(error_code=ErrorCode.FENCED_LEADER_EPOCH, leader_id=1,
                                               leader_epoch=3), 17)
    assert wire.error_code == 0 and wire.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH


def test_fetch_for_another_partition_is_invalid_request_as_in_kafka():
    wire, version = w.request_to_wire(REQUESTS[0])
    wire.topics[0].partitions[0].partition = 1
    with pytest.raises(w.WrongPartition) as info:
        w.request_from_wire(wire, version)
    assert info.value.code == ErrorCode.INVALID_REQUEST


def test_fetch_snapshot_for_another_partition_is_unknown_topic_or_partition():
    wire, version = w.request_to_wire(REQUESTS[-1])
    wire.topics[0].name = "other"
    with pytest.raises(w.WrongPartition) as info:
        w.request_from_wire(wire, version)
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_request_with_two_partitions_is_invalid():
    wire, version = w.request_to_wire(REQUESTS[1])
    wire.topics[0].partitions.append(wire.topics[0].partitions[0])
    with pytest.raises(InvalidRequestError) as info:
        w.request_from_wire(wire, version)
    assert info.value.code == ErrorCode.INVALID_REQUEST


def test_old_fetch_versions_address_the_topic_by_name():
    wire = FetchRequest(replica_id=3, max_wait_ms=100, min_bytes=1, topics=[FetchRequest.Topic(
        topic="__cluster_metadata", partitions=[FetchRequest.Topic.Partition(
            partition=0, current_leader_epoch=2, fetch_offset=5, last_fetched_epoch=1,
            partition_max_bytes=1000)])])
    req = w.request_from_wire(FetchRequest.decode(wire.encode(12), 12), 12)
    assert (req.replica_id, req.fetch_offset, req.last_fetched_epoch, req.max_bytes) == (3, 5, 1, 1000)
    v17, _ = w.request_to_wire(req)
    assert v17.topics[0].topic_id == METADATA_TOPIC_ID


def test_vote_v2_carries_pre_vote():
    wire, version = w.request_to_wire(REQUESTS[1])
    assert version == 2
    assert VoteRequest.decode(wire.encode(2), 2).topics[0].partitions[0].pre_vote is True
