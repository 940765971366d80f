"""Kafka's StandardAuthorizer rules (``StandardAuthorizerData.findAclRule`` / ``findResult``), one
test per rule: each would fail if the rule it names were dropped."""

from __future__ import annotations

import uuid

from kraft.metadata.acls import AclsImage, StandardAcl
from kraft.metadata.authorizer import StandardAuthorizer, parse_super_users
from kraft.protocol.messages.acls import (OPERATION_ALL, OPERATION_ALTER, OPERATION_ALTER_CONFIGS, OPERATION_CREATE,
                                          OPERATION_DELETE, OPERATION_DESCRIBE, OPERATION_DESCRIBE_CONFIGS,
                                          OPERATION_READ, OPERATION_WRITE, PATTERN_LITERAL, PATTERN_PREFIXED,
                                          PERMISSION_ALLOW, PERMISSION_DENY, RESOURCE_GROUP, RESOURCE_TOPIC)

ALICE, BOB, HOST = "User:alice", "User:bob", "10.0.0.1"


def acl(name, op=OPERATION_READ, perm=PERMISSION_ALLOW, pattern=PATTERN_LITERAL, principal=ALICE, host="*",
        rtype=RESOURCE_TOPIC):
    return StandardAcl(rtype, name, pattern, principal, host, op, perm)


def authorizer(*acls, super_users=(), allow_everyone=False):
    a = StandardAuthorizer(super_users, allow_everyone)
    a.update(AclsImage({uuid.UUID(int=i + 2): x for i, x in enumerate(acls)}))
    return a


def check(a, op, name, principal=ALICE, host=HOST, rtype=RESOURCE_TOPIC):
    return a.authorize(principal, host, op, rtype, name)


def test_no_acl_found_denies_by_default_and_allows_with_allow_everyone():
    assert not check(authorizer(), OPERATION_READ, "t")
    assert check(authorizer(allow_everyone=True), OPERATION_READ, "t")


def test_acls_on_the_resource_for_someone_else_deny_even_with_allow_everyone():
    a = authorizer(acl("t", principal=BOB), allow_everyone=True)
    assert not check(a, OPERATION_READ, "t")
    assert check(a, OPERATION_READ, "other")  # no ACL on that resource: the no-ACL rule


def test_literal_acl_matches_only_its_exact_name():
    a = authorizer(acl("t"))
    assert check(a, OPERATION_READ, "t")
    assert not check(a, OPERATION_READ, "t2")
    assert not check(a, OPERATION_READ, "")


def test_prefixed_acl_matches_names_that_start_with_it():
    a = authorizer(acl("orders-", pattern=PATTERN_PREFIXED))
    assert check(a, OPERATION_READ, "orders-eu")
    assert check(a, OPERATION_READ, "orders-")
    assert not check(a, OPERATION_READ, "orders")
    assert not check(a, OPERATION_READ, "x-orders-eu")


def test_prefixed_acls_of_several_lengths_all_apply():
    a = authorizer(acl("o", pattern=PATTERN_PREFIXED, op=OPERATION_WRITE),
                   acl("orders-eu-", pattern=PATTERN_PREFIXED, op=OPERATION_READ))
    assert check(a, OPERATION_WRITE, "orders-eu-1") and check(a, OPERATION_READ, "orders-eu-1")
    assert check(a, OPERATION_WRITE, "orders-us-1") and not check(a, OPERATION_READ, "orders-us-1")


def test_wildcard_literal_resource_matches_every_name():
    a = authorizer(acl("*"))
    assert check(a, OPERATION_READ, "anything") and check(a, OPERATION_READ, "*")


def test_wildcard_principal_matches_every_user():
    a = authorizer(acl("t", principal="User:*"))
    assert check(a, OPERATION_READ, "t", principal=BOB)


def test_host_must_be_wildcard_or_equal():
    a = authorizer(acl("t", host="10.0.0.9"))
    assert not check(a, OPERATION_READ, "t", host=HOST)
    assert check(a, OPERATION_READ, "t", host="10.0.0.9")


def test_deny_beats_allow_wherever_it_comes_from():
    a = authorizer(acl("t"), acl("*", perm=PERMISSION_DENY))
    assert not check(a, OPERATION_READ, "t")
    a = authorizer(acl("t"), acl("t", pattern=PATTERN_PREFIXED, perm=PERMISSION_DENY, principal="User:*"))
    assert not check(a, OPERATION_READ, "t")


def test_all_operation_matches_every_operation_for_allow_and_deny():
    a = authorizer(acl("t", op=OPERATION_ALL))
    assert all(check(a, op, "t") for op in (OPERATION_READ, OPERATION_WRITE, OPERATION_CREATE, OPERATION_DELETE))
    a = authorizer(acl("t", op=OPERATION_ALL), acl("t", op=OPERATION_ALL, perm=PERMISSION_DENY))
    assert not check(a, OPERATION_READ, "t")


