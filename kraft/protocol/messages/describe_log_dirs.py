"""DescribeLogDirs (API key 35): a broker's log directories and the partitions in each, with
their sizes (``kafka-log-dirs.sh``, admin clients).

Schema facts from Kafka's DescribeLogDirsRequest.json / DescribeLogDirsResponse.json, versions
1-4 (Kafka 4 dropped v0; flexible from 2; a top-level ErrorCode from 3; TotalBytes and
UsableBytes from 4). A null topic list asks for every partition. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT16, INT32, INT64, STRING, Array, Field, Struct


class DescribeLogDirsRequest(Request):
    API_KEY = 35
    VERSIONS = "1-4"
    FLEXIBLE = "2+"
    LISTENERS = ("broker",)

    class Topic(Struct):
        FIELDS = (
            Field("topic", STRING),
            Field("partitions", Array(INT32)),
        )

    FIELDS = (Field("topics", Array(Topic), nullable="0+"),)


class DescribeLogDirsResponse(Response):
    API_KEY = 35
    VERSIONS = "1-4"
    FLEXIBLE = "2+"

    class Result(Struct):
        class Topic(Struct):
            class Partition(Struct):
                FIELDS = (
                    Field("partition_index", INT32),
                    Field("partition_size", INT64),
                    Field("offset_lag", INT64),
                    Field("is_future_key", BOOL),
                )

            FIELDS = (
                Field("name", STRING),
                Field("partitions", Array(Partition)),
            )

        FIELDS = (
            Field("error_code", INT16),
            Field("log_dir", STRING),
            Field("topics", Array(Topic)),
            Field("total_bytes", INT64, "4+", default=-1, ignorable=True),
            Field("usable_bytes", INT64, "4+", default=-1, ignorable=True),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "3+", ignorable=True),
        Field("results", Array(Result)),
    )
