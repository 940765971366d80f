"""KRaft's RPCs as the Raft core reads and writes them: Kafka's own protocol message objects
(``kraft.protocol``), for the one metadata partition ``__cluster_metadata``-0.

There is no second representation of a Raft message and no translation layer: the core takes
the decoded wire request and answers with the wire response the network encodes. This module
holds what every RPC shares:

* builders that wrap one partition in KRaft's Topics[Partitions[...]] nesting, always in the
  newest form of the message (what an older negotiated version cannot carry is the server's
  business, ``kraft.server.wire_versions``);
* where an error code goes: errors about the whole request (cluster id, malformed request) at
  the top level, the rest on the partition, as Kafka's KafkaRaftClient answers;
* the check that an inbound request addresses exactly our partition: anything else is a
  top-level INVALID_REQUEST, "until we support multi-raft" as Kafka says (FetchSnapshot and
  DescribeQuorum answer UNKNOWN_TOPIC_OR_PARTITION on the partition instead);
* log directory ids, which the wire carries as UUIDs (zero = unknown) and ``ReplicaKey`` as
  ``bytes | None``.

Absent optional structs (Fetch's DivergingEpoch, SnapshotId, CurrentLeader) are present on the object
with -1 fields, as the codec decodes them. No I/O, no Raft decisions.
"""

from __future__ import annotations

from kraft.errors import ErrorCode
from kraft.protocol import (METADATA_TOPIC_ID, ZERO_UUID, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
                            DescribeQuorumRequest, DescribeQuorumResponse, EndQuorumEpochRequest,
                            EndQuorumEpochResponse, FetchRequest, FetchResponse, FetchSnapshotRequest,
                            FetchSnapshotResponse, VoteRequest, VoteResponse)
from kraft.protocol.primitives import uuid_bytes, uuid_from_wire
from kraft.types import OffsetAndEpoch

TOPIC = "__cluster_metadata"
PARTITION = 0
NO_DIRECTORY = ZERO_UUID
DEFAULT_FETCH_MAX_BYTES = 8 * 1024 * 1024

WHOLE_REQUEST_ERRORS = frozenset({ErrorCode.INCONSISTENT_CLUSTER_ID, ErrorCode.INVALID_REQUEST,
                                  ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION})

RESPONSE_TYPES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse,
                  FetchSnapshotResponse, DescribeQuorumResponse)


# --- directory ids -----------------------------------------------------------------------

_UUID = type(ZERO_UUID)


def directory_uuid(directory_id: bytes | None):
    return uuid_from_wire(directory_id) if directory_id else NO_DIRECTORY


def directory_bytes(u) -> bytes | None:
    if u is None or u is NO_DIRECTORY:  # a decoded zero id is the very object
        return None
    if type(u) is _UUID:
        return None if u.int == 0 else uuid_bytes(u)  # C-level, not UUID.__eq__ / .bytes
    return None if u == NO_DIRECTORY else u.bytes


def split_error(code: int) -> tuple[int, int]:
    """(top-level, partition-level) error codes for one error."""
    return (int(code), 0) if code in WHOLE_REQUEST_ERRORS else (0, int(code))


# --- the one partition of an inbound request ----------------------------------------------


def named_partition(r):
    """The partition of a Vote, Begin/EndQuorumEpoch or DescribeQuorum request if it names
    exactly ``__cluster_metadata``-0, else None."""
    topics = r.topics
    if len(topics) != 1:
        return None
    t = topics[0]
    parts = t.partitions
    if len(parts) != 1 or t.topic_name != TOPIC or parts[0].partition_index != PARTITION:
        return None
    return parts[0]


def fetch_partition(r: FetchRequest):
    """The partition of a Fetch if it is exactly the metadata topic (by id) partition 0."""
    topics = r.topics
    if len(topics) != 1:
        return None
    t = topics[0]
    parts = t.partitions
    if len(parts) != 1 or parts[0].partition != PARTITION:
        return None
    # A decoded topic id is the METADATA_TOPIC_ID object itself (uuid_from_wire): ``is``
    # first, UUID.__eq__ only for other values.
    if t.topic_id is not METADATA_TOPIC_ID and t.topic_id != METADATA_TOPIC_ID:
        return None
    return parts[0]


