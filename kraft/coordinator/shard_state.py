"""What a group shard's parts share: its configuration, a committed offset, an append to its
partition (records + what to do when durable or failed), and Kafka's mapping of a failed write
to the error a group client understands. No I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.errors import ErrorCode as E

MAX_GROUP_ID_CHARS = 32767  # a Kafka string's int16 length


@dataclass
class GroupConfig:
    min_session_timeout_ms: int = 6000            # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000       # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000        # group.initial.rebalance.delay.ms
    max_size: int = 2**31 - 1                     # group.max.size
    offset_metadata_max_bytes: int = 4096         # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes
    new_member_join_timeout_ms: int = 5 * 60 * 1000   # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
    max_metadata_bytes: int = 1 << 20              # per member protocol metadata (hostile input bound)
    # KIP-848 consumer groups (Kafka's GroupCoordinatorConfig)
    consumer_heartbeat_interval_ms: int = 5000     # group.consumer.heartbeat.interval.ms
    consumer_session_timeout_ms: int = 45000       # group.consumer.session.timeout.ms
    consumer_rebalance_heartbeat_interval_ms: int = 100  # kraft.group.consumer.rebalance.heartbeat.interval.ms
    consumer_max_size: int = 2**31 - 1             # group.consumer.max.size
    consumer_assignors: tuple = ("uniform", "range")  # group.consumer.assignors: the first is the default
    consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy (online up/downgrade)
    #: group id -> that group's configs (GROUP config resources: consumer.session.timeout.ms,
    #: consumer.heartbeat.interval.ms), read when used so that a change applies at the next heartbeat
    group_overrides: object = None
    #: an authorizer is on: a regex subscription gets only the topics its member may DESCRIBE
    #: (Kafka 4's filterTopicDescribeAuthorizedTopics), and a member whose rights are not known
    #: yet (loaded from the log by a new coordinator) gets none until its next heartbeat
    regex_needs_describe: bool = False

    def consumer_timeouts(self, group_id: str) -> tuple[int, int]:
        """(session timeout, heartbeat interval) of a consumer group's members: the group's own
        configs where set, else the broker's."""
        found = self.group_overrides(group_id) if self.group_overrides is not None else None
        if not found:
            return self.consumer_session_timeout_ms, self.consumer_heartbeat_interval_ms
        return (int(found.get("consumer.session.timeout.ms", self.consumer_session_timeout_ms)),
                int(found.get("consumer.heartbeat.interval.ms", self.consumer_heartbeat_interval_ms)))


@dataclass
class OffsetEntry:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int


@dataclass
class Append:
    """Records for this shard's partition; ``on_durable()`` once they are committed (acks=all),
    ``on_failed(code)`` if the write fails (the code is the append's error)."""
    records: list
    on_durable: object = None
    on_failed: object = None
    replies: list = field(default_factory=list)
    #: a transactional append (TxnOffsetCommit): written as a transactional batch of this
    #: producer, alone; its offsets count once the transaction's COMMIT marker lands
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class TxnOffsets:
    """A loaded record of a transactional batch: pending until its producer's marker."""
    producer_id: int
    decoded: tuple


@dataclass(frozen=True)
class TxnMarker:
    """A loaded COMMIT/ABORT control record on the shard's partition."""
    producer_id: int
    committed: bool


def valid_group_id(group_id) -> bool:
    return bool(group_id) and len(group_id) <= MAX_GROUP_ID_CHARS



def coordinator_error(code: int) -> int:
    """Kafka's mapping of a failed write to what a group client understands."""
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    return E.UNKNOWN_SERVER_ERROR if code not in (E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR) else code


def commit_error(code: int) -> int:
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE
    return coordinator_error(code)
