"""Authorization at dispatch: which operation on which resource each API needs, and what an
unauthorized caller gets, as Kafka's ``KafkaApis`` / ``ControllerApis`` / ``AuthHelper`` decide.

``AuthorizingHandler`` wraps a listener's handler when ``authorizer.class.name`` names the
StandardAuthorizer. Before a request reaches the node it is checked against the authorizer, whose
ACL index follows the node's image (``acls()``, compared by identity on every request, so an
ACL record applies on this node as soon as the node applies it). Three outcomes, per API:

* allowed: the request goes through unchanged (the common case costs a few dict lookups);
* refused as a whole: the answer carries the API's authorization error in every error field
  (``authz_responses.refused``), and the node never sees the request;
* refused in part (topics, groups, config resources): the node handles the authorized entries
  and the refused ones are appended to its answer with their error.

Answers that list resources are filtered afterwards (Metadata for all topics, ListGroups,
ListTransactions) and authorized-operations fields asked for get the caller's real bits.
Requests forwarded by a broker to the controller arrive with the broker's own principal, so a
broker authorizes the client's admin requests before forwarding them.
"""

from __future__ import annotations

from kraft.errors import ErrorCode
from kraft.metadata.acls import EMPTY_ACLS
from kraft.metadata.authorization import NOT_REQUESTED, SUPPORTED_OPERATIONS
from kraft.metadata.authorizer import StandardAuthorizer
from kraft.protocol import Response
from kraft.protocol.framing import CLOSE_CONNECTION
from kraft.protocol.messages.acls import (OPERATION_ALTER, OPERATION_ALTER_CONFIGS, OPERATION_CLUSTER_ACTION,
                                          OPERATION_CREATE, OPERATION_DELETE, OPERATION_DESCRIBE,
                                          OPERATION_DESCRIBE_CONFIGS, OPERATION_IDEMPOTENT_WRITE, OPERATION_READ,
                                          OPERATION_WRITE, RESOURCE_CLUSTER, RESOURCE_GROUP, RESOURCE_TOPIC,
                                          RESOURCE_TRANSACTIONAL_ID)
from kraft.server.authz_responses import merge, refused, with_entries

CLUSTER = "kafka-cluster"
TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
TXN_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
#: config resource types (DescribeConfigs / AlterConfigs): TOPIC 2, BROKER 4, BROKER_LOGGER 8, GROUP 32
_CONFIG_RESOURCES = {2: (RESOURCE_TOPIC, TOPIC_DENIED), 4: (RESOURCE_CLUSTER, CLUSTER_DENIED),
                     8: (RESOURCE_CLUSTER, CLUSTER_DENIED), 32: (RESOURCE_GROUP, GROUP_DENIED)}

