"""BeginQuorumEpoch (53) and EndQuorumEpoch (54): a new KRaft leader announcing itself, and a
resigning leader asking voters to elect a successor (KIP-595, endpoints and directory ids from
KIP-853).

Schema facts from Kafka's Begin/EndQuorumEpoch{Request,Response}.json. Unlike the other KRaft
RPCs, version 0 of both is NOT flexible; flexible versions start at 1. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, STRING, UINT16, UUID, Array, Field, Struct


class LeaderEndpoint(Struct):
    """A listener of the leader, as sent in Begin/EndQuorumEpoch requests (v1+)."""

    FIELDS = (
        Field("name", STRING, "1+"),
        Field("host", STRING, "1+"),
        Field("port", UINT16, "1+"),
    )


class NodeEndpoint(Struct):
    """Where to reach a leader named in a KRaft response (v1+; port is uint16 in Raft RPCs)."""

    FIELDS = (
        Field("node_id", INT32, "1+"),
        Field("host", STRING, "1+"),
        Field("port", UINT16, "1+"),
    )


class BeginQuorumEpochRequest(Request):
    API_KEY = 53
    VERSIONS = "0-1"
    FLEXIBLE = "1+"
    LISTENERS = ("controller",)
    LeaderEndpoint = LeaderEndpoint

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("voter_directory_id", UUID, "1+", ignorable=True),
                Field("leader_id", INT32),
                Field("leader_epoch", INT32),
            )

        FIELDS = (
            Field("topic_name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("cluster_id", STRING, nullable="0+", default=None),
        Field("voter_id", INT32, "1+", default=-1, ignorable=True),
        Field("topics", Array(Topic)),
        Field("leader_endpoints", Array(LeaderEndpoint), "1+", ignorable=True),
    )


class BeginQuorumEpochResponse(Response):
    API_KEY = 53
    VERSIONS = "0-1"
    FLEXIBLE = "1+"
    NodeEndpoint = NodeEndpoint

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
                Field("leader_id", INT32),
                Field("leader_epoch", INT32),
            )

        FIELDS = (
            Field("topic_name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("error_code", INT16),
        Field("topics", Array(Topic)),
        Field("node_endpoints", Array(NodeEndpoint), "1+", tag=0),
    )


class EndQuorumEpochRequest(Request):
    API_KEY = 54
    VERSIONS = "0-1"
    FLEXIBLE = "1+"
    LISTENERS = ("controller",)
    LeaderEndpoint = LeaderEndpoint

    class Topic(Struct):
        class Partition(Struct):
            class ReplicaInfo(Struct):
                FIELDS = (
                    Field("candidate_id", INT32, "1+"),
                    Field("candidate_directory_id", UUID, "1+"),
                )

            FIELDS = (
                Field("partition_index", INT32),
                Field("leader_id", INT32),
                Field("leader_epoch", INT32),
                Field("preferred_successors", Array(INT32), "0", ignorable=True),
                Field("preferred_candidates", Array(ReplicaInfo), "1+", ignorable=True),
            )

        FIELDS = (
            Field("topic_name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("cluster_id", STRING, nullable="0+", default=None),
        Field("topics", Array(Topic)),
        Field("leader_endpoints", Array(LeaderEndpoint), "1+", ignorable=True),
    )


class EndQuorumEpochResponse(Response):
    API_KEY = 54
    VERSIONS = "0-1"
    FLEXIBLE = "1+"
    NodeEndpoint = NodeEndpoint

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
                Field("leader_id", INT32),
                Field("leader_epoch", INT32),
            )

        FIELDS = (
            Field("topic_name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("error_code", INT16),
        Field("topics", Array(Topic)),
        Field("node_endpoints", Array(NodeEndpoint), "1+", tag=0),
    )
