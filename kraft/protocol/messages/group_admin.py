"""Group administration: ListGroups (16), DescribeGroups (15) and DeleteGroups (42).

Schema facts from Kafka's ListGroups/DescribeGroups/DeleteGroups Request and Response JSON
files: ListGroups 0-5 (flexible 3+, StatesFilter from 4, TypesFilter from 5), DescribeGroups
0-5 (flexible 5+), DeleteGroups 0-2 (flexible 2+). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, BYTES, INT16, INT32, STRING, Array, Field, Struct

#: DescribeGroups' AuthorizedOperations when they were not asked for (Integer.MIN_VALUE).
OPERATIONS_NOT_ASKED = -2147483648


class ListGroupsRequest(Request):
    API_KEY = 16
    VERSIONS = "0-5"
    FLEXIBLE = "3+"
    LISTENERS = ("broker",)

    FIELDS = (
        Field("states_filter", Array(STRING), "4+"),
        Field("types_filter", Array(STRING), "5+"),
    )


class ListGroupsResponse(Response):
    API_KEY = 16
    VERSIONS = "0-5"
    FLEXIBLE = "3+"

    class Group(Struct):
        FIELDS = (
            Field("group_id", STRING),
            Field("protocol_type", STRING),
            Field("group_state", STRING, "4+", ignorable=True),
            Field("group_type", STRING, "5+", ignorable=True),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16),
        Field("groups", Array(Group)),
    )


class DescribeGroupsRequest(Request):
    API_KEY = 15
    VERSIONS = "0-5"
    FLEXIBLE = "5+"
    LISTENERS = ("broker",)

    FIELDS = (
        Field("groups", Array(STRING)),
        Field("include_authorized_operations", BOOL, "3+"),
    )


class DescribeGroupsResponse(Response):
    API_KEY = 15
    VERSIONS = "0-5"
    FLEXIBLE = "5+"

    class Group(Struct):
        class Member(Struct):
            FIELDS = (
                Field("member_id", STRING),
                Field("group_instance_id", STRING, "4+", nullable="4+", default=None, ignorable=True),
                Field("client_id", STRING),
                Field("client_host", STRING),
                Field("member_metadata", BYTES),
                Field("member_assignment", BYTES),
            )

        FIELDS = (
            Field("error_code", INT16),
            Field("group_id", STRING),
            Field("group_state", STRING),
            Field("protocol_type", STRING),
            Field("protocol_data", STRING),
            Field("members", Array(Member)),
            Field("authorized_operations", INT32, "3+", default=OPERATIONS_NOT_ASKED),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("groups", Array(Group)),
    )


class DeleteGroupsRequest(Request):
    API_KEY = 42
    VERSIONS = "0-2"
    FLEXIBLE = "2+"
    LISTENERS = ("broker",)

    FIELDS = (Field("groups_names", Array(STRING)),)


class DeleteGroupsResponse(Response):
    API_KEY = 42
    VERSIONS = "0-2"
    FLEXIBLE = "2+"

    class Result(Struct):
        FIELDS = (
            Field("group_id", STRING),
            Field("error_code", INT16),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("results", Array(Result)),
    )
