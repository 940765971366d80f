"""CreateAcls, DescribeAcls and DeleteAcls on the controller (Kafka's ``AclControlManager`` and
``AclBindingFilter`` semantics): records replayed give the ACLs asked for; filters select what
Kafka's would, including ANY/MATCH pattern types over literal, prefixed and wildcard ACLs."""

from __future__ import annotations

import pytest

from kraft.controller.acls import HANDLERS, handle_create_acls, handle_delete_acls, handle_describe_acls
from kraft.errors import ErrorCode
from kraft.metadata import AccessControlEntryRecord
from kraft.metadata.acls import StandardAcl
from kraft.protocol import (CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
                            DescribeAclsRequest, DescribeAclsResponse)
from kraft.protocol.messages.acls import (OPERATION_ALL, OPERATION_ANY, OPERATION_READ, OPERATION_WRITE, PATTERN_ANY,
                                          PATTERN_LITERAL, PATTERN_MATCH, PATTERN_PREFIXED, PERMISSION_ALLOW,
                                          PERMISSION_ANY, PERMISSION_DENY, RESOURCE_ANY, RESOURCE_CLUSTER,
                                          RESOURCE_GROUP, RESOURCE_TOPIC)
from admin_fixtures import apply, cluster_image, context

ALICE, BOB = "User:alice", "User:bob"


def acl(resource_type=RESOURCE_TOPIC, name="foo", pattern=PATTERN_LITERAL, principal=ALICE, host="*",
        operation=OPERATION_READ, permission=PERMISSION_ALLOW) -> StandardAcl:
    return StandardAcl(resource_type, name, pattern, principal, host, operation, permission)


def create(image, *acls, version=3):
    request = CreateAclsRequest(creations=[CreateAclsRequest.Creation(
        resource_type=a.resource_type, resource_name=a.resource_name, resource_pattern_type=a.pattern_type,
        principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type) for a in acls])
    return handle_create_acls(context(image, version), request)


def with_acls(*acls):
    image = cluster_image()
    result = create(image, *acls)
    assert all(r.error_code == 0 for r in result.response.results)
    return apply(image, result.records)


# Literal foo, literal wildcard, prefixed "fo", prefixed "bar", group foo, and a DENY for bob.
STORED = [acl(), acl(name="*"), acl(name="fo", pattern=PATTERN_PREFIXED, operation=OPERATION_WRITE),
          acl(name="bar", pattern=PATTERN_PREFIXED), acl(resource_type=RESOURCE_GROUP),
          acl(principal=BOB, permission=PERMISSION_DENY, host="10.0.0.1")]


def describe(image, resource_type=RESOURCE_ANY, name=None, pattern=PATTERN_ANY, principal=None, host=None,
             operation=OPERATION_ANY, permission=PERMISSION_ANY):
    request = DescribeAclsRequest(resource_type_filter=resource_type, resource_name_filter=name,
                                  pattern_type_filter=pattern, principal_filter=principal, host_filter=host,
                                  operation=operation, permission_type=permission)
    result = handle_describe_acls(context(image, 3), request)
    assert result.records == []
    return result.response


def described(response) -> set:
    return {StandardAcl(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                        a.permission_type) for r in response.resources for a in r.acls}


def test_handlers_table():
    assert set(HANDLERS) == {29, 30, 31}


def test_created_acls_reach_the_image_with_distinct_ids():
    image = with_acls(*STORED)
    assert sorted(image.acls.acls.values()) == sorted(STORED)
    assert len(set(image.acls.acls)) == len(STORED)


def test_ids_are_deterministic_and_creation_is_atomic():
    first, second = create(cluster_image(), *STORED), create(cluster_image(), *STORED)
    assert first.records == second.records and first.atomic
    assert all(isinstance(r, AccessControlEntryRecord) for r in first.records)


def test_an_existing_or_repeated_acl_succeeds_without_a_new_record():
    image = with_acls(acl())
    result = create(image, acl(), acl(operation=OPERATION_WRITE), acl(operation=OPERATION_WRITE))
    assert [r.error_code for r in result.response.results] == [0, 0, 0]
    assert len(result.records) == 1
    assert len(apply(image, result.records).acls.acls) == 2


