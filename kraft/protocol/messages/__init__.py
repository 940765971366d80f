"""Every message schema kraft speaks. Importing this package registers them all.

One module per API (or per closely related pair of APIs). To add an API, write a module with a
``Request`` and a ``Response`` subclass (API_KEY, VERSIONS, FLEXIBLE, FIELDS) and import it here;
the codec, framing, ApiVersions table and the generated tests pick it up from the registry.
"""

from kraft.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kraft.protocol.messages.broker_lifecycle import (BrokerHeartbeatRequest, BrokerHeartbeatResponse,
                                                      BrokerRegistrationRequest, BrokerRegistrationResponse)
from kraft.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kraft.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from kraft.protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from kraft.protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from kraft.protocol.messages.fetch import FetchRequest, FetchResponse
from kraft.protocol.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse
from kraft.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kraft.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kraft.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kraft.protocol.messages.produce import ProduceRequest, ProduceResponse
from kraft.protocol.messages.quorum_epoch import (BeginQuorumEpochRequest, BeginQuorumEpochResponse,
                                                  EndQuorumEpochRequest, EndQuorumEpochResponse)
from kraft.protocol.messages.vote import VoteRequest, VoteResponse

__all__ = [
    "ApiVersionsRequest", "ApiVersionsResponse",
    "BeginQuorumEpochRequest", "BeginQuorumEpochResponse",
    "BrokerHeartbeatRequest", "BrokerHeartbeatResponse",
    "BrokerRegistrationRequest", "BrokerRegistrationResponse",
    "CreateTopicsRequest", "CreateTopicsResponse",
    "DescribeClusterRequest", "DescribeClusterResponse",
    "DescribeLogDirsRequest", "DescribeLogDirsResponse",
    "DescribeQuorumRequest", "DescribeQuorumResponse",
    "EndQuorumEpochRequest", "EndQuorumEpochResponse",
    "FetchRequest", "FetchResponse",
    "FetchSnapshotRequest", "FetchSnapshotResponse",
    "ListOffsetsRequest", "ListOffsetsResponse",
    "MetadataRequest", "MetadataResponse",
    "OffsetForLeaderEpochRequest", "OffsetForLeaderEpochResponse",
    "ProduceRequest", "ProduceResponse",
    "VoteRequest", "VoteResponse",
]
