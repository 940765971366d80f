"""Kafka's StandardAuthorizer (``StandardAuthorizerData``) over an index of the image's ACLs.

A check (principal, host, operation, resource type, resource name) looks only at the ACLs that
can apply to that resource: per resource type, a dict of LITERAL names (the wildcard ``*`` is the
literal name ``*``) and a dict of PREFIXED names probed at each distinct prefix length the type
holds, the matches of each name remembered (DENY first) until the ACLs change. Never a scan of
all ACLs. Rules, as Kafka's:

- a super user (``super.users``) is allowed everything;
- an ACL applies when its principal is the caller's or ``User:*``, its host the caller's or ``*``,
  and its operation the one asked, or ALL, or (ALLOW ACLs only) one that implies it: DESCRIBE is
  implied by READ, WRITE, DELETE, ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS;
- any applying DENY wins over every ALLOW;
- no applying ACL: denied if the resource has ACLs at all (for anyone), else the no-ACL rule
  (``allow.everyone.if.no.acl.found``, default false).

``AclIndex.update(acls_image)`` follows the image: it diffs against the image it last indexed
and changes only the entries that moved, so a node applies an ACL record as soon as it applies
the metadata. Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import NamedTuple

from kraft.metadata.acls import EMPTY_ACLS, AclsImage, StandardAcl
from kraft.protocol.messages.acls import (OPERATION_ALL, OPERATION_ALTER, OPERATION_ALTER_CONFIGS, OPERATION_DELETE,
                                          OPERATION_DESCRIBE, OPERATION_DESCRIBE_CONFIGS, OPERATION_READ,
                                          OPERATION_WRITE, PATTERN_LITERAL, PATTERN_PREFIXED, PERMISSION_ALLOW,
                                          PERMISSION_DENY)

SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_CONFIG = "allow.everyone.if.no.acl.found"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"

#: operation asked -> the ALLOW operations that grant it besides itself and ALL
_IMPLIED_BY = {OPERATION_DESCRIBE: frozenset({OPERATION_READ, OPERATION_WRITE, OPERATION_DELETE, OPERATION_ALTER}),
               OPERATION_DESCRIBE_CONFIGS: frozenset({OPERATION_ALTER_CONFIGS})}
_NONE: frozenset = frozenset()
#: resources whose matching ACLs an index remembers between changes
CACHE_SIZE = 1 << 16
#: answers of authorize kept at most (the memo starts again empty when full)
DECISIONS_SIZE = 1 << 17


class Decision(NamedTuple):
    """A check's answer and why: ``rule`` is ``super user``, ``acl``, ``acls on resource``
    (ACLs exist for the resource, none for this caller) or ``no acl found``."""
    allowed: bool
    rule: str
    acl: StandardAcl | None = None


def parse_super_users(text: str | None) -> frozenset:
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


def _applies(acl: StandardAcl, principal: str, host: str, operation: int) -> bool:
    """Kafka's ``findResult`` without the resource: does ``acl`` speak about this call?"""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return False
    if acl.host != WILDCARD and acl.host != host:
        return False
    op = acl.operation
    if op == OPERATION_ALL or op == operation:
        return True
    return acl.permission_type == PERMISSION_ALLOW and op in _IMPLIED_BY.get(operation, _NONE)


class _TypeIndex:
    """The ACLs of one resource type."""
    __slots__ = ("literal", "prefixed", "lengths")

    def __init__(self):
        self.literal: dict[str, list] = {}
        self.prefixed: dict[str, list] = {}
        self.lengths: tuple = ()  # distinct prefix lengths present, ascending

    def add(self, acl: StandardAcl) -> None:
        table = self.literal if acl.pattern_type == PATTERN_LITERAL else self.prefixed
        table.setdefault(acl.resource_name, []).append(acl)
        if acl.pattern_type == PATTERN_PREFIXED:
            self.lengths = tuple(sorted({len(n) for n in self.prefixed}))

    def remove(self, acl: StandardAcl) -> None:
        table = self.literal if acl.pattern_type == PATTERN_LITERAL else self.prefixed
        bucket = table.get(acl.resource_name)
        if bucket is None or acl not in bucket:
            return
        bucket.remove(acl)
        if not bucket:
            del table[acl.resource_name]
            if acl.pattern_type == PATTERN_PREFIXED:
                self.lengths = tuple(sorted({len(n) for n in self.prefixed}))

    def buckets(self, name: str):
        """The lists of ACLs that can apply to the resource ``name``, most specific first."""
        literal = self.literal
        found = literal.get(name)
        if found is not None:
            yield found
        if name != WILDCARD:
            found = literal.get(WILDCARD)
            if found is not None:
                yield found
        prefixed = self.prefixed
        size = len(name)
        for length in self.lengths:
            if length > size:
                break
            found = prefixed.get(name[:length])
            if found is not None:
                yield found


