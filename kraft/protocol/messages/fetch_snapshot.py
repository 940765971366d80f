"""FetchSnapshot (API key 59): a KRaft follower copying the leader's snapshot in chunks (KIP-630).

Schema facts from Kafka's FetchSnapshotRequest.json / FetchSnapshotResponse.json; all versions
are flexible. ``unaligned_records`` is a raw slice of the snapshot file, not necessarily batch
aligned; it decodes to a zero-copy view. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, RECORDS, STRING, UINT16, UUID, Array, Field, Struct


class SnapshotId(Struct):
    FIELDS = (
        Field("end_offset", INT64),
        Field("epoch", INT32),
    )


class FetchSnapshotRequest(Request):
    API_KEY = 59
    VERSIONS = "0-1"
    FLEXIBLE = "0+"
    LISTENERS = ("controller",)
    SnapshotId = SnapshotId

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition", INT32),
                Field("current_leader_epoch", INT32),
                Field("snapshot_id", SnapshotId),
                Field("position", INT64),
                Field("replica_directory_id", UUID, "1+", tag=0, ignorable=True),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("cluster_id", STRING, nullable="0+", tag=0, default=None),
        Field("replica_id", INT32, default=-1),
        Field("max_bytes", INT32, default=0x7FFFFFFF),
        Field("topics", Array(Topic)),
    )


class LeaderIdAndEpoch(Struct):
    FIELDS = (
        Field("leader_id", INT32),
        Field("leader_epoch", INT32),
    )


class FetchSnapshotResponse(Response):
    API_KEY = 59
    VERSIONS = "0-1"
    FLEXIBLE = "0+"
    SnapshotId = SnapshotId
    LeaderIdAndEpoch = LeaderIdAndEpoch

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("index", INT32),
                Field("error_code", INT16),
                Field("snapshot_id", SnapshotId),
                Field("current_leader", LeaderIdAndEpoch, tag=0),
                Field("size", INT64),  # total size of the snapshot
                Field("position", INT64),  # where unaligned_records starts in it
                Field("unaligned_records", RECORDS),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    class NodeEndpoint(Struct):
        FIELDS = (
            Field("node_id", INT32, "1+"),
            Field("host", STRING, "1+"),
            Field("port", UINT16, "1+"),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, ignorable=True),
        Field("error_code", INT16),
        Field("topics", Array(Topic)),
        Field("node_endpoints", Array(NodeEndpoint), "1+", tag=0),
    )
