"""Request handlers of a controller node's listener: ApiVersions, the KRaft RPCs,
DescribeQuorum, and Produce to ``__cluster_metadata`` as the external writer API.

Decodable but invalid requests get Kafka error codes (INVALID_REQUEST,
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER with the current leader, ...); only
undecodable input closes a connection, and that happens in ``network.py``. Raft decisions
are the core's: this module translates and waits, nothing else.

Produce semantics (a demo/benchmark writer, not a Kafka topic): each batch's record values
are proposed as one atomic group; acks=-1 (or 1) answers once they are committed (the high
watermark passed them), acks=0 gets no answer. A node that is not the leader answers
NOT_LEADER_OR_FOLLOWER with CurrentLeader {id, epoch} and the voters' endpoints. If
leadership is lost before commit the answer is NOT_LEADER_OR_FOLLOWER too: the write may
or may not commit later, as in Kafka.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from kraft.errors import (CorruptRecordError, ErrorCode, InvalidRecordError, InvalidRequestError, KraftError,
                          NotLeaderError)
from kraft.protocol import (METADATA_TOPIC_ID, ApiVersionsRequest, BeginQuorumEpochRequest, DescribeClusterRequest,
                            DescribeClusterResponse, DescribeQuorumRequest, DescribeQuorumResponse,
                            EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest, ProduceRequest,
                            ProduceResponse, VoteRequest, api_versions_response,
                            unsupported_api_versions_response)
from kraft.raft import messages as rm
from kraft.records import iter_batches
from kraft.server import raft_wire
from kraft.server.log_throttle import LogThrottle, held_note
from kraft.server.raft_driver import RaftDriver

log = logging.getLogger("kraft.handlers")

_RAFT_SOURCE = {
    rm.FetchRequest: lambda r: r.replica_id,
    rm.FetchSnapshotRequest: lambda r: r.replica_id,
    rm.VoteRequest: lambda r: r.candidate_id,
    rm.BeginQuorumEpochRequest: lambda r: r.leader_id,
    rm.EndQuorumEpochRequest: lambda r: r.leader_id,
}
# What this listener answers: ApiVersions, Produce (writer), Fetch, Vote, BeginQuorumEpoch,
# EndQuorumEpoch, DescribeQuorum, FetchSnapshot, DescribeCluster. Fetch v18's follower HighWatermark is not used.
SERVED_APIS = frozenset({18, 0, 1, 52, 53, 54, 55, 59, 60})
_RAFT_REQUESTS = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest)
_ERROR_RESPONSES = {
    VoteRequest: lambda c: rm.VoteResponse(c, -1, -1),
    BeginQuorumEpochRequest: lambda c: rm.BeginQuorumEpochResponse(c, -1, -1),
    EndQuorumEpochRequest: lambda c: rm.EndQuorumEpochResponse(c, -1, -1),
    FetchRequest: lambda c: rm.FetchResponse(c, -1, -1),
    FetchSnapshotRequest: lambda c: rm.FetchSnapshotResponse(c, -1, -1),
}


class ControllerHandlers:
    def __init__(self, driver: RaftDriver, endpoints, *, listener_name: str = "CONTROLLER", metrics=None):
        self.driver = driver
        self.endpoints = list(endpoints)  # (node_id, host, port) of every voter's controller listener
        self.listener_name = listener_name
        self.metrics = metrics
        self.peer_log_throttle = LogThrottle()

    def handle(self, ctx, request):
        version = ctx.header.api_version
        if isinstance(request, ApiVersionsRequest):
            if not ApiVersionsRequest.supports(version):
                return unsupported_api_versions_response()
            return api_versions_response(None, only=SERVED_APIS, max_versions={1: 17})
        if isinstance(request, _RAFT_REQUESTS):
            return self._raft(request, version, ctx.peer)
        if isinstance(request, DescribeQuorumRequest):
            return self._describe(request, version)
        if isinstance(request, DescribeClusterRequest):
            return self._describe_cluster(request, version)
        if isinstance(request, ProduceRequest):
            return self._produce(request, version)
        raise InvalidRequestError(f"{type(request).__name__} is not served on the controller listener")

    # --- KRaft RPCs -------------------------------------------------------------------------
    def _raft(self, wire, version: int, peer: str = "?"):
        try:
            req = raft_wire.request_from_wire(wire, version)
        except InvalidRequestError as exc:
            return raft_wire.response_to_wire(_ERROR_RESPONSES[type(wire)](exc.code), version, self.endpoints)
        began = time.perf_counter()
        fut = self.driver.inbound_request(_RAFT_SOURCE[type(req)](req), req)
        if self.metrics is not None and type(req) is rm.FetchRequest:
            # The leader's own work on a Fetch (a long-poll wait is not included).
            self.metrics.fetch_handle_latency.observe(time.perf_counter() - began)
        endpoints = self.endpoints

        def to_wire(resp):
            if resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
                self._log_foreign_cluster(req, peer)
            return raft_wire.response_to_wire(resp, version, endpoints)
        return _then(fut, to_wire)

    def _log_foreign_cluster(self, req, peer: str) -> None:
        """A peer of another cluster keeps asking: say so, at most once per peer per interval."""
        source = _RAFT_SOURCE[type(req)](req)
        held = self.peer_log_throttle.allow(("cluster id", peer, source))
        if held is not None:
            log.warning("rejected %s from node %d at %s: its cluster id %r does not match this node's %r "
                        "(INCONSISTENT_CLUSTER_ID)%s", type(req).__name__, source, peer, req.cluster_id,
                        self.driver.cluster_id, held_note(held))

    def _describe(self, wire, version: int):
        topics = wire.topics
        if (len(topics) != 1 or topics[0].topic_name != raft_wire.TOPIC or len(topics[0].partitions) != 1
                or topics[0].partitions[0].partition_index != 0):
            # Kafka's getPartitionLevelErrorResponse: every requested partition, with the error.
            W = DescribeQuorumResponse
            code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if not any(t.partitions for t in topics):
                resp = rm.DescribeQuorumResponse(code, -1, -1)
                return raft_wire.describe_quorum_to_wire(resp, version, self.endpoints, self.listener_name)
            return W(topics=[W.Topic(topic_name=t.topic_name, partitions=[
                W.Topic.Partition(partition_index=p.partition_index, error_code=code, leader_id=-1, leader_epoch=-1,
                                  high_watermark=-1) for p in t.partitions]) for t in topics])
        fut = self.driver.inbound_request(-1, rm.DescribeQuorumRequest())
        return _then(fut, lambda r: raft_wire.describe_quorum_to_wire(r, version, self.endpoints, self.listener_name))

    def _describe_cluster(self, wire, version: int):
        """Cluster id, the active controller (the quorum leader) and the controllers' endpoints.
        Brokers are not served yet, so asking for broker endpoints is UNSUPPORTED_ENDPOINT_TYPE
        on v1 (Kafka's answer on a controller) and lists the controllers on v0."""
        W = DescribeClusterResponse
        core = self.driver.core
        if version >= 1 and wire.endpoint_type != 2:
            return W(error_code=int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE), endpoint_type=wire.endpoint_type,
                     cluster_id=self.driver.cluster_id, controller_id=core.leader_id, brokers=[])
        return W(error_code=0, endpoint_type=2 if version >= 1 else 1,  # v0 cannot carry the type
                 cluster_id=self.driver.cluster_id, controller_id=core.leader_id,
                 brokers=[W.Broker(broker_id=i, host=h, port=p) for i, h, p in self.endpoints])

    # --- Produce: the external writer ---------------------------------------------------------
    def _produce_response(self, version: int, code: int, base_offset: int = -1, message: str | None = None,
                          request: ProduceRequest | None = None):
        """The answer for ``__cluster_metadata``-0, or, with ``request``, an error for every
        partition it named (Kafka answers each requested partition)."""
        P = ProduceResponse
        if request is not None and any(t.partition_data for t in request.topic_data):
            return P(responses=[P.Topic(name=t.name, topic_id=t.topic_id, partition_responses=[
                P.Topic.Partition(index=p.index, error_code=int(code), base_offset=-1, error_message=message)
                for p in t.partition_data]) for t in request.topic_data],
                node_endpoints=self._produce_endpoints if version >= 10 else [])
        part = P.Topic.Partition(index=0, error_code=int(code), base_offset=base_offset, error_message=message)
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and version >= 10:
            core = self.driver.core
            part.current_leader = P.LeaderIdAndEpoch(leader_id=core.leader_id, leader_epoch=core.epoch)
        return P(responses=[P.Topic(name=raft_wire.TOPIC, topic_id=METADATA_TOPIC_ID, partition_responses=[part])],
                 node_endpoints=self._produce_endpoints if version >= 10 else [])

    @functools.cached_property
    def _produce_endpoints(self):
        return [ProduceResponse.NodeEndpoint(node_id=i, host=h, port=p) for i, h, p in self.endpoints]

    def _produce(self, wire: ProduceRequest, version: int):
        topics = wire.topic_data
        ours = (lambda t: t.topic_id == METADATA_TOPIC_ID) if version >= 13 else (lambda t: t.name == raft_wire.TOPIC)
        if (len(topics) != 1 or not ours(topics[0]) or len(topics[0].partition_data) != 1
                or topics[0].partition_data[0].index != 0):
            return self._produce_response(version, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, request=wire)
        data = topics[0].partition_data[0].records
        if wire.acks not in (-1, 0, 1):
            return self._produce_response(version, ErrorCode.INVALID_REQUIRED_ACKS)
        if not self.driver.core.is_leader():
            # Leadership before payload, as Kafka's Partition.appendRecordsToLeader: a client
            # must be sent to the leader, not failed on records the leader would accept.
            return self._produce_response(version, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            values = []
            for batch in iter_batches(data if data is not None else b"", validate=True):
                if batch.is_control:
                    raise CorruptRecordError("control batches cannot be produced")
                values.extend(batch.values())
            if not values:
                raise CorruptRecordError("no complete record batch in the request")
            if None in values:
                raise InvalidRecordError("metadata records need a value (null values are not accepted)")
        except KraftError as exc:
            return self._produce_response(version, exc.code, message=str(exc))
        try:
            last, committed = self.driver.propose(values)
        except NotLeaderError:
            return self._produce_response(version, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        except KraftError as exc:
            return self._produce_response(version, exc.code, message=str(exc))
        if wire.acks == 0:
            return None
        return self._await_commit(committed, last - len(values) + 1, version, wire.timeout_ms)

    def _await_commit(self, committed, base_offset: int, version: int, timeout_ms: int):
        """A future of the Produce response: success once committed, REQUEST_TIMED_OUT after
        ``timeout_ms``, NOT_LEADER_OR_FOLLOWER if leadership is lost first. Callbacks, not a
        task per request: this is the writer's hot path."""
        loop = asyncio.get_running_loop()
        out = loop.create_future()

        def timed_out():
            if not out.done():
                out.set_result(self._produce_response(version, ErrorCode.REQUEST_TIMED_OUT, base_offset))

        timer = loop.call_later(max(timeout_ms, 1) / 1000, timed_out)

        def done(f):
            timer.cancel()
            if out.done():
                return
            if f.cancelled() or f.exception() is not None:
                code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                code = ErrorCode.NONE
            out.set_result(self._produce_response(version, code, base_offset))

        committed.add_done_callback(done)
        return out


def _then(fut, fn):
    """A future of ``fn(fut.result())``, chained with a callback instead of a task."""
    out = fut.get_loop().create_future()

    def done(f):
        if out.done():
            return
        if f.cancelled():
            out.cancel()
            return
        exc = f.exception()
        if exc is not None:
            out.set_exception(exc)
            return
        try:
            out.set_result(fn(f.result()))
        except Exception as e:  # becomes an error response in network.py
            out.set_exception(e)

    fut.add_done_callback(done)
    return out
