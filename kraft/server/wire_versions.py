"""What older wire versions of the KRaft RPCs cannot say, handled at the network edge.

The Raft core reads and writes the newest form of each message (``kraft.raft.rpcs``); a peer
or client may have negotiated an older version. On the way in, a field an old version keeps
elsewhere is copied to where the newest version has it: Fetch names its replica at the top
level before v15 and its topic by name before v13; EndQuorumEpoch v0 lists successor ids
instead of candidates. On the way out, the voters' endpoints are added where the version has a
field for them, and what the version cannot carry is degraded as Kafka does: Fetch below v12
has no CurrentLeader, DivergingEpoch or SnapshotId, below v7 no top-level error code;
DescribeQuorum below v2 no directory ids. At the newest versions this costs one comparison.

Peers are kraft nodes: we send every request at the newest version we implement
(``SEND_VERSIONS``). No Raft decisions here, no I/O.
"""

from __future__ import annotations

from kraft.errors import ErrorCode
from kraft.protocol import (METADATA_TOPIC_ID, ZERO_UUID, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
                            DescribeQuorumResponse, EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest,
                            FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse, UpdateRaftVoterRequest, VoteRequest,
                            VoteResponse)
from kraft.raft.rpcs import TOPIC, response_partition

SEND_VERSIONS = {VoteRequest: 2, BeginQuorumEpochRequest: 1, EndQuorumEpochRequest: 1, FetchRequest: 17,
                 FetchSnapshotRequest: 1, UpdateRaftVoterRequest: 0}


def upgrade_request(wire, version: int) -> None:
    """Move what an old version of ``wire`` says into the newest version's fields, in place."""
    t = type(wire)
    if t is FetchRequest:
        if version < 15:
            wire.replica_state.replica_id = wire.replica_id
        if version < 13:
            for topic in wire.topics:
                if topic.topic == TOPIC:
                    topic.topic_id = METADATA_TOPIC_ID
    elif t is EndQuorumEpochRequest and version == 0:
        for topic in wire.topics:
            for p in topic.partitions:
                Info = EndQuorumEpochRequest.Topic.Partition.ReplicaInfo
                p.preferred_candidates = [Info(candidate_id=c, candidate_directory_id=ZERO_UUID)
                                          for c in p.preferred_successors]


class ResponseFitter:
    """Fits the core's responses to the version they are sent at. ``endpoints``: (node id,
    host, port) of every voter's controller listener. Where the version has NodeEndpoints,
    the answer names the leader it reports, as Kafka's RaftUtil does (every voter's address
    comes from the Voters record or the configuration, not from each answer: three encoded
    per Fetch answer was a sixth of the answer's encoding). The lists are built once and
    shared by every response (the encoder only reads them)."""

    def __init__(self, endpoints, listener_name: str = "CONTROLLER"):
        endpoints = list(endpoints)
        self._leader_endpoint = {W: {i: [W.NodeEndpoint(node_id=i, host=h, port=p)] for i, h, p in endpoints}
                                 for W in (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse,
                                           FetchSnapshotResponse, FetchResponse)}
        D = DescribeQuorumResponse
        self._nodes = [D.Node(node_id=i, listeners=[D.Node.Listener(name=listener_name, host=h, port=p)])
                       for i, h, p in endpoints]

    def fit(self, resp, version: int):
        t = type(resp)
        if t is FetchResponse:
            if version >= 16:
                resp.node_endpoints = self._endpoint_of_leader(resp)
            elif version < 12:
                _fetch_before_kip_595(resp, version)
        elif t is DescribeQuorumResponse:
            if version >= 2:
                resp.nodes = self._nodes
            else:
                for topic in resp.topics:
                    for p in topic.partitions:
                        for r in p.current_voters + p.observers:
                            r.replica_directory_id = ZERO_UUID
        elif version >= 1 and t in self._leader_endpoint:
            resp.node_endpoints = self._endpoint_of_leader(resp)
        return resp

    def _endpoint_of_leader(self, resp) -> list:
        """[the NodeEndpoint of the leader the answer names], or [] (unknown leader)."""
        p = response_partition(resp)
        if p is None:
            return []
        leader = p.leader_id if hasattr(p, "leader_id") else p.current_leader.leader_id
        return self._leader_endpoint[type(resp)].get(leader) or []


def _fetch_before_kip_595(resp, version: int) -> None:
    """Fetch is advertised from v4, but KIP-595's fields only exist from v12: below that the
    answer degrades instead of failing to encode. CurrentLeader is left out (old clients
    rediscover the leader through metadata); a diverging log or a needed snapshot, which an
    old version cannot express, becomes OFFSET_OUT_OF_RANGE as a pre-KIP-595 leader answered
    a follower whose offset it could not serve (unreachable from the core, which refuses a
    Fetch without LastFetchedEpoch, but the wire form must stay total); v4-6 have no
    top-level ErrorCode, so a request-level error moves onto the partition."""
    W = FetchResponse
    for topic in resp.responses:
        for p in topic.partitions:
            if (p.diverging_epoch.epoch >= 0 or p.snapshot_id.end_offset >= 0) and not p.error_code:
                p.error_code = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                p.records = b""
            p.current_leader = W.LeaderIdAndEpoch()
            p.diverging_epoch = W.EpochEndOffset()
            p.snapshot_id = W.SnapshotId()
            if version < 7 and resp.error_code:
                p.error_code = resp.error_code
    if version < 7:
        resp.error_code = 0
