"""Voter changes on the leader: AddRaftVoter (80), RemoveRaftVoter (81), UpdateRaftVoter (82)
with Kafka's rules (KIP-853; Kafka's AddVoterHandler, RemoveVoterHandler, UpdateVoterHandler).

One change at a time: a change is refused with REQUEST_TIMED_OUT while another is pending,
before the leader has a high watermark (it has not yet fenced earlier leaders' changes), or
while the latest Voters record is uncommitted. Only a caught-up observer with the exact
replica key asked for is added (Kafka asks the new voter for its ApiVersions first; every
kraft node supports kraft.version 0-1, so that round trip is skipped). A change is one
Voters record appended through the leader's log: it acts at once (``ControlState``) and the
request is answered when it commits, or REQUEST_TIMED_OUT when the operation expires, or
NOT_LEADER_OR_FOLLOWER if leadership ends first. A leader that removed itself resigns once
that commits (``RaftCore``). No I/O; answers go out as ``Respond`` effects.
"""

from __future__ import annotations

from typing import Callable

from kraft.errors import ErrorCode
from kraft.protocol import (AddRaftVoterResponse, ReassignRaftVotersResponse, RemoveRaftVoterResponse,
                            UpdateRaftVoterResponse)
from kraft.raft.config import RaftConfig
from kraft.raft.control_state import membership_control_batch
from kraft.raft.effects import Respond
from kraft.raft.leader import LeaderState
from kraft.raft.local_log import LocalLog
from kraft.raft.quorum_state import QuorumState
from kraft.raft.rpcs import directory_bytes
from kraft.raft.validation import cluster_ok, leader_only_error
from kraft.types import Endpoint, ReplicaKey, uuid_text


def replica_text(key: ReplicaKey) -> str:
    """``1@<directory id in base64>`` for an operator's error message: Kafka's form of a Uuid, as
    ``describe --status`` prints it, instead of a Python bytes repr."""
    if key.directory_id is None:
        return str(key.id)
    return f"{key.id}@{uuid_text(key.directory_id)}"

NONE = ErrorCode.NONE
NO_DEADLINE = 1 << 62
KEEP = object()  # a voter change carries the reassignment target (if any) forward


class PendingChange:
    """An AddRaftVoter or RemoveRaftVoter whose Voters record waits to commit."""

    __slots__ = ("handle", "kind", "key", "last_offset", "deadline")

    def __init__(self, handle, kind: str, key: ReplicaKey, last_offset: int, deadline: int):
        self.handle = handle
        self.kind = kind
        self.key = key
        self.last_offset = last_offset
        self.deadline = deadline


def _answer(kind: str, code: int, message: str | None = None):
    if kind == "add":
        return AddRaftVoterResponse(error_code=int(code), error_message=message)
    if kind == "reassign":
        return ReassignRaftVotersResponse(error_code=int(code), error_message=message)
    return RemoveRaftVoterResponse(error_code=int(code), error_message=message)


