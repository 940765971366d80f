"""DeleteRecords (API key 21): move partitions' log start offsets forward, so the records below
are no longer readable (``kafka-delete-records.sh``, ``Admin.deleteRecords``).

Schema facts from Kafka's DeleteRecordsRequest.json / DeleteRecordsResponse.json: versions 0-2,
flexible from 2; an Offset of -1 means the high watermark. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT16, INT32, INT64, STRING, Array, Field, Struct


class DeleteRecordsRequest(Request):
    API_KEY = 21
    VERSIONS = "0-2"
    FLEXIBLE = "2+"
    LISTENERS = ("broker",)

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("offset", INT64),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("topics", Array(Topic)),
        Field("timeout_ms", INT32),
    )


class DeleteRecordsResponse(Response):
    API_KEY = 21
    VERSIONS = "0-2"
    FLEXIBLE = "2+"

    class Topic(Struct):
        class Partition(Struct):
            FIELDS = (
                Field("partition_index", INT32),
                Field("low_watermark", INT64),
                Field("error_code", INT16),
            )

        FIELDS = (
            Field("name", STRING),
            Field("partitions", Array(Partition)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("topics", Array(Topic)),
    )