@pytest.mark.parametrize("bad,message", [
    (acl(pattern=PATTERN_MATCH), "Invalid patternType"),
    (acl(pattern=PATTERN_ANY), "Invalid patternType"),
    (acl(resource_type=RESOURCE_ANY), "Invalid resourceType"),
    (acl(operation=OPERATION_ANY), "Invalid operation"),
    (acl(permission=PERMISSION_ANY), "Invalid permissionType"),
    (acl(name=""), "Resource name should not be empty"),
    (acl(principal="alice"), "Could not parse principal"),
    (acl(resource_type=RESOURCE_CLUSTER, name="c"), "The only valid name for the CLUSTER resource is kafka-cluster"),
])
def test_invalid_bindings_are_invalid_request_and_others_still_created(bad, message):
    result = create(cluster_image(), bad, acl())
    (first, second) = result.response.results
    assert first.error_code == ErrorCode.INVALID_REQUEST and first.error_message.startswith(message)
    assert second.error_code == 0 and len(result.records) == 1


def test_cluster_acl_with_the_cluster_name_is_accepted():
    image = with_acls(acl(resource_type=RESOURCE_CLUSTER, name="kafka-cluster", operation=OPERATION_ALL))
    assert len(image.acls.acls) == 1


@pytest.mark.parametrize("kwargs,expected", [
    ({}, STORED),
    ({"resource_type": RESOURCE_TOPIC, "name": "foo", "pattern": PATTERN_LITERAL}, [STORED[0], STORED[5]]),
    # ANY pattern: exact name over every pattern type
    ({"name": "fo", "pattern": PATTERN_ANY}, [STORED[2]]),
    # MATCH: every ACL that applies to topic "foo": literal foo, literal *, prefixed "fo"
    ({"resource_type": RESOURCE_TOPIC, "name": "foo", "pattern": PATTERN_MATCH}, [STORED[0], STORED[1], STORED[2],
                                                                                  STORED[5]]),
    ({"resource_type": RESOURCE_TOPIC, "name": "barn", "pattern": PATTERN_MATCH}, [STORED[1], STORED[3]]),
    ({"pattern": PATTERN_PREFIXED}, [STORED[2], STORED[3]]),
    ({"principal": BOB}, [STORED[5]]),
    ({"host": "10.0.0.1"}, [STORED[5]]),
    ({"operation": OPERATION_WRITE}, [STORED[2]]),
    ({"permission": PERMISSION_DENY}, [STORED[5]]),
    ({"resource_type": RESOURCE_GROUP}, [STORED[4]]),
])
def test_describe_filters_match_like_kafka(kwargs, expected):
    response = describe(with_acls(*STORED), **kwargs)
    assert response.error_code == 0
    assert described(response) == set(expected)


def test_describe_groups_acls_by_resource_pattern():
    response = describe(with_acls(acl(), acl(principal=BOB), acl(name="bar")))
    assert sorted((r.resource_name, len(r.acls)) for r in response.resources) == [("bar", 1), ("foo", 2)]


@pytest.mark.parametrize("field", ["resource_type", "pattern", "operation", "permission"])
def test_describe_with_an_unknown_element_is_invalid_request(field):
    response = describe(with_acls(*STORED), **{field: 0})
    assert response.error_code == ErrorCode.INVALID_REQUEST and response.resources == []


def delete(image, *filters):
    request = DeleteAclsRequest(filters=[DeleteAclsRequest.Filter(
        resource_type_filter=f.get("resource_type", RESOURCE_ANY), resource_name_filter=f.get("name"),
        pattern_type_filter=f.get("pattern", PATTERN_ANY), principal_filter=f.get("principal"),
        host_filter=f.get("host"), operation=f.get("operation", OPERATION_ANY),
        permission_type=f.get("permission", PERMISSION_ANY)) for f in filters])
    return handle_delete_acls(context(image, 3), request)


def test_delete_removes_what_each_filter_matches_once():
    image = with_acls(*STORED)
    result = delete(image, {"resource_type": RESOURCE_TOPIC, "name": "foo", "pattern": PATTERN_MATCH},
                    {"principal": BOB})
    first, second = result.response.filter_results
    assert len(first.matching_acls) == 4 and len(second.matching_acls) == 1  # bob's ACL matches both
    assert len(result.records) == 4 and result.atomic
    after = apply(image, result.records)
    assert sorted(after.acls.acls.values()) == sorted([STORED[3], STORED[4]])