class Membership:
    def __init__(self, local: ReplicaKey, quorum: QuorumState, local_log: LocalLog, config: RaftConfig,
                 emit: Callable[[object], None], drain: Callable[[LeaderState, int], None],
                 on_appended: Callable[[LeaderState, int], None]):
        self.local = local
        self.quorum = quorum
        self.local_log = local_log
        self.control = local_log.control
        self.config = config
        self._emit = emit
        self._drain = drain  # proposals waiting in the accumulator go to the log first
        self._on_appended = on_appended  # the core re-counts majorities over the new set
        self.pending: PendingChange | None = None
        self.pending_epoch = -1

    # ------------------------------------------------------------ common checks
    def _leader(self):
        s = self.quorum.state
        return s if isinstance(s, LeaderState) and not s.resign_requested else None

    def _busy(self, s: LeaderState, now: int) -> str | None:
        """Kafka's order of REQUEST_TIMED_OUT / UNSUPPORTED_VERSION checks; a message or None."""
        self.expire(now)
        if self.pending is not None:
            return "timed out waiting for the leader to handle the previous voter change"
        if s.high_watermark < 0:
            return "timed out waiting for the leader to establish its high watermark"
        if self.control.kraft_version < 1:
            return "unsupported"
        if self.control.voters.last_offset() >= s.high_watermark:
            return (f"timed out waiting for the latest voter change at {self.control.voters.last_offset()} "
                    f"to commit (high watermark {s.high_watermark})")
        return None

    def _append(self, s: LeaderState, voters, now: int, target=KEEP) -> int:
        """Append the Voters record of ``voters`` (with the reassignment ``target``: by default
        the one in force, so a change made during a reassignment does not end it); its offset."""
        self._drain(s, now)
        offset = self.local_log.log.end_offset()
        if target is KEEP:
            target = self.control.target
        self.local_log.append_as_leader(membership_control_batch(voters, None, offset, s.epoch, now, target),
                                        s.epoch)
        s.start_appending_at(self.local_log.log.end_offset())
        self.local_log.request_flush()
        self._on_appended(s, now)
        return offset

    def _listeners_ok(self, listeners) -> bool:
        return any(lst.name == self.config.controller_listener_name for lst in listeners)

    # ------------------------------------------------------------ AddRaftVoter
    def handle_add(self, handle, r, now: int) -> None:
        kind = "add"
        if not cluster_ok(self.config.cluster_id, r.cluster_id):
            return self._respond(handle, kind, ErrorCode.INCONSISTENT_CLUSTER_ID)
        s = self._leader()
        if s is None:
            return self._respond(handle, kind, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        key = ReplicaKey(r.voter_id, directory_bytes(r.voter_directory_id))
        if r.voter_id < 0 or key.directory_id is None or not self._listeners_ok(r.listeners):
            return self._respond(handle, kind, ErrorCode.INVALID_REQUEST,
                                 "a voter needs an id, a directory id and a "
                                 f"{self.config.controller_listener_name} listener")
        busy = self._busy(s, now)
        if busy == "unsupported":
            return self._respond(handle, kind, ErrorCode.UNSUPPORTED_VERSION,
                                 "the quorum is static (kraft.version 0): voters cannot be added")
        if busy is not None:
            return self._respond(handle, kind, ErrorCode.REQUEST_TIMED_OUT, busy)
        voters = self.control.voters.last()
        if key.id in voters.ids:
            return self._respond(handle, kind, ErrorCode.DUPLICATE_VOTER,
                                 f"voter id {key.id} is already one of the voters {sorted(voters.ids)}")
        p = s.progress.observers.get(key)
        if p is None or p.last_caught_up_ms < now - self.config.fetch_timeout_ms:
            return self._respond(handle, kind, ErrorCode.REQUEST_TIMED_OUT,
                                 f"replica {key.id} is not a caught-up observer with that directory id")
        endpoints = tuple(Endpoint(lst.name, lst.host, lst.port) for lst in r.listeners)
        offset = self._append(s, voters.with_voter(key, endpoints), now)
        timeout = r.timeout_ms if r.timeout_ms > 0 else self.config.request_timeout_ms
        if getattr(r, "ack_when_committed", True):
            self._park(s, PendingChange(handle, kind, key, offset, now + timeout))
        else:
            self._park(s, PendingChange(None, kind, key, offset, now + timeout))
            self._respond(handle, kind, NONE)

    # ------------------------------------------------------------ RemoveRaftVoter
    def handle_remove(self, handle, r, now: int) -> None:
        kind = "remove"
        if not cluster_ok(self.config.cluster_id, r.cluster_id):
            return self._respond(handle, kind, ErrorCode.INCONSISTENT_CLUSTER_ID)
        s = self._leader()
        if s is None:
            return self._respond(handle, kind, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        busy = self._busy(s, now)
        if busy == "unsupported":
            return self._respond(handle, kind, ErrorCode.UNSUPPORTED_VERSION,
                                 "the quorum is static (kraft.version 0): voters cannot be removed")
        if busy is not None:
            return self._respond(handle, kind, ErrorCode.REQUEST_TIMED_OUT, busy)
        key = ReplicaKey(r.voter_id, directory_bytes(r.voter_directory_id))
        voters = self.control.voters.last()
        current = voters.key(key.id)
        if current is None or current != key or len(voters) == 1:
            return self._respond(handle, kind, ErrorCode.VOTER_NOT_FOUND,
                                 f"cannot remove {replica_text(key)} from the voters "
                                 f"{', '.join(replica_text(k) for k in voters.keys())}")
        offset = self._append(s, voters.without_voter(key), now)
        self._park(s, PendingChange(handle, kind, key, offset, now + self.config.request_timeout_ms))

    # ------------------------------------------------------------ UpdateRaftVoter
    def handle_update(self, r, now: int):
        q = self.quorum
        W = UpdateRaftVoterResponse

        def answer(code):
            return W(error_code=int(code), current_leader=W.CurrentLeader(leader_id=q.leader_id, leader_epoch=q.epoch))
        if not cluster_ok(self.config.cluster_id, r.cluster_id):
            return answer(ErrorCode.INCONSISTENT_CLUSTER_ID)
        err = leader_only_error(q.state, r.current_leader_epoch)
        if err is not None:
            return answer(err)
        s = q.state
        busy = self._busy(s, now)
        if busy == "unsupported":
            return answer(ErrorCode.UNSUPPORTED_VERSION)
        if busy is not None:
            return answer(ErrorCode.REQUEST_TIMED_OUT)
        feature = r.kraft_version_feature
        if not self._listeners_ok(r.listeners) or not (
                feature.min_supported_version <= self.control.kraft_version <= feature.max_supported_version):
            return answer(ErrorCode.INVALID_REQUEST)
        key = ReplicaKey(r.voter_id, directory_bytes(r.voter_directory_id))
        voters = self.control.voters.last()
        current = voters.key(key.id)
        if current is None or current != key:
            return answer(ErrorCode.VOTER_NOT_FOUND)
        endpoints = tuple(Endpoint(lst.name, lst.host, lst.port) for lst in r.listeners)
        if voters.endpoints(key.id) != endpoints:
            self._append(s, voters.with_endpoints(key.id, endpoints), now)
        return answer(NONE)

    # ------------------------------------------------------------ the leader's own entry
    def refresh_own_endpoints(self, s: LeaderState, local_endpoints: tuple, now: int) -> None:
        """A leader whose Voters-record entry lacks its listeners (added by a reassignment that
        named only its id, and elected before its UpdateRaftVoter) writes them itself, as it
        would accept them from a follower: otherwise nobody could learn its address."""
        if not local_endpoints or self.control.kraft_version < 1 or s.resign_requested:
            return
        voters = self.control.voters.last()
        if voters.key(self.local.id) != self.local or voters.endpoints(self.local.id) == tuple(local_endpoints):
            return
        if self.pending is None and 0 <= self.control.voters.last_offset() < s.high_watermark:
            self._append(s, voters.with_endpoints(self.local.id, tuple(local_endpoints)), now)

    # ------------------------------------------------------------ completion
    def _park(self, s: LeaderState, change: PendingChange) -> None:
        self.pending = change
        self.pending_epoch = s.epoch

    def on_high_watermark(self, hw: int) -> None:
        p = self.pending
        if p is not None and hw > p.last_offset:
            self.pending = None
            if p.handle is not None:
                self._respond(p.handle, p.kind, NONE)

    def expire(self, now: int) -> int:
        """Answer a change whose time ran out; the deadline of the one pending."""
        p = self.pending
        if p is None:
            return NO_DEADLINE
        s = self.quorum.state
        if not isinstance(s, LeaderState) or s.epoch != self.pending_epoch:
            self.pending = None
            if p.handle is not None:
                self._respond(p.handle, p.kind, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return NO_DEADLINE
        if now >= p.deadline:
            self.pending = None
            if p.handle is not None:
                self._respond(p.handle, p.kind, ErrorCode.REQUEST_TIMED_OUT,
                              f"the voter change at {p.last_offset} did not commit in time")
            return NO_DEADLINE
        return p.deadline

    def _respond(self, handle, kind: str, code: int, message: str | None = None) -> None:
        self._emit(Respond(handle, _answer(kind, code, message)))