#: API key -> (operation, error) on the cluster resource, for the whole request
CLUSTER_APIS = {
    # inter-node APIs: CLUSTER_ACTION
    **{k: (OPERATION_CLUSTER_ACTION, CLUSTER_DENIED) for k in (27, 52, 53, 54, 56, 59, 62, 63, 67, 82, 10002)},
    34: (OPERATION_ALTER, CLUSTER_DENIED),  # AlterReplicaLogDirs
    35: (OPERATION_DESCRIBE, CLUSTER_DENIED),  # DescribeLogDirs
    43: (OPERATION_ALTER, CLUSTER_DENIED),  # ElectLeaders
    45: (OPERATION_ALTER, CLUSTER_DENIED),  # AlterPartitionReassignments
    46: (OPERATION_DESCRIBE, CLUSTER_DENIED),  # ListPartitionReassignments
    55: (OPERATION_DESCRIBE, CLUSTER_DENIED),  # DescribeQuorum
    57: (OPERATION_ALTER, CLUSTER_DENIED),  # UpdateFeatures
    64: (OPERATION_ALTER, CLUSTER_DENIED),  # UnregisterBroker
    80: (OPERATION_ALTER, CLUSTER_DENIED), 81: (OPERATION_ALTER, CLUSTER_DENIED),  # Add/RemoveRaftVoter
    29: (OPERATION_DESCRIBE, CLUSTER_DENIED),  # DescribeAcls
    30: (OPERATION_ALTER, CLUSTER_DENIED), 31: (OPERATION_ALTER, CLUSTER_DENIED),  # Create/DeleteAcls
    48: (OPERATION_DESCRIBE_CONFIGS, CLUSTER_DENIED),  # DescribeClientQuotas
    49: (OPERATION_ALTER_CONFIGS, CLUSTER_DENIED),  # AlterClientQuotas
    50: (OPERATION_DESCRIBE, CLUSTER_DENIED),  # DescribeUserScramCredentials
    51: (OPERATION_ALTER, CLUSTER_DENIED),  # AlterUserScramCredentials
    73: (OPERATION_CLUSTER_ACTION, CLUSTER_DENIED),  # AssignReplicasToDirs (broker to controller)
}
#: API key -> (operation, error) on the request's ``group_id``, for the whole request
GROUP_APIS = {11: OPERATION_READ, 12: OPERATION_READ, 13: OPERATION_READ, 14: OPERATION_READ, 47: OPERATION_DELETE}
#: API key -> (request array of topics, operation): each topic refused on its own with TOPIC_AUTHORIZATION_FAILED
TOPIC_APIS = {
    0: ("topic_data", OPERATION_WRITE),
    2: ("topics", OPERATION_DESCRIBE),
    21: ("topics", OPERATION_DELETE),
    37: ("topics", OPERATION_ALTER),
    61: ("topics", OPERATION_READ),
    8: ("topics", OPERATION_READ), 28: ("topics", OPERATION_READ), 47: ("topics", OPERATION_READ),
}
#: APIs every caller may send (ApiVersions, SASL, client telemetry)
OPEN_APIS = frozenset({17, 18, 36, 71, 72})


def _maybe_async(result, after):
    """Apply ``after`` to a handler's answer, now or when it completes."""
    if result is None:
        return None
    if isinstance(result, (Response, bytes, list)):
        return after(result)

    async def later():
        return after(await result)
    return later()


