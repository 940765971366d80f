"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31): Kafka's ``AclControlManager`` as
pure handlers over the uncommitted image.

CreateAcls validates each binding as Kafka does (LITERAL or PREFIXED pattern, a concrete
resource type, operation and permission, a non-empty name, a ``type:name`` principal, CLUSTER
only as ``kafka-cluster``: INVALID_REQUEST otherwise); a binding already stored, or repeated in
the request, succeeds without a second record. Each new ACL gets an id derived from its content
(SHA-256, re-hashed on the rare clash), so replays and the simulator stay deterministic where
Kafka draws a random one. DeleteAcls removes every ACL a filter matches, one record per ACL even
when several filters match it; both are proposed atomically. DescribeAcls is a read. The
``HANDLERS`` the server runs answer all three with SECURITY_DISABLED, as Kafka's ``AclApis`` do,
while the node's settings configure no authorizer (``kraft.metadata.authorization``).
Nothing here mutates the image or does I/O.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict

from kraft.controller.api_error import ApiError
from kraft.controller.result import ControllerContext, ControllerResult
from kraft.errors import ErrorCode
from kraft.metadata.acl_filters import AclFilter
from kraft.metadata.acls import StandardAcl
from kraft.metadata.authorization import NO_AUTHORIZER, NO_AUTHORIZER_ON_BROKER, authorizer_configured
from kraft.metadata.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from kraft.protocol.messages.acls import (OPERATION_ANY, OPERATION_UNKNOWN, PATTERN_LITERAL, PATTERN_PREFIXED,
                                          PERMISSION_ALLOW, PERMISSION_DENY, RESOURCE_ANY, RESOURCE_CLUSTER,
                                          RESOURCE_UNKNOWN, CreateAclsResponse, DeleteAclsResponse,
                                          DescribeAclsResponse)

CLUSTER_NAME = "kafka-cluster"
_RESERVED_IDS = (uuid.UUID(int=0), uuid.UUID(int=1))  # Kafka's Uuid.ZERO_UUID and METADATA_TOPIC_ID


def validate_new_acl(acl: StandardAcl) -> None:
    """Kafka's ``AclControlManager.validateNewAcl`` (plus the broker's CLUSTER name rule)."""
    if acl.pattern_type not in (PATTERN_LITERAL, PATTERN_PREFIXED):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Invalid patternType {acl.pattern_type}")
    if acl.resource_type in (RESOURCE_UNKNOWN, RESOURCE_ANY):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Invalid resourceType {acl.resource_type}")
    if acl.operation in (OPERATION_UNKNOWN, OPERATION_ANY):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Invalid operation {acl.operation}")
    if acl.permission_type not in (PERMISSION_DENY, PERMISSION_ALLOW):
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Invalid permissionType {acl.permission_type}")
    if not acl.resource_name:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Resource name should not be empty")
    if ":" not in acl.principal:
        raise ApiError(ErrorCode.INVALID_REQUEST,
                       f"Could not parse principal from `{acl.principal}` (no colon is present separating the "
                       "principal type from the principal name)")
    if acl.resource_type == RESOURCE_CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise ApiError(ErrorCode.INVALID_REQUEST,
                       f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")


def acl_id(acl: StandardAcl, taken) -> uuid.UUID:
    """A deterministic id for ``acl`` that is not reserved and not in ``taken``."""
    seed = repr(tuple(acl)).encode()
    for attempt in range(1 << 16):
        digest = hashlib.sha256(seed + attempt.to_bytes(4, "big")).digest()
        candidate = uuid.UUID(bytes=digest[:16])
        if candidate not in _RESERVED_IDS and candidate not in taken:
            return candidate
    raise ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "no free ACL id")  # 65536 clashes: not reachable


def handle_create_acls(ctx: ControllerContext, request) -> ControllerResult:
    stored = ctx.image.acls.acls
    existing = set(stored.values())
    new_ids: set = set()
    response = CreateAclsResponse()
    records = []
    for creation in request.creations:
        acl = StandardAcl(creation.resource_type, creation.resource_name, creation.resource_pattern_type,
                          creation.principal, creation.host, creation.operation, creation.permission_type)
        result = CreateAclsResponse.Result()
        response.results.append(result)
        try:
            validate_new_acl(acl)
        except ApiError as e:
            result.error_code, result.error_message = int(e.code), e.message
            continue
        if acl in existing:
            continue  # already stored (or created earlier in this request): success, no record
        existing.add(acl)
        new_id = acl_id(acl, stored.keys() | new_ids)
        new_ids.add(new_id)
        records.append(AccessControlEntryRecord(id=new_id, **acl._asdict()))
    return ControllerResult(records=records, response=response, atomic=bool(records))


