"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): the ACLs of the standard authorizer,
stored as metadata records in KRaft.

Schema facts from Kafka's {Describe,Create,Delete}Acls{Request,Response}.json as of Kafka 4:
v0 was removed (v1, which added the resource pattern type, is the baseline); flexible from v2;
v3 only adds the USER resource type. Schemas only; the meaning is in ``kraft.controller.acls``.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT8, INT16, INT32, STRING, Array, Field, Struct

# ResourceType
RESOURCE_UNKNOWN, RESOURCE_ANY, RESOURCE_TOPIC, RESOURCE_GROUP, RESOURCE_CLUSTER = 0, 1, 2, 3, 4
RESOURCE_TRANSACTIONAL_ID, RESOURCE_DELEGATION_TOKEN, RESOURCE_USER = 5, 6, 7
# PatternType
PATTERN_UNKNOWN, PATTERN_ANY, PATTERN_MATCH, PATTERN_LITERAL, PATTERN_PREFIXED = 0, 1, 2, 3, 4
# AclOperation
OPERATION_UNKNOWN, OPERATION_ANY, OPERATION_ALL, OPERATION_READ, OPERATION_WRITE = 0, 1, 2, 3, 4
OPERATION_CREATE, OPERATION_DELETE, OPERATION_ALTER, OPERATION_DESCRIBE, OPERATION_CLUSTER_ACTION = 5, 6, 7, 8, 9
OPERATION_DESCRIBE_CONFIGS, OPERATION_ALTER_CONFIGS, OPERATION_IDEMPOTENT_WRITE = 10, 11, 12
OPERATION_CREATE_TOKENS, OPERATION_DESCRIBE_TOKENS, OPERATION_TWO_PHASE_COMMIT = 13, 14, 15
# AclPermissionType
PERMISSION_UNKNOWN, PERMISSION_ANY, PERMISSION_DENY, PERMISSION_ALLOW = 0, 1, 2, 3


class DescribeAclsRequest(Request):
    API_KEY = 29
    VERSIONS = "1-3"
    FLEXIBLE = "2+"
    LISTENERS = ("broker", "controller")

    FIELDS = (
        Field("resource_type_filter", INT8),
        Field("resource_name_filter", STRING, nullable="0+", default=None),  # null: any name
        Field("pattern_type_filter", INT8, "1+", default=PATTERN_LITERAL),
        Field("principal_filter", STRING, nullable="0+", default=None),  # null: any principal
        Field("host_filter", STRING, nullable="0+", default=None),  # null: any host
        Field("operation", INT8),
        Field("permission_type", INT8),
    )


class DescribeAclsResponse(Response):
    API_KEY = 29
    VERSIONS = "1-3"
    FLEXIBLE = "2+"

    class Resource(Struct):
        class Acl(Struct):
            FIELDS = (
                Field("principal", STRING),
                Field("host", STRING),
                Field("operation", INT8),
                Field("permission_type", INT8),
            )

        FIELDS = (
            Field("resource_type", INT8),
            Field("resource_name", STRING),
            Field("pattern_type", INT8, "1+", default=PATTERN_LITERAL),
            Field("acls", Array(Acl)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("resources", Array(Resource)),
    )


class CreateAclsRequest(Request):
    API_KEY = 30
    VERSIONS = "1-3"
    FLEXIBLE = "2+"
    LISTENERS = ("broker", "controller")

    class Creation(Struct):
        FIELDS = (
            Field("resource_type", INT8),
            Field("resource_name", STRING),
            Field("resource_pattern_type", INT8, "1+", default=PATTERN_LITERAL),
            Field("principal", STRING),
            Field("host", STRING),
            Field("operation", INT8),
            Field("permission_type", INT8),
        )

    FIELDS = (Field("creations", Array(Creation)),)


class CreateAclsResponse(Response):
    API_KEY = 30
    VERSIONS = "1-3"
    FLEXIBLE = "2+"

    class Result(Struct):
        FIELDS = (
            Field("error_code", INT16),
            Field("error_message", STRING, nullable="0+", default=None),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Result)),
    )


class DeleteAclsRequest(Request):
    API_KEY = 31
    VERSIONS = "1-3"
    FLEXIBLE = "2+"
    LISTENERS = ("broker", "controller")

    class Filter(Struct):
        FIELDS = (
            Field("resource_type_filter", INT8),
            Field("resource_name_filter", STRING, nullable="0+", default=None),
            Field("pattern_type_filter", INT8, "1+", default=PATTERN_LITERAL),
            Field("principal_filter", STRING, nullable="0+", default=None),
            Field("host_filter", STRING, nullable="0+", default=None),
            Field("operation", INT8),
            Field("permission_type", INT8),
        )

    FIELDS = (Field("filters", Array(Filter)),)


class DeleteAclsResponse(Response):
    API_KEY = 31
    VERSIONS = "1-3"
    FLEXIBLE = "2+"

    class FilterResult(Struct):
        class MatchingAcl(Struct):
            FIELDS = (
                Field("error_code", INT16),
                Field("error_message", STRING, nullable="0+", default=None),
                Field("resource_type", INT8),
                Field("resource_name", STRING),
                Field("pattern_type", INT8, "1+", default=PATTERN_LITERAL),
                Field("principal", STRING),
                Field("host", STRING),
                Field("operation", INT8),
                Field("permission_type", INT8),
            )

        FIELDS = (
            Field("error_code", INT16),
            Field("error_message", STRING, nullable="0+", default=None),
            Field("matching_acls", Array(MatchingAcl)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("filter_results", Array(FilterResult)),
    )
