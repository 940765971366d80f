"""Fetch (API key 1): consumers and follower replicas reading a partition log; also KRaft's
replication RPC (KIP-595 uses ReplicaState, LastFetchedEpoch and the DivergingEpoch /
CurrentLeader / SnapshotId tagged fields).

Schema facts from Kafka's FetchRequest.json / FetchResponse.json, versions 4-18 (Kafka 4 dropped
0-3): flexible from 12, topic ids replace names from 13, ReplicaId moves into the tagged
ReplicaState from 15, NodeEndpoints from 16, ReplicaDirectoryId from 17, HighWatermark from 18.
Tags restart per struct: top level ClusterId=0, ReplicaState=1; in a request partition
ReplicaDirectoryId=0, HighWatermark=1; in a response partition DivergingEpoch=0,
CurrentLeader=1, SnapshotId=2. This is the hot path: records decode to zero-copy views.
Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import (INT8, INT16, INT32, INT64, RECORDS, STRING, UUID, Array, Field,
                                   Struct)

_NO_HIGH_WATERMARK = 0x7FFFFFFFFFFFFFFF  # "the fetcher does not support sending it"


class ReplicaState(Struct):
    FIELDS = (
        Field("replica_id", INT32, "15+", default=-1),
        Field("replica_epoch", INT64, "15+", default=-1),
    )


class FetchRequest(Request):
    API_KEY = 1
    VERSIONS = "4-18"
    FLEXIBLE = "12+"
    ReplicaState = ReplicaState

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition", INT32),
                Field("current_leader_epoch", INT32, "9+", default=-1, ignorable=True),
                Field("fetch_offset", INT64),
                Field("last_fetched_epoch", INT32, "12+", default=-1),
                Field("log_start_offset", INT64, "5+", default=-1, ignorable=True),
                Field("partition_max_bytes", INT32),
                Field("replica_directory_id", UUID, "17+", tag=0, ignorable=True),
                Field("high_watermark", INT64, "18+", tag=1, default=_NO_HIGH_WATERMARK, ignorable=True),
            )

        FIELDS = (
            Field("topic", STRING, "0-12", ignorable=True),
            Field("topic_id", UUID, "13+", ignorable=True),
            Field("partitions", Array(Partition)),
        )

    class ForgottenTopic(Struct):
        FIELDS = (
            Field("topic", STRING, "7-12", ignorable=True),
            Field("topic_id", UUID, "13+", ignorable=True),
            Field("partitions", Array(INT32), "7+"),
        )

    FIELDS = (
        Field("cluster_id", STRING, "12+", nullable="12+", tag=0, default=None, ignorable=True),
        Field("replica_id", INT32, "0-14", default=-1),
        Field("replica_state", ReplicaState, "15+", tag=1),
        Field("max_wait_ms", INT32),
        Field("min_bytes", INT32),
        Field("max_bytes", INT32, "3+", default=0x7FFFFFFF, ignorable=True),
        Field("isolation_level", INT8, "4+", default=0, ignorable=True),
        Field("session_id", INT32, "7+", default=0, ignorable=True),
        Field("session_epoch", INT32, "7+", default=-1, ignorable=True),
        Field("topics", Array(Topic)),
        Field("forgotten_topics_data", Array(ForgottenTopic), "7+"),
        Field("rack_id", STRING, "11+", default="", ignorable=True),
    )


class EpochEndOffset(Struct):
    FIELDS = (
        Field("epoch", INT32, "12+", default=-1),
        Field("end_offset", INT64, "12+", default=-1),
    )


class LeaderIdAndEpoch(Struct):
    FIELDS = (
        Field("leader_id", INT32, "12+", default=-1),
        Field("leader_epoch", INT32, "12+", default=-1),
    )


class SnapshotId(Struct):
    FIELDS = (
        Field("end_offset", INT64, default=-1),
        Field("epoch", INT32, default=-1),
    )


class AbortedTransaction(Struct):
    FIELDS = (
        Field("producer_id", INT64, "4+"),
        Field("first_offset", INT64, "4+"),
    )


class FetchResponse(Response):
    API_KEY = 1
    VERSIONS = "4-18"
    FLEXIBLE = "12+"
    EpochEndOffset = EpochEndOffset
    LeaderIdAndEpoch = LeaderIdAndEpoch
    SnapshotId = SnapshotId
    AbortedTransaction = AbortedTransaction

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
                Field("high_watermark", INT64),
                Field("last_stable_offset", INT64, "4+", default=-1, ignorable=True),
                Field("log_start_offset", INT64, "5+", default=-1, ignorable=True),
                Field("diverging_epoch", EpochEndOffset, "12+", tag=0),
                Field("current_leader", LeaderIdAndEpoch, "12+", tag=1),
                Field("snapshot_id", SnapshotId, "12+", tag=2),
                Field("aborted_transactions", Array(AbortedTransaction), "4+", nullable="4+", ignorable=True),
                Field("preferred_read_replica", INT32, "11+", default=-1),
                Field("records", RECORDS, nullable="0+"),
            )

        FIELDS = (
            Field("topic", STRING, "0-12", ignorable=True),
            Field("topic_id", UUID, "13+", ignorable=True),
            Field("partitions", Array(Partition)),
        )

    class NodeEndpoint(Struct):
        FIELDS = (
            Field("node_id", INT32, "16+"),
            Field("host", STRING, "16+"),
            Field("port", INT32, "16+"),  # int32 here, unlike the uint16 of Raft RPCs
            Field("rack", STRING, "16+", nullable="16+", default=None),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "1+", ignorable=True),
        Field("error_code", INT16, "7+", ignorable=True),
        Field("session_id", INT32, "7+", default=0),
        Field("responses", Array(Topic)),
        Field("node_endpoints", Array(NodeEndpoint), "16+", tag=0),
    )
