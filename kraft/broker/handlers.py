"""Client request handlers of a broker listener: ApiVersions with the broker's table, then
Metadata, Produce, Fetch, ListOffsets, OffsetsForLeaderEpoch, DescribeLogDirs, AlterReplicaLogDirs,
InitProducerId,
WriteTxnMarkers and DescribeProducers over the
broker's ``MetadataImage`` and partition logs; the group APIs go to the group coordinator the
server layer attaches (``groups``). Each handler lives in its own module; this
one dispatches and says which versions are advertised (every advertised version has a case
in ``tests/broker/test_broker_every_advertised_version.py``). No sockets: ``network.py``
calls ``handle(ctx, request)`` and writes what comes back.
"""

from __future__ import annotations

import logging

from kraft.broker.broker_state import BrokerState
from kraft.broker.delete_records_handler import DeleteRecordsHandler
from kraft.broker.describe_producers_handler import handle_describe_producers
from kraft.broker.describe_topic_partitions import handle_describe_topic_partitions
from kraft.broker.fetch_handler import FetchHandler
from kraft.broker.fetch_sessions import DEFAULT_CACHE_SLOTS
from kraft.broker.init_producer_id_handler import InitProducerIdHandler, local_block_source
from kraft.broker.leader_epoch_handler import handle_describe_log_dirs, handle_offsets_for_leader_epoch
from kraft.broker.list_offsets_handler import handle_list_offsets
from kraft.broker.metadata_handler import handle_metadata
from kraft.broker.produce_handler import ProduceHandler
from kraft.broker.replica_moves import handle_alter_replica_log_dirs
from kraft.broker.write_txn_markers_handler import WriteTxnMarkersHandler
from kraft.broker.lifecycle import SUPPORTED_FEATURES as BROKER_SUPPORTED_FEATURES
from kraft.errors import InvalidRequestError, KraftError
from kraft.protocol import (AlterReplicaLogDirsRequest, ApiVersionsRequest, ApiVersionsResponse, DeleteRecordsRequest, DescribeLogDirsRequest,
                            DescribeProducersRequest,
                            DescribeTopicPartitionsRequest, FetchRequest, InitProducerIdRequest, ListOffsetsRequest,
                            MetadataRequest, OffsetForLeaderEpochRequest, ProduceRequest, WriteTxnMarkersRequest,
                            api_versions_response, unsupported_api_versions_response)

log = logging.getLogger("kraft.broker.handlers")

#: API key -> highest version this broker answers with the semantics it has.
BROKER_MAX_VERSIONS = {0: 11, 1: 17, 2: 10, 3: 12, 18: 4, 21: 2, 22: 5, 23: 4, 27: 1, 34: 2, 35: 4, 61: 0, 75: 0}
#: The classic group coordinator's APIs (served by ``groups``, which the server layer attaches):
#: OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, Heartbeat, LeaveGroup, SyncGroup,
#: DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, TxnOffsetCommit (v5 is KIP-890 part 2); and KIP-848's ConsumerGroupHeartbeat
#: and ConsumerGroupDescribe (librdkafka's group.protocol=consumer needs v1 of the heartbeat).
#: librdkafka infers lz4/zstd support
#: (broker >= 0.9/2.1) from FindCoordinator and friends being advertised.
GROUP_MAX_VERSIONS = {8: 9, 9: 9, 10: 6, 11: 9, 12: 4, 13: 5, 14: 5, 15: 5, 16: 5, 42: 2, 47: 0,
                      68: 1, 69: 0, 28: 4}
BROKER_MAX_VERSIONS.update(GROUP_MAX_VERSIONS)
#: The transaction coordinator's APIs (served by ``transactions``, attached by the server layer):
#: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions; and
#: TxnOffsetCommit, which the group coordinator serves. EndTxn and TxnOffsetCommit stop at v4:
#: v5 means KIP-890 part 2 (an epoch bump per transaction, transaction.version 2), not done.
TXN_MAX_VERSIONS = {24: 5, 25: 4, 26: 4, 65: 0, 66: 2}
BROKER_MAX_VERSIONS.update(TXN_MAX_VERSIONS)
#: SaslHandshake, SaslAuthenticate: answered by the network layer (kraft.server.sasl) before any
#: handler, on every listener as Kafka advertises them (ILLEGAL_SASL_STATE where no SASL runs).
BROKER_MAX_VERSIONS.update({17: 1, 36: 2})
BROKER_APIS = frozenset(BROKER_MAX_VERSIONS)
#: KIP-714 client metrics, advertised only when the node has a ``ClientTelemetry`` (``telemetry``)
TELEMETRY_APIS = frozenset({71, 72})
GROUP_APIS = frozenset(GROUP_MAX_VERSIONS)
TXN_APIS = frozenset(TXN_MAX_VERSIONS)


#: Features this broker build supports, as ApiVersions v3+ reports them (kraft.version: KIP-853).
SUPPORTED_FEATURES = {**BROKER_SUPPORTED_FEATURES, "kraft.version": (0, 1)}


