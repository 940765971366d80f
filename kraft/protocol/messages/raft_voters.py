"""AddRaftVoter (80), RemoveRaftVoter (81), UpdateRaftVoter (82): changing the voters of a
dynamic KRaft quorum one at a time (KIP-853).

Schema facts from Kafka's AddRaftVoterRequest.json / AddRaftVoterResponse.json,
RemoveRaftVoter*.json and UpdateRaftVoter*.json; all versions flexible. AddRaftVoter v1 adds
AckWhenCommitted. Schemas only: the rules are in ``kraft.raft.membership``.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, STRING, UINT16, UUID, Array, Field, Struct


class Listener(Struct):
    FIELDS = (
        Field("name", STRING),
        Field("host", STRING),
        Field("port", UINT16),
    )


class AddRaftVoterRequest(Request):
    API_KEY = 80
    VERSIONS = "0-1"
    FLEXIBLE = "0+"
    LISTENERS = ("controller", "broker")
    Listener = Listener

    FIELDS = (
        Field("cluster_id", STRING, nullable="0+", default=None),
        Field("timeout_ms", INT32),
        Field("voter_id", INT32),
        Field("voter_directory_id", UUID),
        Field("listeners", Array(Listener)),
        Field("ack_when_committed", BOOL, "1+", default=True),
    )


class AddRaftVoterResponse(Response):
    API_KEY = 80
    VERSIONS = "0-1"
    FLEXIBLE = "0+"

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", ignorable=True, default=None),
    )


class RemoveRaftVoterRequest(Request):
    API_KEY = 81
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("controller", "broker")

    FIELDS = (
        Field("cluster_id", STRING, nullable="0+", default=None),
        Field("voter_id", INT32),
        Field("voter_directory_id", UUID),
    )


class RemoveRaftVoterResponse(Response):
    API_KEY = 81
    VERSIONS = "0"
    FLEXIBLE = "0+"

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", ignorable=True, default=None),
    )


class KRaftVersionFeature(Struct):
    FIELDS = (
        Field("min_supported_version", INT16),
        Field("max_supported_version", INT16),
    )


class UpdateRaftVoterRequest(Request):
    API_KEY = 82
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("controller",)
    Listener = Listener
    KRaftVersionFeature = KRaftVersionFeature

    FIELDS = (
        Field("cluster_id", STRING, nullable="0+", default=None),
        Field("current_leader_epoch", INT32),
        Field("voter_id", INT32),
        Field("voter_directory_id", UUID),
        Field("listeners", Array(Listener)),
        Field("kraft_version_feature", KRaftVersionFeature),
    )


class CurrentLeader(Struct):
    FIELDS = (
        Field("leader_id", INT32, default=-1),
        Field("leader_epoch", INT32, default=-1),
        Field("host", STRING, default=""),
        Field("port", INT32, default=0),
    )


class UpdateRaftVoterResponse(Response):
    API_KEY = 82
    VERSIONS = "0"
    FLEXIBLE = "0+"
    CurrentLeader = CurrentLeader

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("current_leader", CurrentLeader, tag=0),
    )
