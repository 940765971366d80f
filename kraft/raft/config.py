"""RaftConfig: the quorum settings the core reads, with Kafka's names and defaults.

The server builds one from ``server.properties`` (``controller.quorum.*``); tests and the
simulator build one directly. Plain data: no parsing of files, no environment, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024  # Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES
MAX_RECORDS_PER_BATCH = 10_000  # the controller's limit per atomic append
MAX_FETCH_WAIT_MS = 500  # Kafka's raft fetch max wait
MAX_FETCH_SIZE_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class RaftConfig:
    """Timeouts in milliseconds. Field names follow ``controller.quorum.<name>``."""

    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    append_linger_ms: int = 25  # controller.quorum.append.linger.ms
    # Not Kafka configs, but Kafka's constants, exposed so the simulator can shrink them.
    election_backoff_base_ms: int = 100  # KafkaRaftClient.RETRY_BACKOFF_BASE_MS
    fetch_max_wait_ms: int = MAX_FETCH_WAIT_MS
    fetch_max_bytes: int = MAX_FETCH_SIZE_BYTES
    fetch_snapshot_max_bytes: int = MAX_FETCH_SIZE_BYTES
    max_batch_size_bytes: int = MAX_BATCH_SIZE_BYTES
    max_records_per_batch: int = MAX_RECORDS_PER_BATCH
    # Not in Kafka: when only the high watermark moved, a parked follower Fetch is answered
    # this much later, so the next data (which carries the new HW anyway) usually answers it
    # and a write costs one Fetch round trip per follower instead of two.
    hw_notify_delay_ms: int = 5
    # Not in Kafka: the leader's uncommitted tail past which a driver admits no new work
    # (``kraft.raft.backlog``). Bytes: one Fetch answer, so a follower that fetches once holds
    # the whole tail and one round trip commits it. Records: five of the largest controller
    # operations (10,000 records each), enough to keep replication busy while the controller
    # computes the next ones, and what a failover may have to answer NOT_CONTROLLER for.
    max_uncommitted_bytes: int = MAX_FETCH_SIZE_BYTES
    max_uncommitted_records: int = 50_000
    cluster_id: str | None = None
    # The listener voters are reached on (controller.listener.names' first): an added voter
    # must have one (KIP-853).
    controller_listener_name: str = "CONTROLLER"

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader resigns when a majority has not fetched for this long (1.5 × fetch timeout)."""
        return self.fetch_timeout_ms * 3 // 2

    @property
    def begin_quorum_epoch_interval_ms(self) -> int:
        """How often a leader re-sends BeginQuorumEpoch to voters (Kafka: fetch timeout / 2)."""
        return self.fetch_timeout_ms // 2

    def __post_init__(self) -> None:
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms", "max_uncommitted_bytes",
                     "max_uncommitted_records"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.election_backoff_max_ms < 0 or self.retry_backoff_ms < 0 or self.append_linger_ms < 0:
            raise ValueError("backoff and linger must not be negative")
        if self.fetch_max_wait_ms >= self.request_timeout_ms:
            raise ValueError("fetch_max_wait_ms must be below request_timeout_ms (long-poll fetch)")