def _filter(source) -> AclFilter:
    return AclFilter(source.resource_type_filter, source.resource_name_filter, source.pattern_type_filter,
                     source.principal_filter, source.host_filter, source.operation, source.permission_type)


def _sorted_acls(image):
    return sorted(image.acls.acls.items(), key=lambda item: (tuple(item[1]), item[0].bytes))


def handle_describe_acls(ctx: ControllerContext, request) -> ControllerResult:
    """A read: the stored ACLs the filter matches, grouped by resource pattern."""
    acl_filter = _filter(request)
    unknown = acl_filter.unknown_element
    if unknown is not None:
        return ControllerResult(response=DescribeAclsResponse(
            error_code=int(ErrorCode.INVALID_REQUEST), error_message=f"The filter has an UNKNOWN {unknown}."))
    groups = defaultdict(list)
    for _, acl in _sorted_acls(ctx.image):
        if acl_filter.matches(acl):
            groups[(acl.resource_type, acl.resource_name, acl.pattern_type)].append(
                DescribeAclsResponse.Resource.Acl(principal=acl.principal, host=acl.host, operation=acl.operation,
                                                  permission_type=acl.permission_type))
    response = DescribeAclsResponse(resources=[
        DescribeAclsResponse.Resource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
        for (t, n, p), acls in groups.items()])
    return ControllerResult(response=response)


def handle_delete_acls(ctx: ControllerContext, request) -> ControllerResult:
    acls = _sorted_acls(ctx.image)
    removed: dict = {}  # id -> record, in first-match order
    response = DeleteAclsResponse()
    Matching = DeleteAclsResponse.FilterResult.MatchingAcl
    for source in request.filters:
        acl_filter = _filter(source)
        result = DeleteAclsResponse.FilterResult()
        response.filter_results.append(result)
        unknown = acl_filter.unknown_element
        if unknown is not None:
            result.error_code = int(ErrorCode.INVALID_REQUEST)
            part = "patternFilter" if unknown in ("resource type", "pattern type") else "entryFilter"
            result.error_message = f"Unknown {part}."
            continue
        for acl_id_, acl in acls:
            if acl_filter.matches(acl):
                result.matching_acls.append(Matching(
                    resource_type=acl.resource_type, resource_name=acl.resource_name, pattern_type=acl.pattern_type,
                    principal=acl.principal, host=acl.host, operation=acl.operation,
                    permission_type=acl.permission_type))
                removed.setdefault(acl_id_, RemoveAccessControlEntryRecord(id=acl_id_))
    records = list(removed.values())
    return ControllerResult(records=records, response=response, atomic=bool(records))


# --- the request layer: Kafka's AclApis answers SECURITY_DISABLED while no authorizer is configured


def _security_disabled(request, key: int):
    """Kafka's answer to an ACL request on a node without an authorizer."""
    code = int(ErrorCode.SECURITY_DISABLED)
    if key == 30:
        R = CreateAclsResponse.Result
        return CreateAclsResponse(results=[R(error_code=code, error_message=NO_AUTHORIZER) for _ in request.creations])
    if key == 31:
        F = DeleteAclsResponse.FilterResult
        return DeleteAclsResponse(filter_results=[F(error_code=code, error_message=NO_AUTHORIZER)
                                                  for _ in request.filters])
    return DescribeAclsResponse(error_code=code, error_message=NO_AUTHORIZER_ON_BROKER, resources=[])


def _authorizer_required(key: int, handler):
    def handle(ctx: ControllerContext, request) -> ControllerResult:
        if not authorizer_configured(ctx.settings):
            return ControllerResult(response=_security_disabled(request, key))
        return handler(ctx, request)
    handle.__name__ = handler.__name__
    return handle


#: what the server runs: the handlers above behind the authorizer check (the handlers alone are
#: Kafka's AclControlManager, which stores what it is given)
HANDLERS = {key: _authorizer_required(key, handler)
            for key, handler in {30: handle_create_acls, 29: handle_describe_acls, 31: handle_delete_acls}.items()}