def fetch_snapshot_partition(r: FetchSnapshotRequest):
    """(partition, error): error INVALID_REQUEST unless there is one topic with one partition,
    UNKNOWN_TOPIC_OR_PARTITION when that one is not ours, INVALID_REQUEST for a negative
    snapshot id or position; ``(partition, None)`` when valid."""
    topics = r.topics
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        return None, ErrorCode.INVALID_REQUEST
    t = topics[0]
    p = t.partitions[0]
    if t.name != TOPIC or p.partition != PARTITION:
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if p.position < 0 or p.snapshot_id.end_offset < 0 or p.snapshot_id.epoch < 0:
        return None, ErrorCode.INVALID_REQUEST
    return p, None


def request_source(r) -> int:
    """The node id a request names as its sender (-1 if it names none): Fetch and
    FetchSnapshot their replica, Vote its candidate, Begin/EndQuorumEpoch their leader."""
    t = type(r)
    if t is FetchRequest:
        return r.replica_state.replica_id
    if t is FetchSnapshotRequest:
        return r.replica_id
    if t in (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest):
        p = named_partition(r)
        if p is not None:
            return p.replica_id if t is VoteRequest else p.leader_id
    return -1


# --- the one partition of a response ----------------------------------------------------------


def response_partition(resp):
    """The first partition of a response, or None when it has none (a malformed answer)."""
    topics = resp.responses if type(resp) is FetchResponse else resp.topics
    if not topics or not topics[0].partitions:
        return None
    return topics[0].partitions[0]


def response_error(resp) -> int:
    """The response's error code: the top-level one if set, else its partition's."""
    if resp.error_code:
        return resp.error_code
    p = response_partition(resp)
    return p.error_code if p is not None else 0


# --- Vote (52) --------------------------------------------------------------------------------


def vote_request(candidate_epoch: int, candidate_id: int, last_offset_epoch: int, last_offset: int,
                 pre_vote: bool = False, candidate_directory_id: bytes | None = None, voter_id: int = -1,
                 voter_directory_id: bytes | None = None, cluster_id: str | None = None) -> VoteRequest:
    """``candidate_epoch``: the bumped epoch of a candidate, or a prospective's current epoch
    for a pre-vote (KIP-996)."""
    W = VoteRequest
    return W(cluster_id=cluster_id, voter_id=voter_id, topics=[W.Topic(topic_name=TOPIC, partitions=[
        W.Topic.Partition(partition_index=PARTITION, replica_epoch=candidate_epoch, replica_id=candidate_id,
                          replica_directory_id=directory_uuid(candidate_directory_id),
                          voter_directory_id=directory_uuid(voter_directory_id),
                          last_offset_epoch=last_offset_epoch, last_offset=last_offset, pre_vote=pre_vote)])])


def vote_response(error_code: int, leader_id: int, leader_epoch: int, vote_granted: bool = False) -> VoteResponse:
    W = VoteResponse
    top, part = split_error(error_code)
    return W(error_code=top, topics=[W.Topic(topic_name=TOPIC, partitions=[W.Topic.Partition(
        partition_index=PARTITION, error_code=part, leader_id=leader_id, leader_epoch=leader_epoch,
        vote_granted=vote_granted)])])


# --- BeginQuorumEpoch (53) / EndQuorumEpoch (54) ------------------------------------------------


def begin_quorum_epoch_request(leader_id: int, leader_epoch: int, voter_id: int = -1,
                               voter_directory_id: bytes | None = None,
                               cluster_id: str | None = None, leader_endpoints=()) -> BeginQuorumEpochRequest:
    """``leader_endpoints``: the leader's listeners (``Endpoint``s), so that a voter that has
    no address for it (a new voter whose Voters entry has none yet) can fetch (KIP-853)."""
    W = BeginQuorumEpochRequest
    return W(cluster_id=cluster_id, voter_id=voter_id, topics=[W.Topic(topic_name=TOPIC, partitions=[
        W.Topic.Partition(partition_index=PARTITION, voter_directory_id=directory_uuid(voter_directory_id),
                          leader_id=leader_id, leader_epoch=leader_epoch)])],
             leader_endpoints=[W.LeaderEndpoint(name=e.name, host=e.host, port=e.port) for e in leader_endpoints])


def begin_quorum_epoch_response(error_code: int, leader_id: int, leader_epoch: int) -> BeginQuorumEpochResponse:
    return _epoch_response(BeginQuorumEpochResponse, error_code, leader_id, leader_epoch)


