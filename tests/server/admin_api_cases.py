"""Cases of the every-advertised-version sweep for the controller's admin APIs (configs, ACLs,
features, producer ids, reassignment listing): per API, a request that must succeed and one
that must fail with Kafka's error code. Runs after the CreateTopics sweep, which leaves the
topic ``keep7`` behind."""

from __future__ import annotations

import uuid

from kraft.errors import ErrorCode
from kraft.protocol.messages import (AllocateProducerIdsRequest, AlterConfigsRequest, AssignReplicasToDirsRequest, CreateAclsRequest,
                                     DeleteAclsRequest, DescribeAclsRequest, DescribeConfigsRequest,
                                     IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest,
                                     UpdateFeaturesRequest)
from kraft.protocol.messages.client_quotas import AlterClientQuotasRequest, EntityData
from kraft.protocol.messages.scram_credentials import (AlterUserScramCredentialsRequest,
                                                       DescribeUserScramCredentialsRequest)

TOPIC_RESOURCE = 2
LITERAL, ALLOW, READ, ANY = 3, 3, 3, 1


def admin_cases(expect, ok):
    def describe_configs(node, version):
        R = DescribeConfigsRequest.Resource
        return [("topic", DescribeConfigsRequest(resources=[R(resource_type=TOPIC_RESOURCE, resource_name="keep7",
                                                               configuration_keys=None)]), expect(ok)),
                ("unknown", DescribeConfigsRequest(resources=[R(resource_type=TOPIC_RESOURCE, resource_name="nope",
                                                                configuration_keys=None)]),
                 expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))]

    def alter_configs(node, version):
        R, C = AlterConfigsRequest.Resource, AlterConfigsRequest.Resource.Config
        def req(value):
            return AlterConfigsRequest(resources=[R(resource_type=TOPIC_RESOURCE, resource_name="keep7",
                                                    configs=[C(name="retention.ms", value=value)])])
        return [("set", req("86400000"), expect(ok)), ("bad value", req("soon"), expect(ErrorCode.INVALID_CONFIG))]

    def incremental_alter_configs(node, version):
        R, C = IncrementalAlterConfigsRequest.Resource, IncrementalAlterConfigsRequest.Resource.Config
        def req(value, name="keep7"):
            return IncrementalAlterConfigsRequest(resources=[R(resource_type=TOPIC_RESOURCE, resource_name=name, configs=[
                C(name="segment.ms", config_operation=0, value=value)])])
        return [("set", req("600000"), expect(ok)), ("bad value", req("x"), expect(ErrorCode.INVALID_CONFIG)),
                ("unknown topic", req("600000", "nope"), expect(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))]

    def acl(cls, principal="User:alice", resource_type=TOPIC_RESOURCE):
        return cls(resource_type=resource_type, resource_name="keep7", resource_pattern_type=LITERAL,
                   principal=principal, host="*", operation=READ, permission_type=ALLOW)

    # The nodes run without an authorizer (kraft has none yet), so every ACL request, valid or not,
    # is answered SECURITY_DISABLED, as Kafka answers it (AclApis); the ACL logic itself is
    # tested on the handlers (tests/controller/test_acls_handlers.py).
    disabled = expect(ErrorCode.SECURITY_DISABLED)

    def create_acls(node, version):
        C = CreateAclsRequest.Creation
        return [("create", CreateAclsRequest(creations=[acl(C)]), disabled),
                ("resource ANY", CreateAclsRequest(creations=[acl(C, resource_type=ANY)]), disabled)]

    def describe_acls(node, version):
        def req(pattern):
            return DescribeAclsRequest(resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=pattern,
                                       principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY)
        return [("any", req(ANY), disabled), ("unknown pattern", req(0), disabled)]

    def delete_acls(node, version):
        F = DeleteAclsRequest.Filter
        def req(pattern):
            return DeleteAclsRequest(filters=[F(resource_type_filter=TOPIC_RESOURCE, resource_name_filter="keep7",
                                                pattern_type_filter=pattern, principal_filter=None, host_filter=None,
                                                operation=ANY, permission_type=ANY)])
        return [("delete", req(LITERAL), disabled), ("unknown pattern", req(0), disabled)]

    def update_features(node, version):
        U = UpdateFeaturesRequest.FeatureUpdate
        bad = UpdateFeaturesRequest(timeout_ms=1000, feature_updates=[
            U(feature="no.such.feature", max_version_level=1, allow_downgrade=False, upgrade_type=1)])
        return [("nothing", UpdateFeaturesRequest(timeout_ms=1000, feature_updates=[]), expect(ok)),
                ("unknown feature", bad, expect(ErrorCode.INVALID_UPDATE_VERSION))]

    def allocate_producer_ids(node, version):
        return [("live broker", AllocateProducerIdsRequest(broker_id=1, broker_epoch=node.broker_epoch), expect(ok)),
                ("stale epoch", AllocateProducerIdsRequest(broker_id=1, broker_epoch=node.broker_epoch - 1),
                 expect(ErrorCode.STALE_BROKER_EPOCH))]

    def assign_replicas_to_dirs(node, version):
        A = AssignReplicasToDirsRequest
        none = A(broker_id=1, broker_epoch=node.broker_epoch, directories=[])
        unknown = A(broker_id=1, broker_epoch=node.broker_epoch, directories=[A.Directory(
            id=uuid.UUID(int=0xD1 << 64), topics=[A.Directory.Topic(topic_id=uuid.UUID(int=99), partitions=[0])])])
        return [("nothing", none, expect(ok)), ("unknown topic id", unknown, expect(ErrorCode.UNKNOWN_TOPIC_ID)),
                ("stale epoch", A(broker_id=1, broker_epoch=node.broker_epoch - 1, directories=[]),
                 expect(ErrorCode.STALE_BROKER_EPOCH))]

    def list_reassignments(node, version):
        T = ListPartitionReassignmentsRequest.Topic
        return [("all", ListPartitionReassignmentsRequest(timeout_ms=1000, topics=None), expect(ok)),
                ("one", ListPartitionReassignmentsRequest(timeout_ms=1000, topics=[T(name="keep7", partition_indexes=[0])]),
                 expect(ok))]

    def alter_scram(node, version):
        U = AlterUserScramCredentialsRequest.Upsertion
        def req(iterations):
            return AlterUserScramCredentialsRequest(deletions=[], upsertions=[
                U(name="alice", mechanism=2, iterations=iterations, salt=b"salt", salted_password=b"x" * 64)])
        return [("upsert", req(8192), expect(ok)), ("too few iterations", req(100),
                                                    expect(ErrorCode.UNACCEPTABLE_CREDENTIAL))]

    def describe_scram(node, version):
        N = DescribeUserScramCredentialsRequest.UserName
        return [("all", DescribeUserScramCredentialsRequest(users=None), expect(ok)),
                ("unknown", DescribeUserScramCredentialsRequest(users=[N(name="nobody")]),
                 expect(ErrorCode.RESOURCE_NOT_FOUND))]

    def alter_client_quotas(node, version):
        A = AlterClientQuotasRequest
        def req(key):
            return A(entries=[A.Entry(entity=[EntityData(entity_type="client-id", entity_name="flood")],
                                      ops=[A.Entry.Op(key=key, value=1048576.0)])])
        return [("set", req("producer_byte_rate"), expect(ok)),
                ("ip key on a client", req("connection_creation_rate"), expect(ErrorCode.INVALID_REQUEST))]

    return {49: alter_client_quotas, 51: alter_scram, 50: describe_scram, 32: describe_configs, 33: alter_configs, 44: incremental_alter_configs, 30: create_acls,
            29: describe_acls, 31: delete_acls, 57: update_features, 67: allocate_producer_ids,
            46: list_reassignments, 73: assign_replicas_to_dirs}