def test_read_write_delete_alter_imply_describe():
    for op in (OPERATION_READ, OPERATION_WRITE, OPERATION_DELETE, OPERATION_ALTER):
        assert check(authorizer(acl("t", op=op)), OPERATION_DESCRIBE, "t"), op
    assert not check(authorizer(acl("t", op=OPERATION_CREATE)), OPERATION_DESCRIBE, "t")


def test_alter_configs_implies_describe_configs():
    assert check(authorizer(acl("t", op=OPERATION_ALTER_CONFIGS)), OPERATION_DESCRIBE_CONFIGS, "t")
    assert not check(authorizer(acl("t", op=OPERATION_ALTER)), OPERATION_DESCRIBE_CONFIGS, "t")


def test_a_deny_does_not_imply_deny_of_describe():
    a = authorizer(acl("t", op=OPERATION_DESCRIBE), acl("t", op=OPERATION_READ, perm=PERMISSION_DENY))
    assert check(a, OPERATION_DESCRIBE, "t") and not check(a, OPERATION_READ, "t")


def test_super_users_are_allowed_despite_deny():
    a = authorizer(acl("*", op=OPERATION_ALL, perm=PERMISSION_DENY, principal="User:*"),
                   super_users=parse_super_users("User:admin; User:ANONYMOUS"))
    assert check(a, OPERATION_WRITE, "t", principal="User:admin")
    assert check(a, OPERATION_WRITE, "t", principal="User:ANONYMOUS")
    assert not check(a, OPERATION_WRITE, "t")


def test_resource_types_are_separate():
    a = authorizer(acl("t", rtype=RESOURCE_GROUP))
    assert check(a, OPERATION_READ, "t", rtype=RESOURCE_GROUP)
    assert not check(a, OPERATION_READ, "t", rtype=RESOURCE_TOPIC)


def test_index_follows_image_changes():
    a = authorizer()
    image = AclsImage({uuid.UUID(int=5): acl("t")})
    a.update(image)
    assert check(a, OPERATION_READ, "t")
    a.update(AclsImage({uuid.UUID(int=6): acl("p-", pattern=PATTERN_PREFIXED)}))
    assert not check(a, OPERATION_READ, "t") and check(a, OPERATION_READ, "p-1")
    a.update(AclsImage({}))
    assert not check(a, OPERATION_READ, "p-1") and not a.index.by_type[RESOURCE_TOPIC].lengths


def test_explain_names_the_deciding_acl_or_rule():
    deny = acl("t", perm=PERMISSION_DENY)
    a = authorizer(acl("t"), deny, super_users={"User:admin"})
    assert a.explain(ALICE, HOST, OPERATION_READ, RESOURCE_TOPIC, "t") == (False, "acl", deny)
    assert a.explain("User:admin", HOST, OPERATION_READ, RESOURCE_TOPIC, "t").rule == "super user"
    assert a.explain(BOB, HOST, OPERATION_READ, RESOURCE_TOPIC, "t").rule == "acls on resource"
    assert a.explain(BOB, HOST, OPERATION_READ, RESOURCE_TOPIC, "u") == (False, "no acl found", None)


def test_authorized_operations_bits():
    a = authorizer(acl("t", op=OPERATION_WRITE))
    bits = a.authorized_operations(ALICE, HOST, RESOURCE_TOPIC, "t", (OPERATION_READ, OPERATION_WRITE,
                                                                      OPERATION_DESCRIBE))
    assert bits == (1 << OPERATION_WRITE) | (1 << OPERATION_DESCRIBE)


def test_authorize_any_as_authorize_by_resource_type():
    assert authorizer(acl("t", op=OPERATION_WRITE)).authorize_any(ALICE, HOST, OPERATION_WRITE, RESOURCE_TOPIC)
    assert not authorizer(acl("t", op=OPERATION_READ)).authorize_any(ALICE, HOST, OPERATION_WRITE, RESOURCE_TOPIC)
    a = authorizer(acl("t-1", op=OPERATION_WRITE), acl("t-", op=OPERATION_WRITE, perm=PERMISSION_DENY,
                                                       pattern=PATTERN_PREFIXED))
    assert not a.authorize_any(ALICE, HOST, OPERATION_WRITE, RESOURCE_TOPIC)


def test_authorize_any_is_remembered_until_the_acls_change():
    a = authorizer(acl("t", op=OPERATION_WRITE))
    assert a.authorize_any(ALICE, HOST, OPERATION_WRITE, RESOURCE_TOPIC)
    a.update(AclsImage({}))
    assert not a.authorize_any(ALICE, HOST, OPERATION_WRITE, RESOURCE_TOPIC)
