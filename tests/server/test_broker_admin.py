"""Admin requests on a broker listener (``kraft.server.broker_admin``) without processes: what
is forwarded to the controller and how its failure is answered, what is read from the image,
and auto topic creation on Metadata."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from kraft.broker.broker_state import BrokerState
from kraft.broker.handlers import BrokerHandlers
from kraft.errors import ErrorCode as E
from kraft.errors import NetworkError
from kraft.metadata import MetadataDelta, RegisterBrokerRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.protocol import (ApiVersionsRequest, CreateTopicsRequest, CreateTopicsResponse, DescribeClusterRequest,
                            MetadataRequest)
from kraft.server.broker_admin import FORWARDED_APIS, IMAGE_READ_APIS, AutoCreate, BrokerAdminHandlers


class FakeControllerClient:
    def __init__(self, fail=False):
        self.sent = []
        self.fail = fail

    async def call(self, request, *, version=None, deadline_s=30.0):
        self.sent.append((request, version))
        if self.fail:
            raise NetworkError("no controller")
        return CreateTopicsResponse(topics=[CreateTopicsResponse.Topic(name=t.name, error_code=0)
                                            for t in request.topics])


def image_with_brokers(*ids, fenced=()):
    delta = MetadataDelta(EMPTY_IMAGE)
    E_ = RegisterBrokerRecord.BrokerEndpoint
    for i in ids:
        delta.replay(RegisterBrokerRecord(broker_id=i, incarnation_id=uuid.UUID(int=i), broker_epoch=i, features=[],
                                          end_points=[E_(name="PLAINTEXT", host="h", port=9000 + i,
                                                         security_protocol=0)], rack=None, fenced=i in fenced))
    return delta.apply()


def admin(client, auto=True, serving=True):
    state = BrokerState(1, logs=None, cluster_id="c1")
    state.image = image_with_brokers(1, 2, 3, fenced=(3,))
    state.is_serving = lambda: serving
    return BrokerAdminHandlers(BrokerHandlers(state), client, auto_create=AutoCreate(auto, 3, 2))


def ctx(version):
    return SimpleNamespace(header=SimpleNamespace(api_version=version), listener="PLAINTEXT")


def run(x):
    return asyncio.run(x) if asyncio.iscoroutine(x) else x


def test_api_versions_lists_broker_forwarded_and_image_read_apis():
    keys = {k.api_key for k in admin(FakeControllerClient()).handle(ctx(3), ApiVersionsRequest()).api_keys}
    assert FORWARDED_APIS | IMAGE_READ_APIS | {0, 1, 3} <= keys


def test_create_topics_is_forwarded_at_the_clients_version():
    client = FakeControllerClient()
    T = CreateTopicsRequest.Topic
    resp = run(admin(client).handle(ctx(5), CreateTopicsRequest(topics=[T(name="t", num_partitions=1,
                                                                         replication_factor=1)], timeout_ms=100)))
    assert resp.topics[0].name == "t" and client.sent[0][1] == 5


def test_no_controller_answers_not_controller():
    T = CreateTopicsRequest.Topic
    resp = run(admin(FakeControllerClient(fail=True)).handle(
        ctx(5), CreateTopicsRequest(topics=[T(name="t", num_partitions=1, replication_factor=1)], timeout_ms=1)))
    assert resp.topics[0].error_code == E.NOT_CONTROLLER


def test_describe_cluster_lists_unfenced_brokers_and_refuses_controller_endpoints():
    h = admin(FakeControllerClient())
    resp = h.handle(ctx(1), DescribeClusterRequest(endpoint_type=1))
    assert resp.error_code == 0 and [b.broker_id for b in resp.brokers] == [1, 2]
    assert resp.cluster_id == "c1"
    assert h.handle(ctx(1), DescribeClusterRequest(endpoint_type=2)).error_code == E.MISMATCHED_ENDPOINT_TYPE
    not_serving = admin(FakeControllerClient(), serving=False)
    assert [b.broker_id for b in not_serving.handle(ctx(0), DescribeClusterRequest()).brokers] == [2]


def test_metadata_for_unknown_topics_auto_creates_the_valid_ones():
    async def scenario():
        client = FakeControllerClient()
        h = admin(client)
        T = MetadataRequest.Topic
        req = MetadataRequest(topics=[T(name="new"), T(name="bad name!"), T(name="__consumer_offsets")],
                              allow_auto_topic_creation=True)
        resp = h.handle(ctx(9), req)
        again = h.handle(ctx(9), req)  # while the first creation is in flight: not sent twice
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return client, resp, again

    client, resp, again = asyncio.run(scenario())
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == {"new": E.LEADER_NOT_AVAILABLE, "bad name!": E.INVALID_TOPIC_EXCEPTION,
                     "__consumer_offsets": E.UNKNOWN_TOPIC_OR_PARTITION}
    assert {t.name: t.error_code for t in again.topics}["new"] == E.LEADER_NOT_AVAILABLE
    assert len(client.sent) == 1
    (topic,) = client.sent[0][0].topics
    assert (topic.name, topic.num_partitions, topic.replication_factor) == ("new", 3, 2)


def test_metadata_does_not_create_when_not_allowed_or_disabled():
    T = MetadataRequest.Topic
    for h, req in ((admin(FakeControllerClient()), MetadataRequest(topics=[T(name="x")],
                                                                   allow_auto_topic_creation=False)),
                   (admin(FakeControllerClient(), auto=False), MetadataRequest(topics=[T(name="x")]))):
        resp = h.handle(ctx(9), req)
        assert resp.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION and not h.client.sent


# --- no authorizer (Kafka's answers) --------------------------------------------------------

CLUSTER_OPS = (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
TOPIC_OPS = (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11)


def test_acl_writes_are_answered_security_disabled_here_and_not_forwarded():
    from kraft.protocol import CreateAclsRequest, DeleteAclsRequest
    client = FakeControllerClient()
    h = admin(client)
    C = CreateAclsRequest.Creation
    create = CreateAclsRequest(creations=[C(resource_type=2, resource_name="t", resource_pattern_type=3,
                                            principal="User:a", host="*", operation=3, permission_type=3)])
    resp = run(h.handle(ctx(3), create))
    assert [(r.error_code, r.error_message) for r in resp.results] == [(E.SECURITY_DISABLED,
                                                                       "No Authorizer is configured.")]
    F = DeleteAclsRequest.Filter
    resp = run(h.handle(ctx(3), DeleteAclsRequest(filters=[F(resource_type_filter=1, pattern_type_filter=1,
                                                             operation=1, permission_type=1)])))
    assert [r.error_code for r in resp.filter_results] == [E.SECURITY_DISABLED]
    assert client.sent == []


def test_authorized_operations_are_kafkas_without_an_authorizer():
    """Kafka (AuthHelper.authorizedOperations) with no authorizer reports every operation a
    resource type supports; a field nobody asked for is Integer.MIN_VALUE."""
    h = admin(FakeControllerClient(), auto=False)
    asked = h.handle(ctx(0), DescribeClusterRequest(include_cluster_authorized_operations=True))
    assert asked.cluster_authorized_operations == CLUSTER_OPS
    assert h.handle(ctx(0), DescribeClusterRequest()).cluster_authorized_operations == -(1 << 31)
    for version in (8, 10):
        resp = h.handle(ctx(version), MetadataRequest(topics=[MetadataRequest.Topic(name="nope")],
                                                      include_cluster_authorized_operations=True,
                                                      include_topic_authorized_operations=True))
        assert resp.cluster_authorized_operations == CLUSTER_OPS
        assert [t.topic_authorized_operations for t in resp.topics] == [TOPIC_OPS]
    resp = h.handle(ctx(12), MetadataRequest(topics=None, include_topic_authorized_operations=False))
    assert resp.cluster_authorized_operations == -(1 << 31)


def test_create_topics_waits_for_a_first_unfenced_broker_before_it_is_forwarded():
    """At cluster start a client can see this broker in Metadata before any broker is unfenced:
    its CreateTopics waits for one (within its timeout) instead of being refused for lack of
    brokers (Kafka's broker would not have accepted the connection yet)."""
    client = FakeControllerClient()
    a = admin(client)
    a.state.image = image_with_brokers(1, 2, 3, fenced=(1, 2, 3))
    T = CreateTopicsRequest.Topic

    async def main():
        pending = asyncio.ensure_future(a.handle(ctx(5), CreateTopicsRequest(
            topics=[T(name="t", num_partitions=1, replication_factor=1)], timeout_ms=5000)))
        await asyncio.sleep(0.3)
        assert not client.sent  # held: nobody could host a replica yet
        a.state.image = image_with_brokers(1, 2, 3, fenced=(2, 3))
        resp = await pending
        return resp
    resp = asyncio.run(main())
    assert resp.topics[0].error_code == 0 and len(client.sent) == 1
    # never longer than the request's own timeout
    a.state.image = image_with_brokers(1, fenced=(1,))
    resp = run(a.handle(ctx(5), CreateTopicsRequest(topics=[T(name="u", num_partitions=1, replication_factor=1)],
                                                   timeout_ms=200)))
    assert len(client.sent) == 2


def test_client_quota_apis_at_every_advertised_version_answer_decodably():
    """DescribeClientQuotas is read from this broker's image, AlterClientQuotas forwarded; each
    version the broker advertises round-trips through the wire codec."""
    from kraft.protocol import decode_request, decode_response, encode_request, encode_response
    from kraft.protocol.messages.client_quotas import (AlterClientQuotasRequest, AlterClientQuotasResponse,
                                                       DescribeClientQuotasRequest, EntityData)
    from kraft.metadata.records import ClientQuotaRecord

    class Quotas(FakeControllerClient):
        async def call(self, request, *, version=None, deadline_s=30.0):
            self.sent.append((request, version))
            return AlterClientQuotasResponse(entries=[AlterClientQuotasResponse.Entry(entity=e.entity)
                                                      for e in request.entries])

    client = Quotas()
    handlers = admin(client)
    delta = MetadataDelta(handlers.state.image)
    delta.replay(ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type="client-id", entity_name="flood")],
                                   key="producer_byte_rate", value=1048576.0, remove=False))
    handlers.state.image = delta.apply()
    table = {k.api_key: (k.min_version, k.max_version) for k in handlers.handle(ctx(3), ApiVersionsRequest()).api_keys}
    assert table[48] == (0, 1) and table[49] == (0, 1)
    C = DescribeClientQuotasRequest.Component
    A = AlterClientQuotasRequest
    for v in range(0, 2):
        for request in (DescribeClientQuotasRequest(components=[C(entity_type="client-id", match_type=2)], strict=True),
                        A(entries=[A.Entry(entity=[EntityData(entity_type="user", entity_name=None)],
                                           ops=[A.Entry.Op(key="consumer_byte_rate", value=5.0)])])):
            header, decoded = decode_request(encode_request(request, v, 7, "c")[4:])
            resp = run(handlers.handle(ctx(v), decoded))
            _, back = decode_response(encode_response(header, header.api_key, v, resp)[4:], header.api_key, v)
            if header.api_key == 48:
                assert [(e.entity[0].entity_name, e.values[0].value) for e in back.entries] == [("flood", 1048576.0)]
            else:
                assert back.entries[0].entity[0].entity_name is None and client.sent[-1][1] == v
