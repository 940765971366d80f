"""Vote (API key 52): KRaft leader election and, from v2, pre-vote (KIP-595, KIP-853, KIP-996).

Schema facts from Kafka's VoteRequest.json / VoteResponse.json. Version 2 renamed the
candidate fields to replica fields and added PreVote; the response is unchanged since v1.
Schemas only: no election logic here.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, INT64, STRING, UINT16, UUID, Array, Field, Struct


class VoteRequest(Request):
    API_KEY = 52
    VERSIONS = "0-2"
    FLEXIBLE = "0+"
    LISTENERS = ("controller",)

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("replica_epoch", INT32),  # the candidate's bumped epoch (pre-vote: its current one)
                Field("replica_id", INT32),
                Field("replica_directory_id", UUID, "1+", ignorable=True),
                Field("voter_directory_id", UUID, "1+", ignorable=True),
                Field("last_offset_epoch", INT32),
                Field("last_offset", INT64),
                Field("pre_vote", BOOL, "2+"),
            )

        FIELDS = (
            Field("topic_name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("cluster_id", STRING, nullable="0+", default=None),
        Field("voter_id", INT32, "1+", default=-1, ignorable=True),
        Field("topics", Array(Topic)),
    )


class VoteResponse(Response):
    API_KEY = 52
    VERSIONS = "0-2"
    FLEXIBLE = "0+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
                Field("leader_id", INT32),
                Field("leader_epoch", INT32),
                Field("vote_granted", BOOL),
            )

        FIELDS = (
            Field("topic_name", STRING),
            Field("partitions", Array(Partition)),
        )

    class NodeEndpoint(Struct):
        FIELDS = (
            Field("node_id", INT32, "1+"),
            Field("host", STRING, "1+"),
            Field("port", UINT16, "1+"),
        )

    FIELDS = (
        Field("error_code", INT16),
        Field("topics", Array(Topic)),
        Field("node_endpoints", Array(NodeEndpoint), "1+", tag=0),
    )
