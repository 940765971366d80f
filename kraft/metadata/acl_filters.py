"""Kafka's ACL binding filters (``AclBindingFilter``, ``ResourcePatternFilter``,
``AccessControlEntryFilter``): which stored ACLs a DescribeAcls or DeleteAcls filter selects.

A filter's resource name and pattern type combine as in Kafka: pattern ANY matches every
pattern type by exact name; MATCH selects every ACL that would apply to the named resource
(the literal name, the literal wildcard ``*``, and every prefix of the name); LITERAL or
PREFIXED selects that pattern type only, by exact name. A null name, principal or host matches
anything; operation and permission ANY match anything. Codes are the protocol's (see
``kraft.protocol.messages.acls``). Pure: it must not know about records or requests.
"""

from __future__ import annotations

from typing import NamedTuple

from kraft.metadata.acls import StandardAcl
from kraft.protocol.messages.acls import (OPERATION_ANY, OPERATION_UNKNOWN, PATTERN_ANY, PATTERN_LITERAL,
                                          PATTERN_MATCH, PATTERN_PREFIXED, PATTERN_UNKNOWN, PERMISSION_ANY,
                                          PERMISSION_UNKNOWN, RESOURCE_ANY, RESOURCE_UNKNOWN)

WILDCARD_RESOURCE = "*"


class AclFilter(NamedTuple):
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    @property
    def unknown_element(self) -> str | None:
        """The first UNKNOWN element, which makes the filter invalid, or None (Kafka's ``isUnknown``)."""
        for name, value, unknown in (("resource type", self.resource_type, RESOURCE_UNKNOWN),
                                     ("pattern type", self.pattern_type, PATTERN_UNKNOWN),
                                     ("operation", self.operation, OPERATION_UNKNOWN),
                                     ("permission type", self.permission_type, PERMISSION_UNKNOWN)):
            if value == unknown:
                return name
        return None

    def matches_pattern(self, acl: StandardAcl) -> bool:
        if self.resource_type != RESOURCE_ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PATTERN_ANY, PATTERN_MATCH) and self.pattern_type != acl.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type in (PATTERN_ANY, acl.pattern_type):
            return name == acl.resource_name
        # MATCH: would this ACL apply to the resource called ``name``?
        if acl.pattern_type == PATTERN_LITERAL:
            return name == acl.resource_name or acl.resource_name == WILDCARD_RESOURCE
        if acl.pattern_type == PATTERN_PREFIXED:
            return name.startswith(acl.resource_name)
        return False

    def matches_entry(self, acl: StandardAcl) -> bool:
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and (self.operation == OPERATION_ANY or self.operation == acl.operation)
                and (self.permission_type == PERMISSION_ANY or self.permission_type == acl.permission_type))

    def matches(self, acl: StandardAcl) -> bool:
        return self.matches_pattern(acl) and self.matches_entry(acl)
