"""Translate between the Raft core's message dataclasses and Kafka's wire messages.

KRaft RPCs wrap one partition (``__cluster_metadata``-0) in Topics[Partitions[...]]; here
that wrapping is added on the way out and checked on the way in. As in Kafka's
KafkaRaftClient, anything but exactly our one topic-partition is a top-level
INVALID_REQUEST ("until we support multi-raft, we treat individual topic partition
mismatches as invalid requests"), except FetchSnapshot, which answers
UNKNOWN_TOPIC_OR_PARTITION at partition level. Errors that concern the whole request (cluster id, malformed
request) go in the top-level error code, the rest at partition level, as Kafka does. Pure
functions: no I/O, no Raft decisions.
"""

from __future__ import annotations

import uuid

from kraft.errors import ErrorCode, InvalidRequestError
from kraft.protocol import (METADATA_TOPIC_ID, ZERO_UUID, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
                            DescribeQuorumResponse, EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest,
                            FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, VoteRequest, VoteResponse)
from kraft.raft import messages as rm

TOPIC = "__cluster_metadata"
PARTITION = 0
# Versions we send to peers (the newest we implement; peers are kraft nodes).
SEND_VERSIONS = {rm.VoteRequest: 2, rm.BeginQuorumEpochRequest: 1, rm.EndQuorumEpochRequest: 1,
                 rm.FetchRequest: 17, rm.FetchSnapshotRequest: 1}
_WHOLE_REQUEST_ERRORS = {ErrorCode.INCONSISTENT_CLUSTER_ID, ErrorCode.INVALID_REQUEST,
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_VERSION}


class WrongPartition(InvalidRequestError):
    """A request for a topic-partition other than ours; INVALID_REQUEST except for
    FetchSnapshot (see the module docstring)."""

    code = ErrorCode.INVALID_REQUEST


def _uuid(b: bytes | None) -> uuid.UUID:
    return uuid.UUID(bytes=b) if b else ZERO_UUID


def _dir(u) -> bytes | None:
    return None if u is None or u == ZERO_UUID else u.bytes


def _split(code: int) -> tuple[int, int]:
    """(top-level, partition-level) error codes."""
    return (code, 0) if code in _WHOLE_REQUEST_ERRORS else (0, code)


def _single(topics, name_of, partitions_of, index_of, by_id=False):
    if len(topics) != 1 or len(partitions_of(topics[0])) != 1:
        raise InvalidRequestError("KRaft requests carry exactly one topic with one partition")
    t = topics[0]
    p = partitions_of(t)[0]
    if (name_of(t) != (METADATA_TOPIC_ID if by_id else TOPIC)) or index_of(p) != PARTITION:
        raise WrongPartition(f"not {TOPIC}-{PARTITION}")
    return p


# --- requests: core -> wire ------------------------------------------------------------


def request_to_wire(req):
    """(wire request, version) for a core request."""
    if isinstance(req, rm.FetchRequest):
        W = FetchRequest
        return W(cluster_id=req.cluster_id, replica_state=W.ReplicaState(replica_id=req.replica_id,
                                                                          replica_epoch=req.replica_epoch),
                 max_wait_ms=req.max_wait_ms, min_bytes=0, max_bytes=req.max_bytes, topics=[W.Topic(
                     topic_id=METADATA_TOPIC_ID, partitions=[W.Topic.Partition(
                         partition=PARTITION, current_leader_epoch=req.current_leader_epoch,
                         fetch_offset=req.fetch_offset, last_fetched_epoch=req.last_fetched_epoch,
                         partition_max_bytes=req.max_bytes,
                         replica_directory_id=_uuid(req.replica_directory_id))])]), 17
    if isinstance(req, rm.VoteRequest):
        W = VoteRequest
        return W(cluster_id=req.cluster_id, voter_id=req.voter_id, topics=[W.Topic(
            topic_name=TOPIC, partitions=[W.Topic.Partition(
                partition_index=PARTITION, replica_epoch=req.candidate_epoch, replica_id=req.candidate_id,
                replica_directory_id=_uuid(req.candidate_directory_id),
                voter_directory_id=_uuid(req.voter_directory_id), last_offset_epoch=req.last_offset_epoch,
                last_offset=req.last_offset, pre_vote=req.pre_vote)])]), 2
    if isinstance(req, rm.BeginQuorumEpochRequest):
        W = BeginQuorumEpochRequest
        return W(cluster_id=req.cluster_id, voter_id=req.voter_id, topics=[W.Topic(
            topic_name=TOPIC, partitions=[W.Topic.Partition(
                partition_index=PARTITION, voter_directory_id=_uuid(req.voter_directory_id),
                leader_id=req.leader_id, leader_epoch=req.leader_epoch)])]), 1
    if isinstance(req, rm.EndQuorumEpochRequest):
        W = EndQuorumEpochRequest
        P = W.Topic.Partition
        return W(cluster_id=req.cluster_id, topics=[W.Topic(topic_name=TOPIC, partitions=[P(
            partition_index=PARTITION, leader_id=req.leader_id, leader_epoch=req.leader_epoch,
            preferred_candidates=[P.ReplicaInfo(candidate_id=c, candidate_directory_id=ZERO_UUID)
                                  for c in req.preferred_successors])])]), 1
    if isinstance(req, rm.FetchSnapshotRequest):
        W = FetchSnapshotRequest
        P = W.Topic.Partition
        return W(cluster_id=req.cluster_id, replica_id=req.replica_id, max_bytes=req.max_bytes, topics=[W.Topic(
            name=TOPIC, partitions=[P(partition=PARTITION, current_leader_epoch=req.current_leader_epoch,
                                      snapshot_id=W.SnapshotId(end_offset=req.snapshot_id.offset,
                                                               epoch=req.snapshot_id.epoch),
                                      position=req.position,
                                      replica_directory_id=_uuid(req.replica_directory_id))])]), 1
    raise TypeError(f"no wire form for {type(req).__name__}")


