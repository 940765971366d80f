"""kraft.raft: the sans-I/O Raft core of the KRaft metadata quorum.

KIP-595 with KIP-996 pre-vote, check-quorum and snapshots, as a deterministic state
machine (:class:`RaftCore`): messages, ticks, proposals and flush completions in; effects
out. The I/O contract is in ``kraft.raft.core``; the log port in ``kraft.raft.log_port``;
the listener API in ``kraft.raft.listener``. Nothing in this package performs I/O, reads
the clock or draws random numbers on its own.
"""

from kraft.raft.config import RaftConfig
from kraft.raft.core import RaftCore
from kraft.raft.effects import (
    Append,
    Commit,
    Flush,
    LeaderChange,
    LoadSnapshot,
    PersistElection,
    Ready,
    Respond,
    Send,
)
from kraft.raft.election import ElectionState, LeaderAndEpoch
from kraft.raft.listener import ListenerCursor, RaftListener, SnapshotView
from kraft.raft.log_port import RawSnapshotReader, RawSnapshotWriter, ReplicatedLog
from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    InboundRequest,
    InboundResponse,
    OffsetAndEpoch,
    ReplicaDescription,
    RequestFailed,
    VoteRequest,
    VoteResponse,
)
from kraft.raft.quorum_state import IllegalTransitionError, QuorumState
from kraft.raft.snapshot import SnapshotWriter
from kraft.raft.voters import ReplicaKey, VoterSet, VoterSetHistory

__all__ = [
    "Append", "BeginQuorumEpochRequest", "BeginQuorumEpochResponse", "Commit",
    "DescribeQuorumRequest", "DescribeQuorumResponse", "ElectionState", "EndQuorumEpochRequest",
    "EndQuorumEpochResponse", "EpochEndOffset", "FetchRequest", "FetchResponse",
    "FetchSnapshotRequest", "FetchSnapshotResponse", "Flush", "IllegalTransitionError",
    "InboundRequest", "InboundResponse", "LeaderAndEpoch", "LeaderChange", "ListenerCursor",
    "LoadSnapshot", "OffsetAndEpoch", "PersistElection", "QuorumState", "RaftConfig", "RaftCore",
    "RaftListener", "RawSnapshotReader", "RawSnapshotWriter", "Ready", "ReplicaDescription",
    "ReplicaKey", "ReplicatedLog", "RequestFailed", "Respond", "Send", "SnapshotView",
    "SnapshotWriter", "VoteRequest", "VoteResponse", "VoterSet", "VoterSetHistory",
]
