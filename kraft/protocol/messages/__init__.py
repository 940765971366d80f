"""Every message schema kraft speaks. Importing this package registers them all.

One module per API (or per closely related pair of APIs). To add an API, write a module with a
``Request`` and a ``Response`` subclass (API_KEY, VERSIONS, FLEXIBLE, FIELDS) and import it here;
the codec, framing, ApiVersions table and the generated tests pick it up from the registry.
"""

from kraft.protocol.messages.acls import (CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest,
                                          DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse)
from kraft.protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from kraft.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from kraft.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from kraft.protocol.messages.assign_replicas_to_dirs import AssignReplicasToDirsRequest, AssignReplicasToDirsResponse
from kraft.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kraft.protocol.messages.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse,
                                        SaslHandshakeRequest, SaslHandshakeResponse)
from kraft.protocol.messages.broker_lifecycle import (BrokerHeartbeatRequest, BrokerHeartbeatResponse,
                                                      BrokerRegistrationRequest, BrokerRegistrationResponse,
                                                      UnregisterBrokerRequest, UnregisterBrokerResponse)
from kraft.protocol.messages.consumer_group import (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
                                                    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse)
from kraft.protocol.messages.client_quotas import (AlterClientQuotasRequest, AlterClientQuotasResponse,
                                                   DescribeClientQuotasRequest, DescribeClientQuotasResponse)
from kraft.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kraft.protocol.messages.client_telemetry import (GetTelemetrySubscriptionsRequest,
                                                      GetTelemetrySubscriptionsResponse, PushTelemetryRequest,
                                                      PushTelemetryResponse)
from kraft.protocol.messages.configs import (AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest,
                                             DescribeConfigsResponse, IncrementalAlterConfigsRequest,
                                             IncrementalAlterConfigsResponse)
from kraft.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kraft.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from kraft.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kraft.protocol.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from kraft.protocol.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from kraft.protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from kraft.protocol.messages.describe_topic_partitions import (DescribeTopicPartitionsRequest,
                                                               DescribeTopicPartitionsResponse)
from kraft.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from kraft.protocol.messages.fetch import FetchRequest, FetchResponse
from kraft.protocol.messages.group_admin import (DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
                                                 DescribeGroupsResponse, ListGroupsRequest, ListGroupsResponse)
from kraft.protocol.messages.group_membership import (FindCoordinatorRequest, FindCoordinatorResponse,
                                                      HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
                                                      JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
                                                      SyncGroupRequest, SyncGroupResponse)
from kraft.protocol.messages.group_offsets import (OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
                                                   OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse)
from kraft.protocol.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse
from kraft.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kraft.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kraft.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kraft.protocol.messages.partition_reassignments import (AlterPartitionReassignmentsRequest,
                                                             AlterPartitionReassignmentsResponse,
                                                             ListPartitionReassignmentsRequest,
                                                             ListPartitionReassignmentsResponse)
from kraft.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kraft.protocol.messages.produce import ProduceRequest, ProduceResponse
from kraft.protocol.messages.quorum_epoch import (BeginQuorumEpochRequest, BeginQuorumEpochResponse,
                                                  EndQuorumEpochRequest, EndQuorumEpochResponse)
from kraft.protocol.messages.raft_voters import (AddRaftVoterRequest, AddRaftVoterResponse,
                                                 RemoveRaftVoterRequest, RemoveRaftVoterResponse,
                                                 UpdateRaftVoterRequest, UpdateRaftVoterResponse)
from kraft.protocol.messages.scram_credentials import (AlterUserScramCredentialsRequest,
                                                       AlterUserScramCredentialsResponse,
                                                       DescribeUserScramCredentialsRequest,
                                                       DescribeUserScramCredentialsResponse)
from kraft.protocol.messages.reassign_raft_voters import ReassignRaftVotersRequest, ReassignRaftVotersResponse
from kraft.protocol.messages.update_features import UpdateFeaturesRequest, UpdateFeaturesResponse
from kraft.protocol.messages.vote import VoteRequest, VoteResponse
from kraft.protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kraft.protocol.messages.add_to_txn import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
                                                AddPartitionsToTxnRequest, AddPartitionsToTxnResponse)
from kraft.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kraft.protocol.messages.transactions_admin import (DescribeTransactionsRequest, DescribeTransactionsResponse,
                                                        ListTransactionsRequest, ListTransactionsResponse)
from kraft.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from kraft.protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse

