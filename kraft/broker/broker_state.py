"""What every client request handler of a broker reads: this broker's id, the current
``MetadataImage`` (replaced whole on each change, never mutated), the partition logs, the
size limits, and the rules that decide who may serve a partition (leader and leader-epoch
checks, Kafka's ``Partition.checkCurrentLeaderEpoch``) and how far consumers may read
(the high watermark). No I/O and no asyncio; the server layer owns the loop.

High watermark: a partition with no other replica has HW = log end offset (RF 1 is exactly
Kafka's behaviour); with other replicas ``replication`` (``LeaderReplication``) moves it as
followers fetch (HW = min LEO over the maximal ISR, which is the log end while the ISR is
this leader alone and nobody is joining). ``producer_states`` holds each
partition's idempotent-producer table; ``topic_config(topic)`` is the topic's effective configs
in the current image (``topic_configs``), so what a config change says applies from the image
that carries it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.broker.leader_replication import LeaderReplication
from kraft.broker.replication_quotas import FOLLOWER, LEADER, ReplicationQuota
from kraft.broker.producer_states import ProducerStates
from kraft.broker.topic_configs import TopicConfig, TopicConfigs
from kraft.errors import ErrorCode
from kraft.metadata.image import EMPTY_IMAGE, MetadataImage

#: Kafka's ``message.max.bytes`` default (1 MiB + record batch overhead).
DEFAULT_MESSAGE_MAX_BYTES = 1048588
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
NONE = int(ErrorCode.NONE)


@dataclass
class BrokerLimits:
    """What ``server.properties`` says (the static layer under the dynamic configs)."""

    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    #: Decompressed bytes one Produce request may inflate to (a bound on untrusted work).
    max_decompressed_bytes: int = 64 * 1024 * 1024
    #: ``log.message.timestamp.type`` (a topic's ``message.timestamp.type`` overrides it).
    timestamp_type: str = "CreateTime"
    #: ``min.insync.replicas`` (a topic's own setting overrides it).
    min_insync_replicas: int = 1


def _always() -> bool:
    return True


class BrokerState:
    def __init__(self, broker_id: int, logs, *, cluster_id: str | None = None, limits: BrokerLimits | None = None,
                 controller_id: int | None = None, static_configs: dict | None = None):
        """``static_configs``: the broker configs ``server.properties`` sets, by Kafka name."""
        self.broker_id = broker_id
        self.logs = logs
        self.cluster_id = cluster_id
        self.limits = lim = limits or BrokerLimits()
        self.topic_configs = TopicConfigs(broker_id, {
            "message.max.bytes": lim.message_max_bytes, "log.message.timestamp.type": lim.timestamp_type,
            "min.insync.replicas": lim.min_insync_replicas, **(static_configs or {})})
        #: What Metadata answers as controller id (Kafka's KRaft brokers name an alive broker).
        self.controller_id = broker_id if controller_id is None else controller_id
        self.image: MetadataImage = EMPTY_IMAGE
        #: listener name -> (host, port) this broker registers with (set by the server layer)
        self.own_endpoints: dict[str, tuple[str, int]] = {}
        #: the metadata log offset ``image`` contains (-1: a static image); ApiVersions' feature epoch
        self.metadata_offset = -1
        #: False while the broker may not lead for clients (not registered, fenced, lease lost:
        #: ``kraft.broker.lifecycle``); the server layer replaces it. True for a static image.
        self.is_serving = _always
        self.replication = LeaderReplication(broker_id, min_isr_of=self.min_insync_replicas)
        self.producer_states = ProducerStates()
        #: replication throttles (the image's configs, kraft.broker.replication_quotas)
        self.leader_quota = ReplicationQuota(LEADER, broker_id)
        self.follower_quota = ReplicationQuota(FOLLOWER, broker_id)
        #: KIP-392 (``replica.selector.class``): "rack" sends a consumer naming its rack to an
        #: in-sync replica there (``preferred_read_replica``); None keeps consumers on the leader
        self.replica_selector: str | None = None

    # --- partitions ------------------------------------------------------------------------
    def partition(self, topic: str, partition: int):
        """(TopicImage, PartitionRegistration) or (topic or None, None)."""
        t = self.image.topics.by_name.get(topic)
        if t is None:
            return None, None
        return t, t.partitions.get(partition)

    def leader_error(self, reg, current_leader_epoch: int = -1) -> int:
        """NONE if this broker leads ``reg`` at ``current_leader_epoch`` (-1: any epoch) and
        has its log; else the error Kafka answers."""
        if not self.is_serving():
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)  # what Kafka's clients retry after a refresh
        if current_leader_epoch >= 0:
            if current_leader_epoch < reg.leader_epoch:
                return int(ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > reg.leader_epoch:
                return int(ErrorCode.UNKNOWN_LEADER_EPOCH)
        if reg.leader != self.broker_id:
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return NONE

    def local_leader(self, topic: str, partition: int, current_leader_epoch: int = -1, *,
                     any_replica: bool = False):
        """(error code, PartitionLog or None, registration or None) for a leader-only request.
        ``any_replica``: for a consumer's v11+ Fetch, which a follower may answer too (KIP-392):
        the epoch is checked as the leader checks it, and a follower must hold the partition's
        current log."""
        t, reg = self.partition(topic, partition)
        if reg is None:
            return int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None, None
        code = self.leader_error(reg, current_leader_epoch)
        if any_replica and code == int(ErrorCode.NOT_LEADER_OR_FOLLOWER) and self.is_serving() and \
                self.broker_id in reg.replicas:
            code = NONE
        if code != NONE:
            return code, None, reg
        plog = self.logs.get(topic, partition)
        if plog is None and self.logs.is_offline(topic, partition):
            return int(ErrorCode.KAFKA_STORAGE_ERROR), None, reg  # its log directory failed (KIP-858)
        # The topic id by identity first (UUID's == is Python code; this runs per partition of
        # every Produce and Fetch).
        if plog is None or (plog.topic_id is not t.id and plog.topic_id != t.id):
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER), None, reg
        return NONE, plog, reg

    def preferred_read_replica(self, plog, reg, rack: str, fetch_offset: int, listener: str | None) -> int:
        """KIP-392's RackAwareReplicaSelector on the leader (Kafka's ``findPreferredReadReplica``):
        among the leader and the in-sync followers holding ``fetch_offset``, those in the
        consumer's ``rack``; the leader if it is one of them (or none is), else the most caught
        up (highest log end, then the most recently caught up). -1: the leader (no redirect)."""
        if self.replica_selector != "rack" or not rack or reg.leader != self.broker_id:
            return -1
        brokers = self.image.cluster.brokers
        own = brokers.get(self.broker_id)
        if own is not None and own.rack == rack:
            return -1
        st = self.replication.states.get((plog.topic, plog.partition))
        if st is None:
            return -1
        now = self.replication.clock_ms()
        best, best_key = -1, None
        for r in reg.isr:
            f = st.followers.get(r)
            b = brokers.get(r)
            if f is None or b is None or b.rack != rack or b.fenced:
                continue
            if not (f.log_start_offset <= fetch_offset <= f.log_end_offset):
                continue
            if listener is not None and self.leader_endpoint(r, listener) is None:
                continue  # Kafka skips a replica without an endpoint on the client's listener
            key = (f.log_end_offset, -(now - f.last_caught_up_ms))
            if best_key is None or key > best_key:
                best, best_key = r, key
        return best

    def advance_high_watermark(self, plog, reg) -> int:
        """Kafka's HW rule (see the module doc). Only a partition with no other replica skips
        the leader state: with other replicas an ISR of this leader alone may be growing (an
        expansion in flight, or committed and not in this image yet), and the member joining
        must hold everything below the HW (KIP-497's maximal ISR)."""
        if reg is None or reg.leader != self.broker_id:
            return plog.high_watermark
        if tuple(reg.replicas) == (self.broker_id,):
            plog.high_watermark = plog.log.end_offset
            return plog.high_watermark
        return self.replication.high_watermark(plog, reg)

    def leader_endpoint(self, broker_id: int, listener: str):
        """(host, port, rack) of ``broker_id`` on ``listener`` if registered there, else None."""
        b = self.image.cluster.brokers.get(broker_id)
        if b is None:
            return None
        for e in b.listeners:
            if e.name == listener:
                return e.host, e.port, b.rack
        return None

    def topic_config(self, topic_name: str) -> TopicConfig:
        return self.topic_configs.get(self.image, topic_name)

    def min_insync_replicas(self, topic_name: str) -> int:
        """The topic's effective ``min.insync.replicas`` (Kafka's default 1)."""
        return self.topic_config(topic_name).min_insync_replicas