# --- requests: wire -> core --------------------------------------------------------------


def request_from_wire(wire, version: int):
    """The core request for a wire request; raises InvalidRequestError/WrongPartition."""
    if isinstance(wire, FetchRequest):
        by_id = version >= 13
        p = _single(wire.topics, (lambda t: t.topic_id) if by_id else (lambda t: t.topic),
                    lambda t: t.partitions, lambda p: p.partition, by_id)
        if version >= 15:
            rs = wire.replica_state
            replica_id, replica_epoch = (rs.replica_id, rs.replica_epoch) if rs is not None else (-1, -1)
        else:
            replica_id, replica_epoch = wire.replica_id, -1
        return rm.FetchRequest(replica_id=replica_id, current_leader_epoch=p.current_leader_epoch,
                               fetch_offset=p.fetch_offset, last_fetched_epoch=p.last_fetched_epoch,
                               max_wait_ms=max(0, wire.max_wait_ms),
                               max_bytes=max(0, min(wire.max_bytes, p.partition_max_bytes)),
                               replica_epoch=replica_epoch,
                               replica_directory_id=_dir(getattr(p, "replica_directory_id", None)),
                               cluster_id=wire.cluster_id)
    if isinstance(wire, VoteRequest):
        p = _single(wire.topics, lambda t: t.topic_name, lambda t: t.partitions, lambda p: p.partition_index)
        return rm.VoteRequest(candidate_epoch=p.replica_epoch, candidate_id=p.replica_id,
                              last_offset_epoch=p.last_offset_epoch, last_offset=p.last_offset,
                              pre_vote=bool(p.pre_vote), candidate_directory_id=_dir(p.replica_directory_id),
                              voter_id=wire.voter_id, voter_directory_id=_dir(p.voter_directory_id),
                              cluster_id=wire.cluster_id)
    if isinstance(wire, BeginQuorumEpochRequest):
        p = _single(wire.topics, lambda t: t.topic_name, lambda t: t.partitions, lambda p: p.partition_index)
        return rm.BeginQuorumEpochRequest(leader_id=p.leader_id, leader_epoch=p.leader_epoch,
                                          voter_id=wire.voter_id, voter_directory_id=_dir(p.voter_directory_id),
                                          cluster_id=wire.cluster_id)
    if isinstance(wire, EndQuorumEpochRequest):
        p = _single(wire.topics, lambda t: t.topic_name, lambda t: t.partitions, lambda p: p.partition_index)
        succ = (tuple(p.preferred_successors) if version == 0
                else tuple(c.candidate_id for c in p.preferred_candidates))
        return rm.EndQuorumEpochRequest(leader_id=p.leader_id, leader_epoch=p.leader_epoch,
                                        preferred_successors=succ, cluster_id=wire.cluster_id)
    if isinstance(wire, FetchSnapshotRequest):
        try:
            p = _single(wire.topics, lambda t: t.name, lambda t: t.partitions, lambda p: p.partition)
        except WrongPartition as exc:
            exc.code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            raise
        if p.position < 0 or p.snapshot_id.end_offset < 0 or p.snapshot_id.epoch < 0:
            raise InvalidRequestError("negative snapshot id or position")
        return rm.FetchSnapshotRequest(replica_id=wire.replica_id, current_leader_epoch=p.current_leader_epoch,
                                       snapshot_id=rm.OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch),
                                       position=p.position, max_bytes=max(0, wire.max_bytes),
                                       replica_directory_id=_dir(p.replica_directory_id),
                                       cluster_id=wire.cluster_id)
    raise TypeError(f"not a KRaft request: {type(wire).__name__}")


