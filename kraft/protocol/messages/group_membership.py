"""Classic group membership (KIP-62 style): FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13) and SyncGroup (14).

Schema facts from Kafka's FindCoordinator/JoinGroup/Heartbeat/LeaveGroup/SyncGroup Request and
Response JSON files: FindCoordinator 0-6 (flexible 3+, batched CoordinatorKeys from 4),
JoinGroup 0-9 (flexible 6+), Heartbeat 0-4 and LeaveGroup 0-5 (flexible 4+, LeaveGroup batches
members from 3), SyncGroup 0-5 (flexible 4+). Schemas only: ``kraft.coordinator`` answers them.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, BYTES, INT8, INT16, INT32, STRING, Array, Field, Struct

#: FindCoordinator key types (KeyType): 0 group, 1 transaction, 2 share.
KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, KEY_TYPE_SHARE = 0, 1, 2


class FindCoordinatorRequest(Request):
    API_KEY = 10
    VERSIONS = "0-6"
    FLEXIBLE = "3+"
    LISTENERS = ("broker",)

    FIELDS = (
        Field("key", STRING, "0-3"),
        Field("key_type", INT8, "1+", default=0),
        Field("coordinator_keys", Array(STRING), "4+"),
    )


class FindCoordinatorResponse(Response):
    API_KEY = 10
    VERSIONS = "0-6"
    FLEXIBLE = "3+"

    class Coordinator(Struct):
        FIELDS = (
            Field("key", STRING, "4+"),
            Field("node_id", INT32, "4+"),
            Field("host", STRING, "4+"),
            Field("port", INT32, "4+"),
            Field("error_code", INT16, "4+"),
            Field("error_message", STRING, "4+", nullable="4+", default=None, ignorable=True),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16, "0-3"),
        Field("error_message", STRING, "1-3", nullable="1-3", default=None, ignorable=True),
        Field("node_id", INT32, "0-3"),
        Field("host", STRING, "0-3"),
        Field("port", INT32, "0-3"),
        Field("coordinators", Array(Coordinator), "4+"),
    )


class JoinGroupRequest(Request):
    API_KEY = 11
    VERSIONS = "0-9"
    FLEXIBLE = "6+"
    LISTENERS = ("broker",)

    class Protocol(Struct):
        FIELDS = (
            Field("name", STRING),
            Field("metadata", BYTES),
        )

    FIELDS = (
        Field("group_id", STRING),
        Field("session_timeout_ms", INT32),
        Field("rebalance_timeout_ms", INT32, "1+", default=-1, ignorable=True),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "5+", nullable="5+", default=None),
        Field("protocol_type", STRING),
        Field("protocols", Array(Protocol)),
        Field("reason", STRING, "8+", nullable="8+", default=None, ignorable=True),
    )


class JoinGroupResponse(Response):
    API_KEY = 11
    VERSIONS = "0-9"
    FLEXIBLE = "6+"

    class Member(Struct):
        FIELDS = (
            Field("member_id", STRING),
            Field("group_instance_id", STRING, "5+", nullable="5+", default=None, ignorable=True),
            Field("metadata", BYTES),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "2+", ignorable=True),
        Field("error_code", INT16),
        Field("generation_id", INT32, default=-1),
        Field("protocol_type", STRING, "7+", nullable="7+", default=None, ignorable=True),
        Field("protocol_name", STRING, nullable="7+"),
        Field("leader", STRING),
        Field("skip_assignment", BOOL, "9+", default=False),
        Field("member_id", STRING),
        Field("members", Array(Member)),
    )


class SyncGroupRequest(Request):
    API_KEY = 14
    VERSIONS = "0-5"
    FLEXIBLE = "4+"
    LISTENERS = ("broker",)

    class Assignment(Struct):
        FIELDS = (
            Field("member_id", STRING),
            Field("assignment", BYTES),
        )

    FIELDS = (
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
        Field("protocol_type", STRING, "5+", nullable="5+", default=None, ignorable=True),
        Field("protocol_name", STRING, "5+", nullable="5+", default=None, ignorable=True),
        Field("assignments", Array(Assignment)),
    )


class SyncGroupResponse(Response):
    API_KEY = 14
    VERSIONS = "0-5"
    FLEXIBLE = "4+"

    FIELDS = (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16),
        Field("protocol_type", STRING, "5+", nullable="5+", default=None, ignorable=True),
        Field("protocol_name", STRING, "5+", nullable="5+", default=None, ignorable=True),
        Field("assignment", BYTES),
    )


class HeartbeatRequest(Request):
    API_KEY = 12
    VERSIONS = "0-4"
    FLEXIBLE = "4+"
    LISTENERS = ("broker",)

    FIELDS = (
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
    )


class HeartbeatResponse(Response):
    API_KEY = 12
    VERSIONS = "0-4"
    FLEXIBLE = "4+"

    FIELDS = (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16),
    )


class LeaveGroupRequest(Request):
    API_KEY = 13
    VERSIONS = "0-5"
    FLEXIBLE = "4+"
    LISTENERS = ("broker",)

    class Member(Struct):
        FIELDS = (
            Field("member_id", STRING, "3+"),
            Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
            Field("reason", STRING, "5+", nullable="5+", default=None, ignorable=True),
        )

    FIELDS = (
        Field("group_id", STRING),
        Field("member_id", STRING, "0-2"),
        Field("members", Array(Member), "3+"),
    )


class LeaveGroupResponse(Response):
    API_KEY = 13
    VERSIONS = "0-5"
    FLEXIBLE = "4+"

    class Member(Struct):
        FIELDS = (
            Field("member_id", STRING, "3+"),
            Field("group_instance_id", STRING, "3+", nullable="3+", default=None),
            Field("error_code", INT16, "3+"),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16),
        Field("members", Array(Member), "3+"),
    )
