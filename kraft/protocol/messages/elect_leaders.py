"""ElectLeaders (API key 43): preferred or unclean leader election for chosen partitions, or
for every partition when the topic list is null (KIP-460; ``kafka-leader-election.sh``).

Schema facts from Kafka's ElectLeadersRequest.json / ElectLeadersResponse.json: versions 0-2,
flexible from 2; v1 adds ElectionType and the top-level error code. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import INT8, INT16, INT32, STRING, Array, Field, Struct

ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1


class ElectLeadersRequest(Request):
    API_KEY = 43
    VERSIONS = "0-2"
    FLEXIBLE = "2+"
    LISTENERS = ("broker", "controller")

    class TopicPartitions(Struct):
        FIELDS = (
            Field("topic", STRING),
            Field("partitions", Array(INT32)),
        )

    FIELDS = (
        Field("election_type", INT8, "1+"),
        Field("topic_partitions", Array(TopicPartitions), nullable="0+"),  # null: every partition
        Field("timeout_ms", INT32, default=60000),
    )


class ElectLeadersResponse(Response):
    API_KEY = 43
    VERSIONS = "0-2"
    FLEXIBLE = "2+"

    class ReplicaElectionResult(Struct):
        class PartitionResult(Struct):
            FIELDS = (
                Field("partition_id", INT32),
                Field("error_code", INT16),
                Field("error_message", STRING, nullable="0+", default=None),
            )

        FIELDS = (
            Field("topic", STRING),
            Field("partition_result", Array(PartitionResult)),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "1+"),
        Field("replica_election_results", Array(ReplicaElectionResult)),
    )