# --- responses: core -> wire -------------------------------------------------------------


def response_to_wire(resp, version: int, endpoints=()):
    """Wire response for a core response; ``endpoints`` = [(node_id, host, port)] of voters,
    sent in the node_endpoints field where the version has it so clients can find the leader."""
    top, part = _split(resp.error_code)
    if isinstance(resp, rm.FetchResponse):
        return _fetch_response_to_wire(resp, version, endpoints, top, part)
    if isinstance(resp, (rm.VoteResponse, rm.BeginQuorumEpochResponse, rm.EndQuorumEpochResponse)):
        W = {rm.VoteResponse: VoteResponse, rm.BeginQuorumEpochResponse: BeginQuorumEpochResponse,
             rm.EndQuorumEpochResponse: EndQuorumEpochResponse}[type(resp)]
        fields = dict(partition_index=PARTITION, error_code=part, leader_id=resp.leader_id,
                      leader_epoch=resp.leader_epoch)
        if isinstance(resp, rm.VoteResponse):
            fields["vote_granted"] = resp.vote_granted
        return W(error_code=top, topics=[W.Topic(topic_name=TOPIC, partitions=[W.Topic.Partition(**fields)])],
                 node_endpoints=[W.NodeEndpoint(node_id=i, host=h, port=pt) for i, h, pt in endpoints]
                 if version >= 1 else [])
    if isinstance(resp, rm.FetchSnapshotResponse):
        W = FetchSnapshotResponse
        sid = resp.snapshot_id or rm.OffsetAndEpoch(-1, -1)
        p = W.Topic.Partition(index=PARTITION, error_code=part,
                              snapshot_id=W.SnapshotId(end_offset=sid.offset, epoch=sid.epoch),
                              current_leader=W.LeaderIdAndEpoch(leader_id=resp.leader_id,
                                                                leader_epoch=resp.leader_epoch),
                              size=resp.size, position=resp.position, unaligned_records=resp.unaligned_records)
        return W(error_code=top, topics=[W.Topic(name=TOPIC, partitions=[p])],
                 node_endpoints=[W.NodeEndpoint(node_id=i, host=h, port=pt) for i, h, pt in endpoints]
                 if version >= 1 else [])
    if isinstance(resp, rm.DescribeQuorumResponse):
        return describe_quorum_to_wire(resp, version, endpoints)
    raise TypeError(f"no wire form for {type(resp).__name__}")


def _fetch_response_to_wire(resp, version: int, endpoints, top: int, part: int):
    """Fetch is advertised from v4, but KIP-595's fields only exist from v12: below that the
    answer degrades instead of failing to encode. CurrentLeader is left out (old clients
    rediscover the leader through metadata); a diverging log or a needed snapshot, which an
    old version cannot express, becomes OFFSET_OUT_OF_RANGE as a pre-KIP-595 leader answered
    a follower whose offset it could not serve (unreachable from the core, which refuses a
    Fetch without LastFetchedEpoch, but the wire form must stay total); v4-6 have no
    top-level ErrorCode, so a request-level error moves onto the partition."""
    W = FetchResponse
    p = W.Topic.Partition(partition_index=PARTITION, error_code=part, high_watermark=resp.high_watermark,
                          log_start_offset=resp.log_start_offset, records=resp.records)
    if version >= 12:
        p.current_leader = W.LeaderIdAndEpoch(leader_id=resp.leader_id, leader_epoch=resp.leader_epoch)
        if resp.diverging_epoch is not None:
            p.diverging_epoch = W.EpochEndOffset(epoch=resp.diverging_epoch.epoch,
                                                 end_offset=resp.diverging_epoch.end_offset)
        if resp.snapshot_id is not None:
            p.snapshot_id = W.SnapshotId(end_offset=resp.snapshot_id.offset, epoch=resp.snapshot_id.epoch)
    elif (resp.diverging_epoch is not None or resp.snapshot_id is not None) and not part:
        p.error_code = int(ErrorCode.OFFSET_OUT_OF_RANGE)
        p.records = b""
    if top and version < 7:
        top, p.error_code = 0, top
    t = W.Topic(topic=TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[p])
    return W(error_code=top, responses=[t], node_endpoints=[
        W.NodeEndpoint(node_id=i, host=h, port=pt) for i, h, pt in endpoints] if version >= 16 else [])


