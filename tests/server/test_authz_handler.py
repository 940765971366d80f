"""The per-API authorization table (``kraft.server.authz_handler``) over a recording handler:
an unauthorized caller gets Kafka's error for the API and the node never sees what was refused;
an authorized part goes through; super users pass."""

from __future__ import annotations

import uuid

import pytest

from kraft.metadata.acls import AclsImage, StandardAcl
from kraft.metadata.authorizer import StandardAuthorizer
from kraft.protocol import (CreateTopicsRequest, DescribeConfigsRequest, FetchRequest, FindCoordinatorRequest,
                            InitProducerIdRequest, JoinGroupRequest, MetadataRequest, MetadataResponse,
                            ProduceRequest, ProduceResponse, RequestHeader, VoteRequest)
from kraft.protocol.message import REQUESTS
from kraft.protocol.messages.acls import (OPERATION_DESCRIBE, OPERATION_WRITE, PATTERN_LITERAL, PATTERN_PREFIXED,
                                          PERMISSION_ALLOW, RESOURCE_TOPIC)
from kraft.server.authz_handler import AuthorizingHandler, CLUSTER_APIS, GROUP_APIS, OPEN_APIS, TOPIC_APIS
from kraft.server.authz_responses import refused
from kraft.server.request_context import RequestContext

ALICE = "User:alice"


class Recorder:
    def __init__(self):
        self.seen = []

    def handle(self, ctx, request):
        self.seen.append(request)
        if isinstance(request, ProduceRequest):
            R = ProduceResponse
            return R(responses=[R.Topic(name=t.name, partition_responses=[
                R.Topic.Partition(index=p.index, error_code=0) for p in t.partition_data]) for t in request.topic_data])
        if isinstance(request, MetadataRequest):
            T = MetadataResponse.Topic
            return MetadataResponse(topics=[T(name=n, error_code=0) for n in ("a", "secret", "a-1")])
        return refused(request, 0 if not hasattr(request, "_v") else request._v, 0)


def handler(*acls, super_users=()):
    az = StandardAuthorizer(super_users)
    image = AclsImage({uuid.UUID(int=i + 2): a for i, a in enumerate(acls)})
    inner = Recorder()
    return AuthorizingHandler(inner, az, acls=lambda: image), inner


def ctx(key, version, principal=ALICE):
    return RequestContext(RequestHeader(api_key=key, api_version=version, correlation_id=1, client_id="t"),
                          "PLAINTEXT", "127.0.0.1:5555", 0, principal)


def produce(*topics):
    P = ProduceRequest
    return P(acks=1, timeout_ms=100, topic_data=[P.Topic(name=t, partition_data=[P.Topic.Partition(index=0)])
                                                  for t in topics])


def topic_acl(name, op, pattern=PATTERN_LITERAL):
    return StandardAcl(RESOURCE_TOPIC, name, pattern, ALICE, "*", op, PERMISSION_ALLOW)


def test_produce_without_write_is_refused_per_partition_and_never_reaches_the_node():
    h, inner = handler()
    answer = h.handle(ctx(0, 9), produce("t"))
    assert answer.responses[0].partition_responses[0].error_code == 29 and not inner.seen


def test_produce_to_a_mix_hands_the_node_only_the_authorized_topics():
    h, inner = handler(topic_acl("ok-", OPERATION_WRITE, PATTERN_PREFIXED))
    answer = h.handle(ctx(0, 9), produce("ok-1", "no"))
    assert [t.name for t in inner.seen[0].topic_data] == ["ok-1"]
    codes = {t.name: t.partition_responses[0].error_code for t in answer.responses}
    assert codes == {"ok-1": 0, "no": 29}


def test_metadata_for_all_topics_hides_the_unauthorized_ones():
    h, _ = handler(topic_acl("a", OPERATION_DESCRIBE), topic_acl("a-", OPERATION_WRITE, PATTERN_PREFIXED))
    answer = h.handle(ctx(3, 12), MetadataRequest(topics=None))
    assert [t.name for t in answer.topics] == ["a", "a-1"]


def test_metadata_for_a_named_unauthorized_topic_answers_topic_authorization_failed():
    h, inner = handler()
    answer = h.handle(ctx(3, 12), MetadataRequest(topics=[MetadataRequest.Topic(name="secret")]))
    assert answer.topics[0].error_code == 29 and answer.error_code == 0 and not inner.seen


def test_create_topics_needs_create_and_writes_nothing_when_refused():
    h, inner = handler()
    T = CreateTopicsRequest.Topic
    answer = h.handle(ctx(19, 7), CreateTopicsRequest(topics=[T(name="n", num_partitions=1, replication_factor=1)],
                                                       timeout_ms=1000))
    assert answer.topics[0].error_code == 29 and answer.topics[0].name == "n" and not inner.seen


