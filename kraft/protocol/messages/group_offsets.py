"""Committed offsets of groups: OffsetCommit (8), OffsetFetch (9) and OffsetDelete (47).

Schema facts from Kafka's OffsetCommit/OffsetFetch/OffsetDelete Request and Response JSON files:
OffsetCommit 0-9 (flexible 8+; v1 only carries a per-partition CommitTimestamp, v2-4 a
RetentionTimeMs), OffsetFetch 0-9 (flexible 6+; one group up to v7, a list of groups from 8),
OffsetDelete 0 (not flexible). Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, Struct


class OffsetCommitRequest(Request):
    API_KEY = 8
    VERSIONS = "0-9"
    FLEXIBLE = "8+"
    LISTENERS = ("broker",)

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("committed_offset", INT64),
                Field("committed_leader_epoch", INT32, "6+", default=-1, ignorable=True),
                Field("commit_timestamp", INT64, "1", default=-1),
                Field("committed_metadata", STRING, nullable="0+"),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("group_id", STRING),
        Field("generation_id_or_member_epoch", INT32, "1+", default=-1, ignorable=True),
        Field("member_id", STRING, "1+", ignorable=True),
        Field("group_instance_id", STRING, "7+", nullable="7+", default=None),
        Field("retention_time_ms", INT64, "2-4", default=-1, ignorable=True),
        Field("topics", Array(Topic)),
    )


class OffsetCommitResponse(Response):
    API_KEY = 8
    VERSIONS = "0-9"
    FLEXIBLE = "8+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "3+", ignorable=True),
        Field("topics", Array(Topic)),
    )


class OffsetFetchRequest(Request):
    API_KEY = 9
    VERSIONS = "0-9"
    FLEXIBLE = "6+"
    LISTENERS = ("broker",)

    class Topic(Struct):
        FIELDS = (
            Field("name", STRING, "0-7"),
            Field("partition_indexes", Array(INT32), "0-7"),
        )

    class Group(Struct):
        class Topic(Struct):
            FIELDS = (
                Field("name", STRING, "8+"),
                Field("partition_indexes", Array(INT32), "8+"),
            )

        FIELDS = (
            Field("group_id", STRING, "8+"),
            Field("member_id", STRING, "9+", nullable="9+", default=None, ignorable=True),
            Field("member_epoch", INT32, "9+", default=-1, ignorable=True),
            Field("topics", Array(Topic), "8+", nullable="8+"),
        )

    FIELDS = (
        Field("group_id", STRING, "0-7"),
        Field("topics", Array(Topic), "0-7", nullable="2-7"),
        Field("groups", Array(Group), "8+"),
        Field("require_stable", BOOL, "7+", default=False),
    )


class OffsetFetchResponse(Response):
    API_KEY = 9
    VERSIONS = "0-9"
    FLEXIBLE = "6+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32, "0-7"),
                Field("committed_offset", INT64, "0-7"),
                Field("committed_leader_epoch", INT32, "5-7", default=-1, ignorable=True),
                Field("metadata", STRING, "0-7", nullable="0-7"),
                Field("error_code", INT16, "0-7"),
            )

        FIELDS = (
            Field("name", STRING, "0-7"),
            Field("partitions", Array(Partition), "0-7"),
        )

    class Group(Struct):
        class Topic(Struct):
            class Partition(Struct):
                FIELDS = (
                    Field("partition_index", INT32, "8+"),
                    Field("committed_offset", INT64, "8+"),
                    Field("committed_leader_epoch", INT32, "8+", default=-1, ignorable=True),
                    Field("metadata", STRING, "8+", nullable="8+"),
                    Field("error_code", INT16, "8+"),
                )

            FIELDS = (
                Field("name", STRING, "8+"),
                Field("partitions", Array(Partition), "8+"),
            )

        FIELDS = (
            Field("group_id", STRING, "8+"),
            Field("topics", Array(Topic), "8+"),
            Field("error_code", INT16, "8+", default=0),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, "3+", ignorable=True),
        Field("topics", Array(Topic), "0-7"),
        Field("error_code", INT16, "2-7", default=0, ignorable=True),
        Field("groups", Array(Group), "8+"),
    )


class OffsetDeleteRequest(Request):
    API_KEY = 47
    VERSIONS = "0"
    FLEXIBLE = "none"
    LISTENERS = ("broker",)

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (Field("partition_index", INT32),)

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("group_id", STRING),
        Field("topics", Array(Topic)),
    )


class OffsetDeleteResponse(Response):
    API_KEY = 47
    VERSIONS = "0"
    FLEXIBLE = "none"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("error_code", INT16),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("error_code", INT16),
        Field("throttle_time_ms", INT32, ignorable=True),
        Field("topics", Array(Topic)),
    )