def end_quorum_epoch_request(leader_id: int, leader_epoch: int, preferred_successors=(),
                             cluster_id: str | None = None) -> EndQuorumEpochRequest:
    """``preferred_successors``: voter ids, most up-to-date first."""
    W = EndQuorumEpochRequest
    P = W.Topic.Partition
    return W(cluster_id=cluster_id, topics=[W.Topic(topic_name=TOPIC, partitions=[P(
        partition_index=PARTITION, leader_id=leader_id, leader_epoch=leader_epoch,
        preferred_candidates=[P.ReplicaInfo(candidate_id=c, candidate_directory_id=NO_DIRECTORY)
                              for c in preferred_successors])])])


def end_quorum_epoch_response(error_code: int, leader_id: int, leader_epoch: int) -> EndQuorumEpochResponse:
    return _epoch_response(EndQuorumEpochResponse, error_code, leader_id, leader_epoch)


def _epoch_response(W, error_code: int, leader_id: int, leader_epoch: int):
    top, part = split_error(error_code)
    return W(error_code=top, topics=[W.Topic(topic_name=TOPIC, partitions=[W.Topic.Partition(
        partition_index=PARTITION, error_code=part, leader_id=leader_id, leader_epoch=leader_epoch)])])


# --- Fetch (1) ---------------------------------------------------------------------------------

_FP = FetchResponse.Topic.Partition
_LEADER = FetchResponse.LeaderIdAndEpoch
_DIVERGING = FetchResponse.EpochEndOffset
_SNAPSHOT = FetchResponse.SnapshotId
# Absent DivergingEpoch / SnapshotId of the answers we build: one shared instance each, as
# almost every answer has neither (Fetch is the hot path). Never mutated: the core only reads
# messages, and wire_versions replaces these fields instead of editing them.
_NO_DIVERGING = _DIVERGING()
_NO_SNAPSHOT = _SNAPSHOT()


def fetch_request(replica_id: int, current_leader_epoch: int, fetch_offset: int, last_fetched_epoch: int,
                  max_wait_ms: int = 0, max_bytes: int = DEFAULT_FETCH_MAX_BYTES, replica_epoch: int = -1,
                  replica_directory_id: bytes | None = None, cluster_id: str | None = None) -> FetchRequest:
    W = FetchRequest
    return W(cluster_id=cluster_id, replica_state=W.ReplicaState(replica_id=replica_id, replica_epoch=replica_epoch),
             max_wait_ms=max_wait_ms, min_bytes=0, max_bytes=max_bytes, topics=[W.Topic(
                 topic_id=METADATA_TOPIC_ID, partitions=[W.Topic.Partition(
                     partition=PARTITION, current_leader_epoch=current_leader_epoch, fetch_offset=fetch_offset,
                     last_fetched_epoch=last_fetched_epoch, partition_max_bytes=max_bytes,
                     replica_directory_id=directory_uuid(replica_directory_id))])])


def fetch_response(error_code: int, leader_id: int, leader_epoch: int, high_watermark: int = -1,
                   log_start_offset: int = -1, records=b"", diverging_epoch: OffsetAndEpoch | None = None,
                   snapshot_id: OffsetAndEpoch | None = None) -> FetchResponse:
    """``diverging_epoch``: where the follower's copy of the leader's epoch ends (its
    ``offset`` is Kafka's DivergingEpoch.EndOffset); ``snapshot_id``: the snapshot the
    follower must load instead of fetching."""
    top, part = split_error(error_code)
    p = _FP(partition_index=PARTITION, error_code=part, high_watermark=high_watermark,
            log_start_offset=log_start_offset, records=records,
            current_leader=_LEADER(leader_id=leader_id, leader_epoch=leader_epoch),
            diverging_epoch=_NO_DIVERGING if diverging_epoch is None else _DIVERGING(
                epoch=diverging_epoch.epoch, end_offset=diverging_epoch.offset),
            snapshot_id=_NO_SNAPSHOT if snapshot_id is None else _SNAPSHOT(
                end_offset=snapshot_id.offset, epoch=snapshot_id.epoch))
    return FetchResponse(error_code=top, responses=[FetchResponse.Topic(topic=TOPIC, topic_id=METADATA_TOPIC_ID,
                                                                        partitions=[p])])


