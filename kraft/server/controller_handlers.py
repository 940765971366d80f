"""Request handlers of a controller node's listener: ApiVersions, the KRaft RPCs,
DescribeQuorum, and Produce to ``__cluster_metadata`` as the external writer API.

Decodable but invalid requests get Kafka error codes (INVALID_REQUEST,
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER with the current leader, ...); only
undecodable input closes a connection, and that happens in ``network.py``. Raft decisions,
including which requests are valid, are the core's: a KRaft request goes to the core as it
was decoded (old versions brought to the newest form by ``wire_versions``), and the core's
response is fitted to the request's version; this module waits, nothing else.

Produce is the external writer of the metadata log (``produce_writer.py``): the batches of
a request are appended as they arrived and answered once committed; acks=0 gets no answer.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time

from kraft.errors import ErrorCode, InvalidRequestError
from kraft.protocol import (AddRaftVoterRequest, ReassignRaftVotersRequest, RemoveRaftVoterRequest,
                            UpdateRaftVoterRequest)
from kraft.protocol import ApiVersionsResponse
from kraft.protocol import (ApiVersionsRequest, BeginQuorumEpochRequest, DescribeClusterRequest,
                            DescribeClusterResponse, DescribeQuorumRequest, EndQuorumEpochRequest, FetchRequest,
                            FetchSnapshotRequest, ProduceRequest, UpdateFeaturesRequest, UpdateFeaturesResponse,
                            VoteRequest, api_versions_response,
                            unsupported_api_versions_response)
from kraft.raft.config import MAX_BATCH_SIZE_BYTES, MAX_RECORDS_PER_BATCH
from kraft.raft.rpcs import request_source
from kraft.server.broker_loggers import LOGGERS, answer_with_loggers
from kraft.server.log_throttle import LogThrottle, held_note
from kraft.server.produce_writer import ProduceWriter
from kraft.server.raft_driver import RaftDriver
from kraft.server.wire_versions import ResponseFitter, upgrade_request

log = logging.getLogger("kraft.handlers")
KRAFT_VERSION = "kraft.version"

# What this listener answers: ApiVersions, Produce (writer), Fetch, Vote, BeginQuorumEpoch,
# EndQuorumEpoch, DescribeQuorum, FetchSnapshot, DescribeCluster. Fetch v18's follower HighWatermark is not used.
SERVED_APIS = frozenset({18, 0, 1, 52, 53, 54, 55, 59, 60, 80, 81, 82,  # 80-82: KIP-853 voter changes
                         10002})  # kraft's ReassignRaftVoters (seed 002's target voters)
_RAFT_REQUESTS = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest,
                  DescribeQuorumRequest, AddRaftVoterRequest, RemoveRaftVoterRequest, UpdateRaftVoterRequest,
                  ReassignRaftVotersRequest)
_RAFT_REQUEST_TYPES = frozenset(_RAFT_REQUESTS)


class ControllerHandlers:
    def __init__(self, driver: RaftDriver, endpoints, *, listener_name: str = "CONTROLLER", metrics=None,
                 max_decompressed_bytes: int = 2 * MAX_BATCH_SIZE_BYTES, controller_requests=None):
        self.driver = driver
        # The quorum controller's requests (controller_requests.py); None: Raft-only node.
        self.controller_requests = controller_requests
        self.served_apis = SERVED_APIS | (controller_requests.apis if controller_requests is not None else set())
        self.endpoints = list(endpoints)  # (node_id, host, port) of every voter's controller listener
        self.listener_name = listener_name
        self.fitter = ResponseFitter(self.endpoints, listener_name)
        self.metrics = metrics
        self.peer_log_throttle = LogThrottle()
        self.produce = ProduceWriter(driver, self.endpoints, max_batch_bytes=MAX_BATCH_SIZE_BYTES,
                                     max_batch_records=MAX_RECORDS_PER_BATCH,
                                     max_decompressed_bytes=max_decompressed_bytes)

    def set_endpoints(self, endpoints) -> None:
        """The voters changed (KIP-853 dynamic quorum): answers name the new controllers."""
        self.endpoints = list(endpoints)
        self.fitter = ResponseFitter(self.endpoints, self.listener_name)
        self.produce.endpoints = self.endpoints
        self.produce._endpoint_cache = None

    def close(self) -> None:
        self.produce.close()

    def handle(self, ctx, request):
        version = ctx.header.api_version
        # The per-write requests first, by exact type: an isinstance against the schema's
        # classes that fails takes the metaclass's slow path (~0.1 µs each, eleven of them
        # for a Produce below), on every request. Requests are always their exact class.
        t = type(request)
        if t is ProduceRequest:
            return self.produce.handle(request, version)
        if t in _RAFT_REQUEST_TYPES:
            return self._raft(request, version, ctx.peer)
        if isinstance(request, ApiVersionsRequest):
            if not ApiVersionsRequest.supports(version):
                return unsupported_api_versions_response()
            return self._api_versions()
        if isinstance(request, _RAFT_REQUESTS):
            return self._raft(request, version, ctx.peer)
        if isinstance(request, UpdateFeaturesRequest) and any(
                u.feature == KRAFT_VERSION for u in request.feature_updates):
            return self._update_kraft_version(request, version)
        if self.controller_requests is not None and request.API_KEY in self.controller_requests.apis:
            if request.API_KEY in (32, 44) and any(r.resource_type == LOGGERS for r in request.resources):
                # This controller's own logger levels (Kafka's controllers answer them too)
                return answer_with_loggers(request.API_KEY, request, self.driver.core.node_id,
                                           lambda rest: self.controller_requests.handle(rest, version, ctx.peer))
            return self.controller_requests.handle(request, version, ctx.peer)
        if isinstance(request, DescribeClusterRequest):
            return self._describe_cluster(request, version)
        if isinstance(request, ProduceRequest):
            return self.produce.handle(request, version)
        raise InvalidRequestError(f"{type(request).__name__} is not served on the controller listener")

    def _api_versions(self):
        """The served APIs and, from v3, the features: this controller's supported ranges and the
        finalized levels of its committed image plus kraft.version from the Raft log (as Kafka's
        controllers answer, which ``kafka-features.sh --bootstrap-controller describe`` reads)."""
        from kraft.controller.features import SUPPORTED_FEATURES
        R = ApiVersionsResponse
        resp = api_versions_response(None, only=self.served_apis, max_versions={1: 17})
        supported = {**SUPPORTED_FEATURES, KRAFT_VERSION: (0, 1)}
        resp.supported_features = [R.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                                   for n, (lo, hi) in sorted(supported.items())]
        finalized, epoch = {}, -1
        if self.controller_requests is not None:
            ctl = self.controller_requests.controller
            finalized = dict(ctl.image.features.finalized_versions)
            epoch = ctl.next_offset - 1
        core = getattr(self.driver, "core", None)
        if core is not None:
            finalized[KRAFT_VERSION] = core.kraft_version
        resp.finalized_features = [R.FinalizedFeatureKey(name=n, max_version_level=v, min_version_level=v)
                                   for n, v in sorted(finalized.items()) if v > 0]
        resp.finalized_features_epoch = epoch
        return resp

    # --- KRaft RPCs -------------------------------------------------------------------------
    def _raft(self, wire, version: int, peer: str = "?"):
        upgrade_request(wire, version)
        began = time.perf_counter()
        fit = self.fitter.fit

        def answer(resp):
            if resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
                self._log_foreign_cluster(wire, peer)
            return fit(resp, version)
        # The transport does not know the sender's node id; the core reads it from the request.
        out = self.driver.inbound_request(-1, wire, answer)
        if self.metrics is not None and type(wire) is FetchRequest:
            # The leader's own work on a Fetch (a long-poll wait is not included).
            self.metrics.fetch_handle_latency.observe(time.perf_counter() - began)
        # Answered at once (a Vote, a Fetch with data): the answer itself, no wait at all.
        return out.result_or(out)

    def _update_kraft_version(self, req, version: int):
        """UpdateFeatures naming ``kraft.version``: the Raft layer's (Kafka 4.1's static-to-
        dynamic upgrade, ``kraft.raft.kraft_version``); other features in the same request go
        to the controller afterwards, and the answers are merged."""
        W = UpdateFeaturesResponse
        update = next(u for u in req.feature_updates if u.feature == KRAFT_VERSION)
        rest = [u for u in req.feature_updates if u.feature != KRAFT_VERSION]
        code, message, offset = self.driver.upgrade_kraft_version(update.max_version_level,
                                                                  bool(getattr(req, "validate_only", False)))

        async def answer():
            c, m = code, message
            if c == ErrorCode.NONE and offset is not None:
                try:
                    await asyncio.wait_for(self.driver.wait_committed(offset), max(1, req.timeout_ms) / 1000)
                except Exception:  # timed out or leadership lost: the upgrade may or may not commit
                    c, m = ErrorCode.REQUEST_TIMED_OUT, "the kraft.version upgrade did not commit in time"
            if c == ErrorCode.NOT_CONTROLLER or not rest or self.controller_requests is None:
                top = c if c == ErrorCode.NOT_CONTROLLER else ErrorCode.NONE
                results = [] if top else [W.Result(feature=KRAFT_VERSION, error_code=int(c), error_message=m)]
                results += [W.Result(feature=u.feature, error_code=int(ErrorCode.INVALID_REQUEST),
                                     error_message="not applied") for u in rest] if not top else []
                return W(error_code=int(top), error_message=m if top else None, results=results)
            other = copy.copy(req)
            other.feature_updates = rest
            resp = self.controller_requests.handle(other, version)
            if asyncio.isfuture(resp):
                resp = await resp
            resp.results = [W.Result(feature=KRAFT_VERSION, error_code=int(c), error_message=m), *resp.results]
            return resp
        return asyncio.ensure_future(answer())

    def _log_foreign_cluster(self, req, peer: str) -> None:
        """A peer of another cluster keeps asking: say so, at most once per peer per interval."""
        source = request_source(req)
        held = self.peer_log_throttle.allow(("cluster id", peer, source))
        if held is not None:
            log.warning("rejected %s from node %d at %s: its cluster id %r does not match this node's %r "
                        "(INCONSISTENT_CLUSTER_ID)%s", type(req).__name__, source, peer, req.cluster_id,
                        self.driver.cluster_id, held_note(held))

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