class AuthorizingHandler:
    """A listener's handler behind the authorizer."""

    def __init__(self, inner, authorizer: StandardAuthorizer, acls=lambda: EMPTY_ACLS, topic_names=None,
                 topic_exists=None, auto_create=False):
        self.inner = inner
        self.authorizer = authorizer
        self.acls = acls  # () -> the node's current AclsImage
        self.topic_names = topic_names or (lambda: {})  # () -> {topic id: name}
        self.topic_exists = topic_exists or (lambda name: True)
        self.auto_create = auto_create
        self.denied = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    # --- checks ---------------------------------------------------------------------------
    def allowed(self, ctx, op: int, rtype: int, name: str) -> bool:
        return self.authorizer.authorize(ctx.principal, ctx.peer.rpartition(":")[0], op, rtype, name)

    def _cluster(self, ctx, op: int) -> bool:
        return self.allowed(ctx, op, RESOURCE_CLUSTER, CLUSTER)

    def handle(self, ctx, request):
        self.authorizer.update(self.acls())
        key = request.API_KEY
        if key in OPEN_APIS or ctx.principal in self.authorizer.super_users:
            return self.inner.handle(ctx, request)
        version = ctx.header.api_version
        method = getattr(self, f"_api_{key}", None)
        if method is not None:
            return method(ctx, request, version)
        if key in CLUSTER_APIS:
            op, code = CLUSTER_APIS[key]
            if not self._cluster(ctx, op):
                return self._refuse(request, version, code)
        if key in GROUP_APIS and not self.allowed(ctx, GROUP_APIS[key], RESOURCE_GROUP, request.group_id):
            return self._refuse(request, version, GROUP_DENIED)
        if key in TOPIC_APIS:
            field, op = TOPIC_APIS[key]
            return self._split_topics(ctx, request, version, field, op)
        return self._with_operations(ctx, request, self.inner.handle(ctx, request))

    def _refuse(self, request, version: int, code: int, message: str | None = None):
        self.denied += 1
        return refused(request, version, code, message)

    # --- partial refusals -----------------------------------------------------------------
    def _split(self, ctx, request, version: int, field: str, refuse_entry, code: int):
        """Hand the node the entries of ``field`` that ``refuse_entry`` lets through; answer
        the others with ``code``."""
        entries = getattr(request, field) or []
        ok, bad = [], []
        for entry in entries:
            (bad if refuse_entry(entry) else ok).append(entry)
        if not bad:
            return self._with_operations(ctx, request, self.inner.handle(ctx, request))
        self.denied += 1
        if getattr(request, "acks", None) == 0:  # no answer to carry the error: Kafka closes the connection
            if ok:
                self.inner.handle(ctx, with_entries(request, field, ok))
            return CLOSE_CONNECTION
        part = refused(with_entries(request, field, bad), version, code)
        if not ok:
            if hasattr(part, "error_code"):
                part.error_code = 0  # the entries carry the error, as Kafka answers
            return part
        result = self.inner.handle(ctx, with_entries(request, field, ok))
        return _maybe_async(result, lambda answer: merge(answer, request, version, field, part))

    def _topic_name(self, entry) -> str:
        name = getattr(entry, "name", None) or getattr(entry, "topic", None)
        if not name and getattr(entry, "topic_id", None) is not None:
            name = self.topic_names().get(entry.topic_id)
        return name or ""

    def _split_topics(self, ctx, request, version: int, field: str, op: int):
        # The usual case first, in one tight loop: every topic allowed (a Produce asks this
        # for each of its topics on every request).
        authorize, principal, host = self.authorizer.authorize, ctx.principal, ctx.peer.rpartition(":")[0]
        for entry in getattr(request, field) or ():
            name = entry if isinstance(entry, str) else (getattr(entry, "name", None) or self._topic_name(entry))
            if (name or isinstance(entry, str)) and not authorize(principal, host, op, RESOURCE_TOPIC, name):
                break
        else:
            return self._with_operations(ctx, request, self.inner.handle(ctx, request))

        def refuse(entry):
            if isinstance(entry, str):
                return not self.allowed(ctx, op, RESOURCE_TOPIC, entry)
            name = self._topic_name(entry)
            return bool(name) and not self.allowed(ctx, op, RESOURCE_TOPIC, name)
        return self._split(ctx, request, version, field, refuse, TOPIC_DENIED)

    # --- per-API rules ----------------------------------------------------------------------
    def _api_0(self, ctx, request, version):  # Produce
        if request.transactional_id and not self.allowed(ctx, OPERATION_WRITE, RESOURCE_TRANSACTIONAL_ID,
                                                         request.transactional_id):
            self.denied += 1
            return CLOSE_CONNECTION if request.acks == 0 else refused(request, version, TXN_DENIED)
        return self._split_topics(ctx, request, version, "topic_data", OPERATION_WRITE)

    def _api_1(self, ctx, request, version):  # Fetch: a follower needs CLUSTER_ACTION
        replica = request.replica_state.replica_id if version >= 15 else request.replica_id
        if replica >= 0:
            if not self._cluster(ctx, OPERATION_CLUSTER_ACTION):
                return self._refuse(request, version, TOPIC_DENIED)
            return self.inner.handle(ctx, request)
        return self._split_topics(ctx, request, version, "topics", OPERATION_READ)

    def _api_23(self, ctx, request, version):  # OffsetForLeaderEpoch
        if request.replica_id >= 0:
            if not self._cluster(ctx, OPERATION_CLUSTER_ACTION):
                return self._refuse(request, version, CLUSTER_DENIED)
            return self.inner.handle(ctx, request)
        return self._split_topics(ctx, request, version, "topics", OPERATION_DESCRIBE)

    def _api_3(self, ctx, request, version):  # Metadata
        if request.topics is None:  # all topics: the answer lists those the caller may describe
            return self._with_operations(ctx, request, self.inner.handle(ctx, request), hide_topics=True)
        auto = self.auto_create and (version < 4 or request.allow_auto_topic_creation)
        may_create = auto and self._cluster(ctx, OPERATION_CREATE)

        def refuse(entry):
            name = self._topic_name(entry)
            if not name:
                return False
            if not self.allowed(ctx, OPERATION_DESCRIBE, RESOURCE_TOPIC, name):
                return True
            return (auto and not may_create and not self.topic_exists(name)
                    and not self.allowed(ctx, OPERATION_CREATE, RESOURCE_TOPIC, name))
        return self._split(ctx, request, version, "topics", refuse, TOPIC_DENIED)

    def _api_19(self, ctx, request, version):  # CreateTopics: CLUSTER CREATE or TOPIC CREATE
        if self._cluster(ctx, OPERATION_CREATE):
            result = self.inner.handle(ctx, request)
        else:
            result = self._split_topics(ctx, request, version, "topics", OPERATION_CREATE)
        if version < 5:
            return result

        def hide_configs(answer):  # Kafka: a topic's configs only with DESCRIBE_CONFIGS on it
            if isinstance(answer, Response):
                for t in answer.topics:
                    if t.error_code == 0 and not self.allowed(ctx, OPERATION_DESCRIBE_CONFIGS, RESOURCE_TOPIC, t.name):
                        t.configs, t.topic_config_error_code = None, TOPIC_DENIED
            return answer
        return _maybe_async(result, hide_configs)

    def _api_20(self, ctx, request, version):  # DeleteTopics
        field = "topics" if version >= 6 else "topic_names"
        return self._split_topics(ctx, request, version, field, OPERATION_DELETE)

    def _api_9(self, ctx, request, version):  # OffsetFetch
        if version >= 8:
            return self._split(ctx, request, version, "groups", lambda g: not self.allowed(
                ctx, OPERATION_DESCRIBE, RESOURCE_GROUP, g.group_id), GROUP_DENIED)
        if not self.allowed(ctx, OPERATION_DESCRIBE, RESOURCE_GROUP, request.group_id):
            return self._refuse(request, version, GROUP_DENIED)
        if request.topics is None:
            return self.inner.handle(ctx, request)
        return self._split_topics(ctx, request, version, "topics", OPERATION_DESCRIBE)

    def _api_8(self, ctx, request, version):  # OffsetCommit
        if not self.allowed(ctx, OPERATION_READ, RESOURCE_GROUP, request.group_id):
            return self._refuse(request, version, GROUP_DENIED)
        return self._split_topics(ctx, request, version, "topics", OPERATION_READ)

    def _api_10(self, ctx, request, version):  # FindCoordinator
        rtype, code = ((RESOURCE_TRANSACTIONAL_ID, TXN_DENIED) if request.key_type == 1
                       else (RESOURCE_GROUP, GROUP_DENIED))
        if version >= 4:
            return self._split(ctx, request, version, "coordinator_keys",
                               lambda k: not self.allowed(ctx, OPERATION_DESCRIBE, rtype, k), code)
        if not self.allowed(ctx, OPERATION_DESCRIBE, rtype, request.key):
            return self._refuse(request, version, code)
        return self.inner.handle(ctx, request)

    def _api_68(self, ctx, request, version):  # ConsumerGroupHeartbeat: READ on the group, DESCRIBE topics
        if not self.allowed(ctx, OPERATION_READ, RESOURCE_GROUP, request.group_id):
            return self._refuse(request, version, GROUP_DENIED)
        hidden = sorted(t for t in request.subscribed_topic_names or ()
                        if not self.allowed(ctx, OPERATION_DESCRIBE, RESOURCE_TOPIC, t))
        if hidden:
            return self._refuse(request, version, TOPIC_DENIED,
                                f"The following topic names are not authorized: {', '.join(hidden)}")
        ctx.may_describe_topic = lambda topic: self.allowed(ctx, OPERATION_DESCRIBE, RESOURCE_TOPIC, topic)
        return self.inner.handle(ctx, request)

    def _api_15(self, ctx, request, version):  # DescribeGroups
        return self._split(ctx, request, version, "groups",
                           lambda g: not self.allowed(ctx, OPERATION_DESCRIBE, RESOURCE_GROUP, g), GROUP_DENIED)

    def _api_69(self, ctx, request, version):  # ConsumerGroupDescribe
        return self._split(ctx, request, version, "group_ids",
                           lambda g: not self.allowed(ctx, OPERATION_DESCRIBE, RESOURCE_GROUP, g), GROUP_DENIED)

    def _api_42(self, ctx, request, version):  # DeleteGroups
        return self._split(ctx, request, version, "groups_names",
                           lambda g: not self.allowed(ctx, OPERATION_DELETE, RESOURCE_GROUP, g), GROUP_DENIED)

    def _api_65(self, ctx, request, version):  # DescribeTransactions
        return self._split(ctx, request, version, "transactional_ids", lambda t: not self.allowed(
            ctx, OPERATION_DESCRIBE, RESOURCE_TRANSACTIONAL_ID, t), TXN_DENIED)

    def _api_22(self, ctx, request, version):  # InitProducerId
        if request.transactional_id:
            if not self.allowed(ctx, OPERATION_WRITE, RESOURCE_TRANSACTIONAL_ID, request.transactional_id):
                return self._refuse(request, version, TXN_DENIED)
        elif not (self._cluster(ctx, OPERATION_IDEMPOTENT_WRITE) or self.authorizer.authorize_any(
                ctx.principal, ctx.peer.rpartition(":")[0], OPERATION_WRITE, RESOURCE_TOPIC)):
            return self._refuse(request, version, CLUSTER_DENIED)
        return self.inner.handle(ctx, request)

    def _txn_write(self, ctx, request, version, group_too: bool = False):
        if not self.allowed(ctx, OPERATION_WRITE, RESOURCE_TRANSACTIONAL_ID, request.transactional_id):
            return self._refuse(request, version, TXN_DENIED)
        if group_too and not self.allowed(ctx, OPERATION_READ, RESOURCE_GROUP, request.group_id):
            return self._refuse(request, version, GROUP_DENIED)
        return None

    def _api_24(self, ctx, request, version):  # AddPartitionsToTxn
        if version >= 4:  # the brokers' batched verification
            if not self._cluster(ctx, OPERATION_CLUSTER_ACTION):
                return self._refuse(request, version, CLUSTER_DENIED)
            return self.inner.handle(ctx, request)
        if not self.allowed(ctx, OPERATION_WRITE, RESOURCE_TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
            return self._refuse(request, version, TXN_DENIED)
        if any(not self.allowed(ctx, OPERATION_WRITE, RESOURCE_TOPIC, t.name) for t in request.v3_and_below_topics):
            answer = self._refuse(request, version, TOPIC_DENIED)
            for topic in answer.results_by_topic_v3_and_below:  # Kafka: the others OPERATION_NOT_ATTEMPTED
                if self.allowed(ctx, OPERATION_WRITE, RESOURCE_TOPIC, topic.name):
                    for p in topic.results_by_partition:
                        p.partition_error_code = int(ErrorCode.OPERATION_NOT_ATTEMPTED)
            return answer
        return self.inner.handle(ctx, request)

    def _api_25(self, ctx, request, version):  # AddOffsetsToTxn
        return self._txn_write(ctx, request, version, group_too=True) or self.inner.handle(ctx, request)

    def _api_26(self, ctx, request, version):  # EndTxn
        return self._txn_write(ctx, request, version) or self.inner.handle(ctx, request)

    def _api_28(self, ctx, request, version):  # TxnOffsetCommit
        denied = self._txn_write(ctx, request, version, group_too=True)
        if denied is not None:
            return denied
        return self._split_topics(ctx, request, version, "topics", OPERATION_READ)

    def _configs(self, ctx, request, version, op: int):
        def refuse(r):
            rtype, _ = _CONFIG_RESOURCES.get(r.resource_type, (RESOURCE_CLUSTER, CLUSTER_DENIED))
            name = CLUSTER if rtype == RESOURCE_CLUSTER else r.resource_name
            return not self.allowed(ctx, op, rtype, name)
        entries = request.resources or []
        bad = [r for r in entries if refuse(r)]
        if not bad:
            return self.inner.handle(ctx, request)
        ok = [r for r in entries if not refuse(r)]
        self.denied += 1
        part = refused(with_entries(request, "resources", bad), version, 0)
        answers = getattr(part, "results", None) or getattr(part, "responses")
        for answer, r in zip(answers, bad):
            answer.error_code = _CONFIG_RESOURCES.get(r.resource_type, (0, CLUSTER_DENIED))[1]
        if not ok:
            return part
        result = self.inner.handle(ctx, with_entries(request, "resources", ok))
        return _maybe_async(result, lambda answer: merge(answer, request, version, "resources", part))

    def _api_32(self, ctx, request, version):
        return self._configs(ctx, request, version, OPERATION_DESCRIBE_CONFIGS)

    def _api_33(self, ctx, request, version):
        return self._configs(ctx, request, version, OPERATION_ALTER_CONFIGS)

    def _api_44(self, ctx, request, version):
        return self._configs(ctx, request, version, OPERATION_ALTER_CONFIGS)

    def _api_75(self, ctx, request, version):  # DescribeTopicPartitions
        if not request.topics:
            return self._with_operations(ctx, request, self.inner.handle(ctx, request), hide_topics=True)
        return self._split_topics(ctx, request, version, "topics", OPERATION_DESCRIBE)

    # --- answers that list resources, and authorized-operations fields --------------------------
    def _with_operations(self, ctx, request, result, hide_topics: bool = False):
        key = request.API_KEY
        if key not in (3, 15, 16, 60, 66, 69, 75):
            return result
        return _maybe_async(result, lambda answer: self._fill(ctx, key, answer, hide_topics))

    def _fill(self, ctx, key: int, answer, hide_topics: bool):
        if not isinstance(answer, Response):
            return answer
        host = ctx.peer.rpartition(":")[0]
        az = self.authorizer

        def ops(rtype, name):
            return az.authorized_operations(ctx.principal, host, rtype, name, SUPPORTED_OPERATIONS[rtype])
        if key in (3, 75):
            if hide_topics:
                answer.topics = [t for t in answer.topics
                                 if self.allowed(ctx, OPERATION_DESCRIBE, RESOURCE_TOPIC, t.name or "")]
            for t in answer.topics:
                if t.topic_authorized_operations != NOT_REQUESTED and t.error_code != TOPIC_DENIED:
                    t.topic_authorized_operations = ops(RESOURCE_TOPIC, t.name or "")
        if key in (3, 60) and getattr(answer, "cluster_authorized_operations", NOT_REQUESTED) != NOT_REQUESTED:
            # Kafka: 0 unless the caller may DESCRIBE the cluster (DescribeCluster itself is open)
            answer.cluster_authorized_operations = (ops(RESOURCE_CLUSTER, CLUSTER)
                                                    if self._cluster(ctx, OPERATION_DESCRIBE) else 0)
        if key in (15, 69):
            for g in answer.groups:
                if g.authorized_operations != NOT_REQUESTED and g.error_code != GROUP_DENIED:
                    g.authorized_operations = ops(RESOURCE_GROUP, g.group_id)
        if key == 16 and not self._cluster(ctx, OPERATION_DESCRIBE):
            answer.groups = [g for g in answer.groups if self.allowed(ctx, OPERATION_DESCRIBE, RESOURCE_GROUP,
                                                                      g.group_id)]
        if key == 66:
            answer.transaction_states = [t for t in answer.transaction_states if self.allowed(
                ctx, OPERATION_DESCRIBE, RESOURCE_TRANSACTIONAL_ID, t.transactional_id)]
        return answer


def authorizing(inner, settings, **kwargs):
    """``inner`` behind a StandardAuthorizer configured from ``settings`` (Kafka names)."""
    return AuthorizingHandler(inner, StandardAuthorizer.from_settings(settings), **kwargs)
