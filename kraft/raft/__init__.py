"""kraft.raft: the sans-I/O Raft core of the KRaft metadata quorum.

KIP-595 with KIP-996 pre-vote, check-quorum and snapshots, as a deterministic state
machine (:class:`RaftCore`): messages, ticks, proposals and flush completions in; effects
out. The I/O contract is in ``kraft.raft.core``; the log port in ``kraft.raft.log_port``;
the listener API in ``kraft.raft.listener``. Messages are Kafka's protocol objects, built
and read with ``kraft.raft.rpcs``. Nothing in this package performs I/O, reads
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
from kraft.raft import rpcs
from kraft.raft.election import ElectionState, LeaderAndEpoch
from kraft.raft.listener import ListenerCursor, RaftListener, SnapshotView
from kraft.raft.log_port import RawSnapshotReader, RawSnapshotWriter, ReplicatedLog
from kraft.raft.envelopes import InboundRequest, InboundResponse, RequestFailed
from kraft.raft.quorum_state import IllegalTransitionError, QuorumState
from kraft.raft.snapshot import SnapshotWriter
from kraft.raft.voters import ReplicaKey, VoterSet, VoterSetHistory
from kraft.types import OffsetAndEpoch

__all__ = [
    "Append", "Commit", "ElectionState", "Flush", "IllegalTransitionError", "InboundRequest", "InboundResponse",
    "LeaderAndEpoch", "LeaderChange", "ListenerCursor", "LoadSnapshot", "OffsetAndEpoch", "PersistElection",
    "QuorumState", "RaftConfig", "RaftCore", "RaftListener", "RawSnapshotReader", "RawSnapshotWriter", "Ready",
    "ReplicaKey", "ReplicatedLog", "RequestFailed", "Respond", "Send", "SnapshotView", "SnapshotWriter",
    "VoterSet", "VoterSetHistory", "rpcs",
]
