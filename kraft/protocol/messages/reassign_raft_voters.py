"""ReassignRaftVoters: kraft's own request (no Kafka equivalent) that sets or cancels the
voter set a dynamic quorum moves to, one voter at a time (seed 002's AlterQuorum).

Kafka numbers its APIs from 0 upwards; this one sits far above them (10002) so a Kafka
client that sees it in ApiVersions ignores it as an unknown key. Flexible from v0, like
the KIP-853 requests it complements. Schemas only: the rules are in
``kraft.raft.reassignment``.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, STRING, UUID, Array, Field, Struct
from kraft.protocol.messages.raft_voters import Listener


class TargetVoter(Struct):
    FIELDS = (
        Field("voter_id", INT32),
        Field("voter_directory_id", UUID),  # zero: whichever replica of that id is caught up
        Field("listeners", Array(Listener)),  # empty: learned when it joins (UpdateRaftVoter)
    )


class ReassignRaftVotersRequest(Request):
    API_KEY = 10002
    VERSIONS = "0"
    FLEXIBLE = "0+"
    LISTENERS = ("controller",)
    Listener = Listener
    TargetVoter = TargetVoter

    FIELDS = (
        Field("cluster_id", STRING, nullable="0+", default=None),
        Field("target_voters", Array(TargetVoter)),
        Field("cancel", BOOL, default=False),  # stop after the step under way; target ignored
    )


class ReassignRaftVotersResponse(Response):
    API_KEY = 10002
    VERSIONS = "0"
    FLEXIBLE = "0+"

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", ignorable=True, default=None),
    )