def test_follower_fetch_needs_cluster_action():
    h, inner = handler()
    F = FetchRequest
    req = F(replica_id=1, topics=[F.Topic(topic="t", partitions=[F.Topic.Partition(partition=0)])])
    answer = h.handle(ctx(1, 12), req)
    assert answer.responses[0].partitions[0].error_code == 29 and not inner.seen


def test_idempotent_init_producer_id_needs_idempotent_write_or_some_topic_write():
    h, inner = handler()
    assert h.handle(ctx(22, 4), InitProducerIdRequest(transactional_id=None)).error_code == 31
    h, inner = handler(topic_acl("any", OPERATION_WRITE))
    h.handle(ctx(22, 4), InitProducerIdRequest(transactional_id=None))
    assert inner.seen
    assert h.handle(ctx(22, 4), InitProducerIdRequest(transactional_id="tx")).error_code == 53


def test_group_and_coordinator_and_config_refusals_use_kafkas_codes():
    h, inner = handler()
    assert h.handle(ctx(11, 5), JoinGroupRequest(group_id="g")).error_code == 30
    assert h.handle(ctx(10, 3), FindCoordinatorRequest(key="g", key_type=0)).error_code == 30
    assert h.handle(ctx(10, 3), FindCoordinatorRequest(key="tx", key_type=1)).error_code == 53
    R = DescribeConfigsRequest.Resource
    answer = h.handle(ctx(32, 4), DescribeConfigsRequest(resources=[R(resource_type=2, resource_name="t"),
                                                                    R(resource_type=4, resource_name="1")]))
    assert [r.error_code for r in answer.results] == [29, 31]
    assert h.handle(ctx(52, 1), VoteRequest()).error_code == 31
    assert not inner.seen


def test_super_users_pass_everything():
    h, inner = handler(super_users={"User:ANONYMOUS"})
    h.handle(ctx(19, 7, "User:ANONYMOUS"), CreateTopicsRequest(topics=[], timeout_ms=1))
    assert inner.seen


@pytest.mark.parametrize("key", sorted(set(REQUESTS) - OPEN_APIS - {10002}))
def test_every_api_is_either_checked_or_open_by_kafkas_rules(key):
    """Each API key has a rule (a whole-request rule, a per-resource rule or a method), so no
    API slips through unchecked by being forgotten. The answers-only-filtered ones are listed."""
    listed_only = {16, 66, 60}  # ListGroups, ListTransactions: answers filtered; DescribeCluster: open
    has_method = hasattr(AuthorizingHandler, f"_api_{key}")
    assert key in CLUSTER_APIS or key in GROUP_APIS or key in TOPIC_APIS or has_method or key in listed_only, key


def test_a_refused_acks_0_produce_closes_the_connection():
    """No answer can carry the error, so Kafka closes the connection (the client reconnects and
    refreshes its metadata); nothing reaches the node."""
    from kraft.protocol.framing import CLOSE_CONNECTION
    h, inner = handler()
    req = produce("t")
    req.acks = 0
    assert h.handle(ctx(0, 9), req) is CLOSE_CONNECTION and not inner.seen
    req.transactional_id = "tx"
    assert h.handle(ctx(0, 9), req) is CLOSE_CONNECTION and not inner.seen


def test_create_topics_answers_configs_only_with_describe_configs():
    from kraft.protocol import CreateTopicsResponse
    from kraft.protocol.messages.acls import OPERATION_CREATE

    class Creator(Recorder):
        def handle(self, ctx, request):
            self.seen.append(request)
            T = CreateTopicsResponse.Topic
            return CreateTopicsResponse(topics=[T(name=t.name, error_code=0, configs=[]) for t in request.topics])
    h, _ = handler(topic_acl("n", OPERATION_CREATE))
    h.inner = Creator()
    T = CreateTopicsRequest.Topic
    answer = h.handle(ctx(19, 7), CreateTopicsRequest(topics=[T(name="n", num_partitions=1, replication_factor=1)],
                                                       timeout_ms=1000))
    assert answer.topics[0].error_code == 0 and answer.topics[0].configs is None
    assert answer.topics[0].topic_config_error_code == 29


def test_consumer_group_heartbeat_needs_describe_on_the_subscribed_topics():
    from kraft.protocol import ConsumerGroupHeartbeatRequest
    from kraft.protocol.messages.acls import OPERATION_READ, RESOURCE_GROUP
    h, inner = handler(StandardAcl(RESOURCE_GROUP, "g", PATTERN_LITERAL, ALICE, "*", OPERATION_READ, PERMISSION_ALLOW),
                       topic_acl("a", OPERATION_READ))
    answer = h.handle(ctx(68, 0), ConsumerGroupHeartbeatRequest(group_id="g", subscribed_topic_names=["a", "b"]))
    assert answer.error_code == 29 and "b" in answer.error_message and not inner.seen
    h.handle(ctx(68, 0), ConsumerGroupHeartbeatRequest(group_id="g", subscribed_topic_names=["a"]))
    assert inner.seen