def broker_api_versions(state: BrokerState, apis) -> ApiVersionsResponse:
    """The broker's ApiVersions answer: ``apis`` at ``BROKER_MAX_VERSIONS`` and, from v3 (tagged
    fields), the supported feature ranges and the finalized levels of its metadata image with
    the image's offset as their epoch, as Kafka's brokers answer (clients such as the Java admin
    read them for DescribeFeatures)."""
    R = ApiVersionsResponse
    resp = api_versions_response(None, only=apis, max_versions=BROKER_MAX_VERSIONS)
    resp.supported_features = [R.SupportedFeatureKey(name=n, min_version=lo, max_version=hi)
                               for n, (lo, hi) in sorted(SUPPORTED_FEATURES.items())]
    resp.finalized_features = [R.FinalizedFeatureKey(name=n, max_version_level=level, min_version_level=level)
                               for n, level in sorted(state.image.features.finalized_versions.items())]
    resp.finalized_features_epoch = state.metadata_offset
    return resp


class BrokerHandlers:
    def __init__(self, state: BrokerState, *, clock_ms=None, executor=None, fetch_producer_id_block=None,
                 fetch_session_cache_slots: int = DEFAULT_CACHE_SLOTS):
        self.state = state
        self.fetch = FetchHandler(state, on_high_watermark=self.on_high_watermark, clock_ms=clock_ms,
                                  session_cache_slots=fetch_session_cache_slots)
        self.produce = ProduceHandler(state, on_append=self.fetch.wake, clock_ms=clock_ms, executor=executor)
        # Without a controller connection the ids come from a local, uncoordinated source.
        self.delete_records = DeleteRecordsHandler(state, self.fetch.wake)
        #: transaction markers; its ``txn_marker_written`` hook is the group coordinator's to set
        self.write_txn_markers = WriteTxnMarkersHandler(state, self.produce, on_append=self.fetch.wake,
                                                        clock_ms=clock_ms)
        self.init_producer_id = InitProducerIdHandler(fetch_producer_id_block or local_block_source(state.broker_id))
        #: the group coordinator (``kraft.server.group_driver.GroupDriver``), attached by the node
        self.groups = None
        #: the transaction coordinator (``kraft.server.txn_driver.TxnDriver``), attached by the node
        self.transactions = None
        #: KIP-714 client metrics (``kraft.server.client_telemetry.ClientTelemetry``) or None
        self.telemetry = None

    def advertised(self, apis) -> frozenset:
        """``apis`` plus the telemetry APIs when this node takes client metrics."""
        return frozenset(apis) | (TELEMETRY_APIS if self.telemetry is not None else frozenset())

    def on_high_watermark(self, plog) -> None:
        """A follower's fetch moved ``plog``'s HW: acks=all waits and consumer fetches look again."""
        self.produce.on_high_watermark(plog)
        self.fetch.wake(plog)

    def close(self) -> None:
        """Before the logs close: stop validating and write producer-state snapshots (so a
        clean restart replays nothing)."""
        if self.groups is not None:
            self.groups.close()
        if self.transactions is not None:
            self.transactions.close()
        self.produce.close()
        try:
            self.state.producer_states.write_snapshots()
        except KraftError as exc:
            log.error("broker %d: writing producer snapshots: %s", self.state.broker_id, exc)

    def on_flushed(self, plog, offset: int) -> None:
        """On the loop thread: a partition log is durable below ``offset``."""
        self.produce.on_flushed(plog, offset)

    def handle(self, ctx, request):
        version = ctx.header.api_version
        kind = type(request)
        if kind is ProduceRequest:
            return self.produce.handle(request, version, ctx.listener)
        if kind is FetchRequest:
            return self.fetch.handle(request, version, ctx.listener)
        if kind is MetadataRequest:
            return handle_metadata(self.state, request, version, ctx.listener)
        if kind is ListOffsetsRequest:
            return handle_list_offsets(self.state, request, version)
        if kind is OffsetForLeaderEpochRequest:
            return handle_offsets_for_leader_epoch(self.state, request, version)
        if kind is InitProducerIdRequest:
            if request.transactional_id is not None and self.transactions is not None:
                return self.transactions.init_producer_id(request, version)
            return self.init_producer_id.handle(request, version)
        if kind is DescribeLogDirsRequest:
            return handle_describe_log_dirs(self.state, request, version)
        if kind is AlterReplicaLogDirsRequest:
            return handle_alter_replica_log_dirs(self.state, request, version)
        if kind is DescribeTopicPartitionsRequest:
            return handle_describe_topic_partitions(self.state, request, version)
        if kind is DeleteRecordsRequest:
            return self.delete_records.handle(request, version)
        if kind is WriteTxnMarkersRequest:
            return self.write_txn_markers.handle(request, version)
        if kind is DescribeProducersRequest:
            return handle_describe_producers(self.state, request, version)
        if request.API_KEY in TELEMETRY_APIS and self.telemetry is not None:
            if request.API_KEY == 71:
                return self.telemetry.get_subscriptions(request, ctx.header.client_id)
            return self.telemetry.push(request, ctx.header.client_id)
        if request.API_KEY in TXN_APIS and self.transactions is not None:
            return self.transactions.handle(ctx, request)
        if request.API_KEY in GROUP_APIS and self.groups is not None:
            return self.groups.handle(ctx, request)
        if kind is ApiVersionsRequest:
            if not ApiVersionsRequest.supports(version):
                return unsupported_api_versions_response()
            return broker_api_versions(self.state, self.advertised(BROKER_APIS))
        raise InvalidRequestError(f"{kind.__name__} is not served on a broker listener")