def test_delete_with_no_match_or_unknown_filter():
    image = with_acls(*STORED)
    result = delete(image, {"principal": "User:nobody"}, {"operation": 0})
    nothing, bad = result.response.filter_results
    assert (nothing.error_code, nothing.matching_acls) == (0, [])
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    assert result.records == []


@pytest.mark.parametrize("version", [1, 2, 3])
def test_acl_responses_encode_at_every_version(version):
    image = with_acls(*STORED)
    for response, cls in ((describe(image), DescribeAclsResponse),
                          (delete(image, {}).response, DeleteAclsResponse),
                          (create(image, acl(name="x")).response, CreateAclsResponse)):
        assert cls.decode(response.encode(version), version) == response


def test_kafka_python_reads_our_describe_and_delete_responses():
    kacl = pytest.importorskip("kafka.protocol.admin.acl", reason="kafka-python is not installed")
    image = with_acls(*STORED)
    theirs = kacl.DescribeAclsResponse.decode(describe(image, principal=BOB).encode(3), version=3)
    assert [(r.resource_name, [(a.principal, a.host, a.permission_type) for a in r.acls]) for r in theirs.resources] \
        == [("foo", [(BOB, "10.0.0.1", PERMISSION_DENY)])]
    theirs = kacl.DeleteAclsResponse.decode(delete(image, {"principal": BOB}).response.encode(2), version=2)
    assert [len(f.matching_acls) for f in theirs.filter_results] == [1]


# --- no authorizer: Kafka's AclApis answer ---------------------------------------------------

STANDARD = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}


def _requests():
    C, F = CreateAclsRequest.Creation, DeleteAclsRequest.Filter
    a = acl()
    create_req = CreateAclsRequest(creations=[C(
        resource_type=a.resource_type, resource_name=a.resource_name, resource_pattern_type=a.pattern_type,
        principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type)] * 2)
    any_filter = dict(resource_type_filter=RESOURCE_ANY, resource_name_filter=None, pattern_type_filter=PATTERN_ANY,
                      principal_filter=None, host_filter=None, operation=OPERATION_ANY, permission_type=PERMISSION_ANY)
    return {30: create_req, 31: DeleteAclsRequest(filters=[F(**any_filter)] * 3), 29: DescribeAclsRequest(**any_filter)}


def test_without_an_authorizer_every_acl_request_is_security_disabled_and_writes_nothing():
    """Kafka's AclApis with no authorizer: CreateAcls and DeleteAcls answer SECURITY_DISABLED per
    creation / filter, DescribeAcls once; nothing is stored for nothing to enforce."""
    image = with_acls(acl(name="stored-before"))
    disabled = int(ErrorCode.SECURITY_DISABLED)
    for settings in ({}, {"authorizer.class.name": ""}):
        requests = _requests()
        created = HANDLERS[30](context(image, 3, settings), requests[30])
        assert created.records == []
        assert [(r.error_code, r.error_message) for r in created.response.results] == \
            [(disabled, "No Authorizer is configured.")] * 2
        deleted = HANDLERS[31](context(image, 3, settings), requests[31])
        assert deleted.records == []
        assert [(r.error_code, r.error_message, r.matching_acls) for r in deleted.response.filter_results] == \
            [(disabled, "No Authorizer is configured.", [])] * 3
        described = HANDLERS[29](context(image, 3, settings), requests[29]).response
        assert (described.error_code, described.error_message, described.resources) == \
            (disabled, "No Authorizer is configured on the broker", [])


def test_with_an_authorizer_configured_the_handlers_store_and_read_acls():
    image = cluster_image()
    requests = _requests()
    created = HANDLERS[30](context(image, 3, STANDARD), requests[30])
    assert [r.error_code for r in created.response.results] == [0, 0] and len(created.records) == 1
    image = apply(image, created.records)
    described = HANDLERS[29](context(image, 3, STANDARD), requests[29]).response
    assert described.error_code == 0 and len(described.resources) == 1
