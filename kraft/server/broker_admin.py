"""Admin requests on a broker listener, around the broker's own handlers.

Writes are forwarded to the active controller (Kafka forwards them too, in an Envelope; we
send the request itself, KIP-590's "direct" variant): CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs, IncrementalAlterConfigs, AlterUserScramCredentials,
AlterClientQuotas, CreateAcls
and DeleteAcls (answered here SECURITY_DISABLED when this broker has no authorizer, as Kafka's
are), ElectLeaders,
AlterPartitionReassignments and ListPartitionReassignments (read from the controller, whose
view of a reassignment is the current one, as Kafka forwards it). The
controller answers once the records committed; the broker passes that answer back at the
client's version, or NOT_CONTROLLER if no controller answered within the request's timeout
(clients refresh metadata and retry). Reads are answered from the broker's image with the
same pure code the controller uses: DescribeConfigs (``config_describe``), DescribeAcls
(``acl_filters``), DescribeUserScramCredentials (``controller.scram``), DescribeClientQuotas
(``controller.client_quotas``) and DescribeCluster
(unfenced brokers on the request's listener, the Metadata controller id; the cluster's authorized operations when asked,
``kraft.metadata.authorization``). Metadata for an unknown topic creates it when
``auto.create.topics.enable`` (Kafka's default) and the request allows it, with
``num.partitions`` / ``default.replication.factor``, answering LEADER_NOT_AVAILABLE meanwhile
as Kafka does. ApiVersions lists all of it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kraft.broker.broker_state import INTERNAL_TOPICS
from kraft.broker.handlers import BROKER_APIS, broker_api_versions
from kraft.client.controller_client import ControllerClient
from kraft.controller.client_quotas import describe_client_quotas
from kraft.controller.cluster_handlers import broker_entries
from kraft.controller.handlers import ERROR_RESPONSES, HANDLERS
from kraft.controller.result import ControllerContext
from kraft.errors import ErrorCode, KraftError
from kraft.metadata.authorization import authorized_operations, authorizer_configured
from kraft.metadata.topic_names import topic_name_error
from kraft.server import broker_loggers
from kraft.protocol import ApiVersionsRequest, CreateTopicsRequest, MetadataRequest
from kraft.protocol.messages.acls import RESOURCE_CLUSTER
from kraft.protocol.messages.describe_cluster import ENDPOINT_BROKERS, DescribeClusterResponse

log = logging.getLogger("kraft.broker.admin")

#: API keys a broker forwards to the active controller. The quorum's APIs too (DescribeQuorum,
#: UpdateFeatures, UnregisterBroker, AddRaftVoter, RemoveRaftVoter), as Kafka 4's brokers do, so
#: ``metadata-quorum`` / ``features`` / ``cluster unregister`` work with ``--bootstrap-server``.
QUORUM_APIS = frozenset({55, 57, 64, 80, 81})
FORWARDED_APIS = frozenset({19, 20, 37, 33, 44, 30, 31, 43, 45, 46, 51, 49}) | QUORUM_APIS
#: CreateAcls and DeleteAcls: forwarded only when this broker has an authorizer.
ACL_WRITES = frozenset({30, 31})
#: API keys a broker answers from its image: DescribeConfigs, DescribeAcls, DescribeCluster,
#: DescribeUserScramCredentials, DescribeClientQuotas.
IMAGE_READ_APIS = frozenset({32, 29, 60, 50, 48})
DEFAULT_TIMEOUT_MS = 30_000
#: CreateTopics / CreatePartitions that arrive while no broker is unfenced (the cluster is
#: starting) wait up to this long, within their own timeout, for one before they are forwarded.
PLACEMENT_WAIT_S = 15.0
UNKNOWN_TOPIC = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
LOGGERS = broker_loggers.LOGGERS  # answered by this node itself, never forwarded


class AutoCreate:
    """``auto.create.topics.enable`` and the shape of a topic it creates."""

    def __init__(self, enabled: bool, partitions: int = 1, replication_factor: int = 1):
        self.enabled, self.partitions, self.replication_factor = enabled, partitions, replication_factor


def _error_response(request, version: int, code: int, message: str):
    """The answer to a forwarded request that could not reach the controller."""
    make = ERROR_RESPONSES.get(request.API_KEY)
    if make is not None:
        return make(request, version, code, message)
    from kraft.protocol import AddRaftVoterResponse, DescribeQuorumResponse, RemoveRaftVoterResponse
    cls = {55: DescribeQuorumResponse, 80: AddRaftVoterResponse, 81: RemoveRaftVoterResponse}[request.API_KEY]
    return cls(error_code=int(code), error_message=message)


class BrokerAdminHandlers:
    def __init__(self, inner, client: ControllerClient, *, static_configs: dict | None = None,
                 auto_create: AutoCreate | None = None):
        self.inner = inner
        self.state = inner.state
        self.client = client
        self.static_configs = dict(static_configs or {})
        self.auto_create = auto_create or AutoCreate(False)
        self.forwarded = 0
        self._creating: set[str] = set()
        self._tasks: set = set()

    def __getattr__(self, name):  # close(), on_flushed(), fetch... of the broker's handlers
        return getattr(self.inner, name)

    def handle(self, ctx, request):
        key = request.API_KEY
        version = ctx.header.api_version
        if key in (32, 44) and any(r.resource_type == LOGGERS for r in request.resources):
            return self._with_loggers(key, request, version)
        if key in ACL_WRITES and not authorizer_configured(self.static_configs):
            return self._read(key, request, version)  # SECURITY_DISABLED from this node, as Kafka's brokers
        if key in FORWARDED_APIS:
            return self._forward(request, version)
        if key in (32, 29, 50):
            return self._read(key, request, version)
        if key == 48:
            return describe_client_quotas(self.state.image, request)
        if key == 60:
            return self._describe_cluster(request, version, ctx.listener)
        if key == ApiVersionsRequest.API_KEY and ApiVersionsRequest.supports(version):
            apis = self.inner.advertised(BROKER_APIS | FORWARDED_APIS | IMAGE_READ_APIS)
            return broker_api_versions(self.state, apis)
        response = self.inner.handle(ctx, request)
        if key == MetadataRequest.API_KEY and self.auto_create.enabled:
            self._auto_create(request, version, response)
        return response

    # --- forwarding ---------------------------------------------------------------------
    async def _forward(self, request, version: int):
        timeout_ms = getattr(request, "timeout_ms", None) or DEFAULT_TIMEOUT_MS
        if request.API_KEY in (19, 37) and not self._any_unfenced():
            # A Kafka broker opens its listeners only once the controller has acknowledged it;
            # kraft serves Metadata earlier (librdkafka gives up on an empty broker list), so a
            # client can ask for a topic before any broker could hold a replica, which the
            # controller would refuse (INVALID_REPLICATION_FACTOR). Wait for the first one.
            loop = asyncio.get_running_loop()
            end = loop.time() + min(PLACEMENT_WAIT_S, timeout_ms / 1000)
            while not self._any_unfenced() and loop.time() < end:
                await asyncio.sleep(0.05)
        self.forwarded += 1
        try:
            return await self.client.call(request, version=version, deadline_s=max(1.0, timeout_ms / 1000))
        except KraftError as exc:
            log.warning("forwarding %s to the controller failed: %s", type(request).__name__, exc)
            return _error_response(request, version, ErrorCode.NOT_CONTROLLER, str(exc))

    def _any_unfenced(self) -> bool:
        return any(not b.fenced for b in self.state.image.cluster.brokers.values())

    # --- logger levels (BROKER_LOGGER) ---------------------------------------------------
    def _with_loggers(self, key: int, request, version: int):
        """Logger resources answered here, the others as usual (read here, or forwarded)."""
        rest = (lambda req: self._read(key, req, version)) if key == 32 else \
            (lambda req: self._forward(req, version))
        return broker_loggers.answer_with_loggers(key, request, self.state.broker_id, rest)

    # --- reads from the image -------------------------------------------------------------
    def _read(self, key: int, request, version: int):
        """A controller handler that writes nothing, run on this broker's image and settings."""
        context = ControllerContext(image=self.state.image, version=version, now_ms=int(time.time() * 1000),
                                    settings=self.static_configs, node_id=self.state.broker_id,
                                    cluster_id=self.state.cluster_id or "")
        return HANDLERS[key](context, request).response

    def _describe_cluster(self, request, version: int, listener: str):
        W = DescribeClusterResponse
        state = self.state
        if version >= 1 and request.endpoint_type != ENDPOINT_BROKERS:
            return W(error_code=int(ErrorCode.MISMATCHED_ENDPOINT_TYPE), endpoint_type=request.endpoint_type,
                     error_message="The request was sent to an endpoint of type BROKER, but we wanted an "
                                   "endpoint of type CONTROLLER", cluster_id=state.cluster_id or "",
                     controller_id=-1, brokers=[])
        brokers = [b for b in broker_entries(state.image, listener)
                   if b.broker_id != state.broker_id or state.is_serving()]
        return W(error_code=0, endpoint_type=ENDPOINT_BROKERS, cluster_id=state.cluster_id or "",
                 controller_id=state.controller_id, brokers=brokers,
                 cluster_authorized_operations=authorized_operations(
                     RESOURCE_CLUSTER, request.include_cluster_authorized_operations))

    # --- auto topic creation --------------------------------------------------------------
    def _auto_create(self, request, version: int, response) -> None:
        if request.topics is None or (version >= 4 and not request.allow_auto_topic_creation):
            return
        for topic in response.topics:
            name = topic.name
            if topic.error_code != UNKNOWN_TOPIC or not name or name in INTERNAL_TOPICS:
                continue
            if topic_name_error(name) is not None:
                topic.error_code = int(ErrorCode.INVALID_TOPIC_EXCEPTION)
                continue
            topic.error_code = int(ErrorCode.LEADER_NOT_AVAILABLE)
            if name not in self._creating:
                self._creating.add(name)
                task = asyncio.get_running_loop().create_task(self._create(name))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _create(self, name: str) -> None:
        T = CreateTopicsRequest.Topic
        ac = self.auto_create
        req = CreateTopicsRequest(topics=[T(name=name, num_partitions=ac.partitions,
                                            replication_factor=ac.replication_factor)], timeout_ms=DEFAULT_TIMEOUT_MS)
        try:
            resp = await self.client.call(req, deadline_s=DEFAULT_TIMEOUT_MS / 1000)
            code = resp.topics[0].error_code
            if code not in (0, int(ErrorCode.TOPIC_ALREADY_EXISTS)):
                log.warning("auto-creating topic %s failed: %s %s", name, ErrorCode(code).name,
                            resp.topics[0].error_message or "")
            else:
                log.info("auto-created topic %s (%d partitions, replication factor %d)", name, ac.partitions,
                         ac.replication_factor)
        except KraftError as exc:
            log.warning("auto-creating topic %s failed: %s", name, exc)
        finally:
            self._creating.discard(name)
