"""The Raft core's message types: KRaft's RPCs as plain frozen dataclasses.

Each class mirrors one Kafka request or response for the single metadata partition
(``__cluster_metadata-0``), flattened: the server layer maps them 1:1 to the wire schemas
in ``kraft.protocol`` (Topics[Partitions[...]] wrapping, tagged fields, -1 sentinels).
Optional structs that Kafka encodes as ``-1`` sentinels (DivergingEpoch, SnapshotId,
CurrentLeader) are ``None`` here when absent. Error codes are ``kraft.errors.ErrorCode``
values; a response carries one error code (top-level and partition-level collapsed, the
server splits them). Record data travels as raw RecordBatch v2 bytes.

Envelopes say where a message came from and how to answer it: an :class:`InboundRequest`
carries an opaque ``handle`` that the core returns in a ``Respond`` effect, possibly much
later (long-poll Fetch); an :class:`InboundResponse` carries the ``correlation_id`` of the
``Send`` it answers. Nothing here does I/O or validation beyond construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kraft.errors import ErrorCode
from kraft.types import OffsetAndEpoch  # noqa: F401  (part of the core's message vocabulary)

NO_LEADER = -1
NONE = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """Fetch response DivergingEpoch: the follower must truncate to ``end_offset``."""

    epoch: int
    end_offset: int


# --- Vote (52) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    candidate_epoch: int  # for a pre-vote: the prospective's current epoch, not bumped
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False  # KIP-996 (Vote v2)
    candidate_directory_id: bytes | None = None
    voter_id: int = -1
    voter_directory_id: bytes | None = None
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool = False


# --- BeginQuorumEpoch (53) / EndQuorumEpoch (54) ------------------------------------------


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    voter_id: int = -1
    voter_directory_id: bytes | None = None
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()  # most up-to-date first
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: int
    leader_id: int
    leader_epoch: int


# --- Fetch (1) -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int  # ReplicaState.ReplicaId; -1 for a non-replica consumer
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0
    max_bytes: int = 8 * 1024 * 1024
    replica_epoch: int = -1
    replica_directory_id: bytes | None = None
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: int
    leader_id: int  # CurrentLeader.LeaderId
    leader_epoch: int  # CurrentLeader.LeaderEpoch
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: OffsetAndEpoch | None = None


# --- FetchSnapshot (59) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int = 8 * 1024 * 1024
    replica_directory_id: bytes | None = None
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    snapshot_id: OffsetAndEpoch | None = None
    size: int = -1
    position: int = -1
    unaligned_records: bytes = b""


# --- DescribeQuorum (55) ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    pass


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    replica_id: int
    replica_directory_id: bytes | None
    log_end_offset: int  # -1 when unknown
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int = -1
    current_voters: tuple[ReplicaDescription, ...] = ()
    observers: tuple[ReplicaDescription, ...] = ()


REQUEST_TYPES = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                 FetchSnapshotRequest, DescribeQuorumRequest)
RESPONSE_TYPES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse,
                  FetchSnapshotResponse, DescribeQuorumResponse)


# --- envelopes ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InboundRequest:
    """A request from ``source``; answer it with ``Respond(handle, response)``."""

    source: int
    body: Any
    handle: Any = None


@dataclass(frozen=True, slots=True)
class InboundResponse:
    """The answer to our ``Send`` with ``correlation_id``. Late, duplicated or unexpected
    responses are fine: the core ignores any it is no longer waiting for."""

    source: int
    correlation_id: int
    body: Any


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """The transport could not deliver request ``correlation_id`` to ``destination`` (or the
    connection broke). Optional: the core also times requests out on its own.
    ``peer_gone``: the connection was closed, reset or refused by the peer (not a timeout)."""

    destination: int
    correlation_id: int
    peer_gone: bool = False
