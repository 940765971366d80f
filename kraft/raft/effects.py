"""Effects: what the Raft core asks its driver to do, in order.

The core never performs I/O; every step queues effects and ``RaftCore.poll_effects()``
hands them out as a :class:`Ready`. The I/O contract for executing them is at the top of
``kraft.raft.core``. Pure values only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kraft.raft.election import ElectionState, LeaderAndEpoch
from kraft.types import OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``request`` to node ``destination``; deliver its answer as
    ``InboundResponse(destination, correlation_id, response)``. Best effort: the network
    may drop, delay, reorder or duplicate; the core times requests out itself.

    ``after_flushed``: the request claims the log durable below this offset (a follower's
    next Fetch, decided while its flush runs), so it must not leave before ``on_flushed``
    reports at least that much; -1: at once. A driver may prepare it meanwhile, so it
    leaves the moment the flush completes rather than after the core has heard of it."""

    destination: int
    correlation_id: int
    request: Any
    after_flushed: int = -1


@dataclass(frozen=True, slots=True)
class Respond:
    """Answer the inbound request whose handle is ``handle``."""

    handle: Any
    response: Any


@dataclass(frozen=True, slots=True)
class Flush:
    """Make the log durable up to ``up_to`` (exclusive), then call ``core.on_flushed``.
    Several flushes may share one fsync (group commit); report the largest offset done."""

    up_to: int


@dataclass(frozen=True, slots=True)
class PersistElection:
    """Durably store ``state`` (quorum-state) before executing any later effect."""

    state: ElectionState


@dataclass(frozen=True, slots=True)
class Commit:
    """The high watermark is now ``up_to``: deliver committed batches below it to the
    listener (``ListenerCursor.on_commit`` does this)."""

    up_to: int


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """The log now starts at snapshot ``snapshot_id``: the listener must load it before any
    later commit (``ListenerCursor.on_load_snapshot``)."""

    snapshot_id: OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """Leadership changed. For our own leadership ``epoch_start_offset`` is the offset of
    the epoch's LeaderChange record; listeners hear of it once they have read past it."""

    leader_and_epoch: LeaderAndEpoch
    epoch_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class Append:
    """Informational: the core appended [base_offset, last_offset] to the log (already
    done through the log port). Drivers may ignore it; metrics and tests use it."""

    base_offset: int
    last_offset: int
    epoch: int
    as_leader: bool


@dataclass(slots=True)
class Ready:
    """Effects to execute in order, and the time at which ``tick`` must next be called."""

    effects: list = field(default_factory=list)
    next_deadline_ms: int = 0