__all__ = [
    "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse",
    "DeleteGroupsRequest", "DeleteGroupsResponse",
    "DescribeGroupsRequest", "DescribeGroupsResponse",
    "ListGroupsRequest", "ListGroupsResponse",
    "FindCoordinatorRequest", "FindCoordinatorResponse",
    "HeartbeatRequest", "HeartbeatResponse",
    "JoinGroupRequest", "JoinGroupResponse",
    "LeaveGroupRequest", "LeaveGroupResponse",
    "SyncGroupRequest", "SyncGroupResponse",
    "OffsetCommitRequest", "OffsetCommitResponse",
    "OffsetDeleteRequest", "OffsetDeleteResponse",
    "OffsetFetchRequest", "OffsetFetchResponse",
    "AddRaftVoterRequest", "AddRaftVoterResponse", "RemoveRaftVoterRequest", "RemoveRaftVoterResponse",
    "UpdateRaftVoterRequest", "UpdateRaftVoterResponse",
    "AllocateProducerIdsRequest", "AllocateProducerIdsResponse",
    "AssignReplicasToDirsRequest", "AssignReplicasToDirsResponse",
    "AlterReplicaLogDirsRequest", "AlterReplicaLogDirsResponse",
    "WriteTxnMarkersRequest", "WriteTxnMarkersResponse",
    "AddPartitionsToTxnRequest", "AddPartitionsToTxnResponse", "AddOffsetsToTxnRequest", "AddOffsetsToTxnResponse",
    "EndTxnRequest", "EndTxnResponse", "TxnOffsetCommitRequest", "TxnOffsetCommitResponse",
    "DescribeTransactionsRequest", "DescribeTransactionsResponse",
    "ListTransactionsRequest", "ListTransactionsResponse",
    "DescribeProducersRequest", "DescribeProducersResponse",
    "AlterConfigsRequest", "AlterConfigsResponse",
    "AlterClientQuotasRequest", "AlterClientQuotasResponse", "DescribeClientQuotasRequest", "DescribeClientQuotasResponse",
    "AlterPartitionRequest", "AlterPartitionResponse",
    "AlterPartitionReassignmentsRequest", "AlterPartitionReassignmentsResponse",
    "ApiVersionsRequest", "ApiVersionsResponse",
    "BeginQuorumEpochRequest", "BeginQuorumEpochResponse",
    "BrokerHeartbeatRequest", "BrokerHeartbeatResponse",
    "BrokerRegistrationRequest", "BrokerRegistrationResponse",
    "CreatePartitionsRequest", "CreatePartitionsResponse",
    "DeleteRecordsRequest", "DeleteRecordsResponse",
    "GetTelemetrySubscriptionsRequest", "GetTelemetrySubscriptionsResponse",
    "PushTelemetryRequest", "PushTelemetryResponse",
    "DescribeTopicPartitionsRequest", "DescribeTopicPartitionsResponse",
    "CreateTopicsRequest", "CreateTopicsResponse",
    "CreateAclsRequest", "CreateAclsResponse",
    "DeleteAclsRequest", "DeleteAclsResponse",
    "DeleteTopicsRequest", "DeleteTopicsResponse",
    "DescribeAclsRequest", "DescribeAclsResponse",
    "DescribeClusterRequest", "DescribeClusterResponse",
    "DescribeConfigsRequest", "DescribeConfigsResponse",
    "DescribeLogDirsRequest", "DescribeLogDirsResponse",
    "DescribeQuorumRequest", "DescribeQuorumResponse",
    "ElectLeadersRequest", "ElectLeadersResponse",
    "InitProducerIdRequest", "InitProducerIdResponse",
    "EndQuorumEpochRequest", "EndQuorumEpochResponse",
    "FetchRequest", "FetchResponse",
    "FetchSnapshotRequest", "FetchSnapshotResponse",
    "IncrementalAlterConfigsRequest", "IncrementalAlterConfigsResponse",
    "ListOffsetsRequest", "ListOffsetsResponse",
    "ListPartitionReassignmentsRequest", "ListPartitionReassignmentsResponse",
    "MetadataRequest", "MetadataResponse",
    "OffsetForLeaderEpochRequest", "OffsetForLeaderEpochResponse",
    "ProduceRequest", "ProduceResponse",
    "ReassignRaftVotersRequest", "ReassignRaftVotersResponse",
    "UnregisterBrokerRequest", "UnregisterBrokerResponse",
    "UpdateFeaturesRequest", "UpdateFeaturesResponse",
    "AlterUserScramCredentialsRequest", "AlterUserScramCredentialsResponse",
    "DescribeUserScramCredentialsRequest", "DescribeUserScramCredentialsResponse",
    "SaslAuthenticateRequest", "SaslAuthenticateResponse", "SaslHandshakeRequest", "SaslHandshakeResponse",
    "VoteRequest", "VoteResponse",
]
