"""DescribeQuorum (API key 55): the leader's view of the KRaft quorum (KIP-595, KIP-836, KIP-853).

Schema facts from Kafka's DescribeQuorumRequest.json / DescribeQuorumResponse.json; all versions
are flexible. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, STRING, UINT16, UUID, Array, Field, Struct


class DescribeQuorumRequest(Request):
    API_KEY = 55
    VERSIONS = "0-2"
    FLEXIBLE = "0+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (Field("partition_index", INT32),)

        FIELDS = (
            Field("topic_name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (Field("topics", Array(Topic)),)


class ReplicaState(Struct):
    """One voter or observer as the leader sees it (Kafka's common struct ReplicaState)."""

    FIELDS = (
        Field("replica_id", INT32),
        Field("replica_directory_id", UUID, "2+"),
        Field("log_end_offset", INT64),  # -1 if unknown
        Field("last_fetch_timestamp", INT64, "1+", default=-1, ignorable=True),
        Field("last_caught_up_timestamp", INT64, "1+", default=-1, ignorable=True),
    )


class DescribeQuorumResponse(Response):
    API_KEY = 55
    VERSIONS = "0-2"
    FLEXIBLE = "0+"
    ReplicaState = ReplicaState

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
                Field("error_message", STRING, "2+", nullable="2+", ignorable=True),
                Field("leader_id", INT32),
                Field("leader_epoch", INT32),
                Field("high_watermark", INT64),
                Field("current_voters", Array(ReplicaState)),
                Field("observers", Array(ReplicaState)),
            )

        FIELDS = (
            Field("topic_name", STRING),
            Field("partitions", Array(Partition)),
        )

    class Node(Struct):
        class Listener(Struct):
            FIELDS = (
                Field("name", STRING, "2+"),
                Field("host", STRING, "2+"),
                Field("port", UINT16, "2+"),
            )

        FIELDS = (
            Field("node_id", INT32, "2+"),
            Field("listeners", Array(Listener), "2+"),
        )

    class TargetVoter(Struct):
        FIELDS = (
            Field("voter_id", INT32),
            Field("voter_directory_id", UUID),
        )

    FIELDS = (
        Field("error_code", INT16),
        Field("error_message", STRING, "2+", nullable="2+", ignorable=True),
        Field("topics", Array(Topic)),
        Field("nodes", Array(Node), "2+"),
        # kraft's own: the voters a reassignment (ReassignRaftVoters) moves to, until done.
        # A tagged field, so Kafka's tools parse the response and ignore it.
        Field("target_voters", Array(TargetVoter), nullable="0+", tag=10002, default=None),
    )