def describe_quorum_to_wire(resp, version: int, endpoints=(), listener: str = "CONTROLLER"):
    W = DescribeQuorumResponse
    RS = W.ReplicaState

    def rs(r):
        # ReplicaDirectoryId exists from v2; older versions leave it out, as Kafka's RaftUtil does.
        return RS(replica_id=r.replica_id, replica_directory_id=_uuid(r.replica_directory_id if version >= 2 else None),
                  log_end_offset=r.log_end_offset, last_fetch_timestamp=r.last_fetch_timestamp,
                  last_caught_up_timestamp=r.last_caught_up_timestamp)

    top, part = _split(resp.error_code)
    p = W.Topic.Partition(partition_index=PARTITION, error_code=part, leader_id=resp.leader_id,
                          leader_epoch=resp.leader_epoch, high_watermark=resp.high_watermark,
                          current_voters=[rs(r) for r in resp.current_voters],
                          observers=[rs(r) for r in resp.observers])
    nodes = [W.Node(node_id=i, listeners=[W.Node.Listener(name=listener, host=h, port=pt)])
             for i, h, pt in endpoints] if version >= 2 else []
    return W(error_code=top, topics=[W.Topic(topic_name=TOPIC, partitions=[p])], nodes=nodes)


# --- responses: wire -> core -------------------------------------------------------------


def response_from_wire(wire, request_type):
    """The core response for a peer's wire response to a request of ``request_type``."""
    top = wire.error_code if request_type is not rm.FetchRequest else (wire.error_code or 0)
    if request_type is rm.FetchRequest:
        if top:
            return rm.FetchResponse(error_code=top, leader_id=-1, leader_epoch=-1)
        p = wire.responses[0].partitions[0]
        cl = p.current_leader
        de = p.diverging_epoch
        sid = p.snapshot_id
        return rm.FetchResponse(
            error_code=p.error_code, leader_id=cl.leader_id if cl else -1, leader_epoch=cl.leader_epoch if cl else -1,
            high_watermark=p.high_watermark, log_start_offset=p.log_start_offset,
            records=p.records if p.records is not None else b"",
            diverging_epoch=rm.EpochEndOffset(de.epoch, de.end_offset) if de is not None and de.epoch >= 0 else None,
            snapshot_id=rm.OffsetAndEpoch(sid.end_offset, sid.epoch) if sid is not None and sid.end_offset >= 0
            else None)
    if request_type is rm.FetchSnapshotRequest:
        if top:
            return rm.FetchSnapshotResponse(error_code=top, leader_id=-1, leader_epoch=-1)
        p = wire.topics[0].partitions[0]
        cl = p.current_leader
        return rm.FetchSnapshotResponse(
            error_code=p.error_code, leader_id=cl.leader_id if cl else -1, leader_epoch=cl.leader_epoch if cl else -1,
            snapshot_id=rm.OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch),
            size=p.size, position=p.position, unaligned_records=p.unaligned_records or b"")
    cls = {rm.VoteRequest: rm.VoteResponse, rm.BeginQuorumEpochRequest: rm.BeginQuorumEpochResponse,
           rm.EndQuorumEpochRequest: rm.EndQuorumEpochResponse}[request_type]
    if top or not wire.topics or not wire.topics[0].partitions:
        return cls(error_code=top or ErrorCode.UNKNOWN_SERVER_ERROR, leader_id=-1, leader_epoch=-1)
    p = wire.topics[0].partitions[0]
    if cls is rm.VoteResponse:
        return cls(error_code=p.error_code, leader_id=p.leader_id, leader_epoch=p.leader_epoch,
                   vote_granted=p.vote_granted)
    return cls(error_code=p.error_code, leader_id=p.leader_id, leader_epoch=p.leader_epoch)