# --- FetchSnapshot (59) ------------------------------------------------------------------------


def fetch_snapshot_request(replica_id: int, current_leader_epoch: int, snapshot_id: OffsetAndEpoch, position: int,
                           max_bytes: int = DEFAULT_FETCH_MAX_BYTES, replica_directory_id: bytes | None = None,
                           cluster_id: str | None = None) -> FetchSnapshotRequest:
    W = FetchSnapshotRequest
    return W(cluster_id=cluster_id, replica_id=replica_id, max_bytes=max_bytes, topics=[W.Topic(
        name=TOPIC, partitions=[W.Topic.Partition(
            partition=PARTITION, current_leader_epoch=current_leader_epoch,
            snapshot_id=W.SnapshotId(end_offset=snapshot_id.offset, epoch=snapshot_id.epoch), position=position,
            replica_directory_id=directory_uuid(replica_directory_id))])])


def fetch_snapshot_response(error_code: int, leader_id: int, leader_epoch: int,
                            snapshot_id: OffsetAndEpoch | None = None, size: int = -1, position: int = -1,
                            unaligned_records=b"") -> FetchSnapshotResponse:
    W = FetchSnapshotResponse
    top, part = split_error(error_code)
    sid = snapshot_id or OffsetAndEpoch(-1, -1)
    p = W.Topic.Partition(index=PARTITION, error_code=part, snapshot_id=W.SnapshotId(end_offset=sid.offset,
                                                                                      epoch=sid.epoch),
                          current_leader=W.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch),
                          size=size, position=position, unaligned_records=unaligned_records)
    return W(error_code=top, topics=[W.Topic(name=TOPIC, partitions=[p])])


def snapshot_id_of(wire_snapshot_id) -> OffsetAndEpoch:
    return OffsetAndEpoch(wire_snapshot_id.end_offset, wire_snapshot_id.epoch)


# --- DescribeQuorum (55) -----------------------------------------------------------------------


def describe_quorum_request() -> DescribeQuorumRequest:
    W = DescribeQuorumRequest
    return W(topics=[W.Topic(topic_name=TOPIC, partitions=[W.Topic.Partition(partition_index=PARTITION)])])


def replica_state(replica_id: int, directory_id: bytes | None, log_end_offset: int, last_fetch_timestamp: int = -1,
                  last_caught_up_timestamp: int = -1):
    """One voter or observer in a DescribeQuorum answer (``log_end_offset`` -1 if unknown)."""
    return DescribeQuorumResponse.ReplicaState(
        replica_id=replica_id, replica_directory_id=directory_uuid(directory_id), log_end_offset=log_end_offset,
        last_fetch_timestamp=last_fetch_timestamp, last_caught_up_timestamp=last_caught_up_timestamp)


def describe_quorum_response(error_code: int, leader_id: int, leader_epoch: int, high_watermark: int = -1,
                             current_voters=(), observers=(), target=None) -> DescribeQuorumResponse:
    """``target``: the reassignment's target VoterSet, reported in kraft's TargetVoters tag."""
    W = DescribeQuorumResponse
    top, part = split_error(error_code)
    p = W.Topic.Partition(partition_index=PARTITION, error_code=part, leader_id=leader_id, leader_epoch=leader_epoch,
                          high_watermark=high_watermark, current_voters=list(current_voters),
                          observers=list(observers))
    targets = None if target is None else [W.TargetVoter(voter_id=k.id, voter_directory_id=directory_uuid(
        k.directory_id)) for k in target.keys()]
    return W(error_code=top, topics=[W.Topic(topic_name=TOPIC, partitions=[p])], target_voters=targets)


def describe_quorum_unknown_partitions(r: DescribeQuorumRequest) -> DescribeQuorumResponse:
    """Kafka's getPartitionLevelErrorResponse: every partition asked for, with
    UNKNOWN_TOPIC_OR_PARTITION (one for ours when none was named)."""
    code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not any(t.partitions for t in r.topics):
        return describe_quorum_response(code, -1, -1)
    W = DescribeQuorumResponse
    return W(topics=[W.Topic(topic_name=t.topic_name, partitions=[
        W.Topic.Partition(partition_index=p.partition_index, error_code=code, leader_id=-1, leader_epoch=-1,
                          high_watermark=-1) for p in t.partitions]) for t in r.topics])
