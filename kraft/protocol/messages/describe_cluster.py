"""DescribeCluster (API key 60): the cluster id, the active controller and the endpoints of
brokers or (v1, KIP-919) controllers. ``kafka-metadata-quorum.sh`` reads ClusterId from it.

Schema facts from Kafka's DescribeClusterRequest.json / DescribeClusterResponse.json; all
versions are flexible. Schemas only.
"""

from kraft.protocol.message import Request, Response
from kraft.protocol.schema import BOOL, INT8, INT16, INT32, STRING, Array, Field, Struct

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2


class DescribeClusterRequest(Request):
    API_KEY = 60
    VERSIONS = "0-1"
    FLEXIBLE = "0+"
    LISTENERS = ("broker", "controller")

    FIELDS = (
        Field("include_cluster_authorized_operations", BOOL),
        Field("endpoint_type", INT8, "1+", default=ENDPOINT_BROKERS),
    )


class DescribeClusterResponse(Response):
    API_KEY = 60
    VERSIONS = "0-1"
    FLEXIBLE = "0+"

    class Broker(Struct):
        FIELDS = (
            Field("broker_id", INT32),
            Field("host", STRING),
            Field("port", INT32),
            Field("rack", STRING, nullable="0+", default=None),
        )

    FIELDS = (
        Field("throttle_time_ms", INT32, default=0),
        Field("error_code", INT16),
        Field("error_message", STRING, nullable="0+", default=None),
        Field("endpoint_type", INT8, "1+", default=ENDPOINT_BROKERS),
        Field("cluster_id", STRING),
        Field("controller_id", INT32, default=-1),
        Field("brokers", Array(Broker)),
        Field("cluster_authorized_operations", INT32, default=-(1 << 31)),
    )