class AclIndex:
    """The image's ACLs, indexed by resource type and name."""

    def __init__(self):
        self.by_type: dict[int, _TypeIndex] = {}
        self.image: AclsImage = EMPTY_ACLS
        #: resource type -> {name: the ACLs that can apply to it, DENY first (empty: none)};
        #: dropped whenever the ACLs change, and a type's when it reaches CACHE_SIZE names
        self.names: dict[int, dict] = {}
        #: authorize_any's answers, dropped likewise
        self.cache: dict = {}
        #: authorize's answers by (principal, host, operation, resource type, name), dropped
        #: likewise and when DECISIONS_SIZE is reached: a Produce to ten topics asks ten questions
        #: per request, the same ones request after request
        self.decisions: dict = {}

    def candidates(self, resource_type: int, name: str) -> tuple:
        """The ACLs whose pattern matches the resource, DENY first, remembered in ``names``."""
        index = self.by_type.get(resource_type)
        deny, allow = [], []
        if index is not None:
            literal, prefixed = index.literal, index.prefixed
            buckets = [literal.get(name), literal.get(WILDCARD) if name != WILDCARD else None]
            size = len(name)
            for length in index.lengths:
                if length > size:
                    break
                buckets.append(prefixed.get(name[:length]))
            for bucket in buckets:
                if bucket:
                    for acl in bucket:
                        (deny if acl.permission_type == PERMISSION_DENY else allow).append(acl)
        found = tuple(deny + allow)
        names = self.names.get(resource_type)
        if names is None or len(names) >= CACHE_SIZE:
            names = self.names[resource_type] = {}
        names[name] = found
        return found

    def update(self, image: AclsImage) -> None:
        """Index ``image``: only the ACLs that differ from the last indexed image move."""
        old, new = self.image.acls, image.acls
        if old is new:
            return
        for acl_id, acl in old.items():
            if new.get(acl_id) != acl:
                self._type(acl.resource_type).remove(acl)
        for acl_id, acl in new.items():
            if old.get(acl_id) != acl:
                self._type(acl.resource_type).add(acl)
        self.image = image
        self.cache = {}
        self.names = {}
        self.decisions = {}

    def _type(self, resource_type: int) -> _TypeIndex:
        index = self.by_type.get(resource_type)
        if index is None:
            index = self.by_type[resource_type] = _TypeIndex()
        return index


class StandardAuthorizer:
    """Kafka's StandardAuthorizer: configuration plus the ACL index."""

    def __init__(self, super_users=(), allow_everyone_if_no_acl_found: bool = False):
        self.super_users = frozenset(super_users)
        self.allow_everyone = allow_everyone_if_no_acl_found
        self.index = AclIndex()

    @classmethod
    def from_settings(cls, settings) -> "StandardAuthorizer":
        allow = str(settings.get(ALLOW_EVERYONE_CONFIG) or "false").strip().lower() == "true"
        return cls(parse_super_users(settings.get(SUPER_USERS_CONFIG)), allow)

    def update(self, acls_image: AclsImage) -> None:
        self.index.update(acls_image)

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        decisions = self.index.decisions
        key = (principal, host, operation, resource_type, name)
        found = decisions.get(key)
        if found is None:
            found = self._decide(principal, host, operation, resource_type, name)
            if len(decisions) >= DECISIONS_SIZE:
                decisions.clear()
            decisions[key] = found
        return found

    def _decide(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        index = self.index
        known = index.names.get(resource_type)
        candidates = known.get(name) if known is not None else None
        if candidates is None:
            candidates = index.candidates(resource_type, name)
        if not candidates:  # no ACL for this resource at all: the no-ACL rule
            return self.allow_everyone
        for acl in candidates:  # every DENY comes before every ALLOW (``candidates``)
            p = acl[3]
            if p != principal and p != WILDCARD_PRINCIPAL:
                continue
            h = acl[4]
            if h != WILDCARD and h != host:
                continue
            op = acl[5]
            if op == operation or op == OPERATION_ALL:
                return acl[6] != PERMISSION_DENY
            if acl[6] != PERMISSION_DENY and op in _IMPLIED_BY.get(operation, _NONE):
                return True
        return False  # ACLs on the resource, none for this caller

    def explain(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> Decision:
        """As :meth:`authorize`, saying which rule or ACL decided."""
        if principal in self.super_users:
            return Decision(True, "super user")
        index = self.index.by_type.get(resource_type)
        allow = None
        seen = False
        for bucket in (index.buckets(name) if index is not None else ()):
            seen = True
            for acl in bucket:
                if _applies(acl, principal, host, operation):
                    if acl.permission_type == PERMISSION_DENY:
                        return Decision(False, "acl", acl)
                    allow = allow or acl
        if allow is not None:
            return Decision(True, "acl", allow)
        if seen:
            return Decision(False, "acls on resource")
        return Decision(self.allow_everyone, "no acl found")

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str,
                              supported) -> int:
        """Kafka's authorized-operations bit field: the supported operations this caller may do."""
        bits = 0
        for op in supported:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Kafka's ``authorizeByResourceType``: may the caller do ``operation`` on at least one
        resource of the type? An ALLOW counts unless a DENY for the caller covers its pattern
        (same literal, a wildcard, or a prefix of its name)."""
        if principal in self.super_users:
            return True
        key = ("any", principal, host, operation, resource_type)
        known = self.index.cache.get(key)
        if known is None:
            if len(self.index.cache) >= CACHE_SIZE:
                self.index.cache.clear()
            known = self.index.cache[key] = self._authorize_any(principal, host, operation, resource_type)
        return known

    def _authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        index = self.index.by_type.get(resource_type)
        if index is None:
            return self.allow_everyone
        denied_literal, denied_prefix, allowed = set(), [], []
        for pattern, table in ((PATTERN_LITERAL, index.literal), (PATTERN_PREFIXED, index.prefixed)):
            for name, bucket in table.items():
                for acl in bucket:
                    if not _applies(acl, principal, host, operation):
                        continue
                    if acl.permission_type == PERMISSION_DENY:
                        if pattern == PATTERN_LITERAL:
                            denied_literal.add(name)
                        else:
                            denied_prefix.append(name)
                    else:
                        allowed.append((pattern, name))
        if WILDCARD in denied_literal:
            return False
        for pattern, name in allowed:
            if any(name.startswith(p) for p in denied_prefix):
                continue
            if pattern == PATTERN_LITERAL and name in denied_literal:
                continue
            return True
        return False if (index.literal or index.prefixed) else self.allow_everyone
