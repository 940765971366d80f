"""RaftCore: KRaft's consensus logic (KIP-595, KIP-996 pre-vote, check-quorum, snapshots)
as a deterministic, sans-I/O state machine.

Inputs: ``step(message, now_ms)`` for inbound requests/responses, ``tick(now_ms)`` when the
deadline passes, ``propose(values, now_ms)`` on the leader, ``on_flushed(offset)`` when a
flush completed, ``resign`` and ``create_snapshot``. Outputs: effects, collected with
``poll_effects()``. The log is reached only through the synchronous log port
(``kraft.raft.log_port``); randomness is injected. This module must not import asyncio,
socket, threading, time, os or random (a test enforces it).

I/O contract (what a driver must do with ``Ready = poll_effects()``)
-------------------------------------------------------------------
1. Execute ``ready.effects`` in list order.
   * ``PersistElection(state)``: write quorum-state durably *before executing any later
     effect* (a granted vote or a leader's first message depends on it).
   * ``Send(dest, cid, request)``: send best effort; deliver the answer later as
     ``step(InboundResponse(dest, cid, response), now)``. Losing it is fine. With
     ``after_flushed >= 0`` not before the flusher has made the log durable below it
     (a follower's next Fetch, decided while its flush runs); it may leave before
     ``on_flushed`` is called for that flush, as long as that call comes before its answer
     is stepped.
   * ``Respond(handle, response)``: answer the inbound request that carried ``handle``.
   * ``Flush(up_to)``: fsync the log below ``up_to`` (may be grouped with others, may run on
     another thread), then call ``on_flushed(up_to)``. Appends and truncations already
     happened synchronously through the log port; ``Append`` effects are informational.
   * ``Commit``, ``LoadSnapshot``, ``LeaderChange``: pass to a ``ListenerCursor``.
2. Call ``tick(now)`` at or after ``ready.next_deadline_ms``, and also step messages and
   ``on_flushed`` as they come; every call may produce new effects.
3. Never call two core methods concurrently: the core is single-threaded.

What the core guarantees in return: it never reports an offset as its own beyond what was
flushed (a follower's fetch offset, a candidate's last offset, the leader's own progress
for the high watermark), never truncates below its high watermark, and never
persists an epoch lower than one it persisted before.

Layout: the core owns the public API, dispatch and the per-role poll loop, and composes
collaborators that share only the pieces they need: ``QuorumState`` (roles; the only
place they change), ``LocalLog`` (appended/flushed/committed offsets), ``Transitions``
(role changes and their consequences), ``Elections`` (Vote, Begin/EndQuorumEpoch,
DescribeQuorum and election timers), ``LeaderReplication`` and ``FollowerReplication``
(Fetch and FetchSnapshot on each side), with request checks in ``validation``. Messages are
Kafka's protocol objects, built and read in ``rpcs``; ``envelopes`` say who sent them.
"""

from __future__ import annotations

from kraft.errors import NotLeaderError
from kraft.protocol import (AddRaftVoterRequest, BeginQuorumEpochRequest, DescribeQuorumRequest,
                            EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest, ReassignRaftVotersRequest,
                            RemoveRaftVoterRequest, UpdateRaftVoterRequest, VoteRequest)
from kraft.raft.config import RaftConfig
from kraft.raft.effects import Ready, Respond
from kraft.raft.election import ElectionState, LeaderAndEpoch
from kraft.raft.elections import Elections
from kraft.raft.follower_replication import FollowerReplication
from kraft.raft.leader import LeaderState
from kraft.raft.kraft_version import upgrade_kraft_version
from kraft.raft.leader_replication import LeaderReplication
from kraft.raft.local_log import LocalLog
from kraft.raft.membership import Membership
from kraft.raft.envelopes import InboundRequest, InboundResponse, RequestFailed
from kraft.raft.quorum_state import QuorumState
from kraft.raft.reassignment import Reassignment
from kraft.raft.requests import Outbox, RequestTracker
from kraft.raft.roles import CandidateState, FollowerState, ProspectiveState, UnattachedState
from kraft.raft.snapshot import SnapshotWriter
from kraft.raft.transitions import Transitions
from kraft.raft.control_state import ControlState, membership_control_batch
from kraft.raft.voters import ReplicaKey, VoterSet
from kraft.types import OffsetAndEpoch


class RaftCore:
    """One replica of the metadata partition.

    ``voters``: the bootstrap voter set (ids or ``ReplicaKey``s). ``rng``: any object with
    ``random() -> float in [0, 1)``. ``election_state``: what quorum-state held at start
    (None for a new node). ``directory_id``: this replica's log directory id, if known.
    ``bootstrap_ids``: where an observer looks for the leader (``controller.quorum.bootstrap.
    servers``, named by ids the driver maps to addresses; Kafka uses -2, -3, ...); default:
    the voters. ``local_endpoints``: this replica's advertised listeners (``Endpoint``s); a
    voter of a dynamic quorum whose Voters-record entry differs sends UpdateRaftVoter.
    """

    def __init__(self, node_id: int, log, config: RaftConfig, voters, rng, *,
                 directory_id: bytes | None = None, election_state: ElectionState | None = None,
                 now_ms: int = 0, bootstrap_ids=(), local_endpoints=()):
        self.node_id = node_id
        self.local = ReplicaKey(node_id, directory_id)
        self.log = log
        self.config = config
        self.rng = rng
        self._effects: list = []
        emit = self._effects.append
        self._now = now_ms
        # The voter set: the bootstrap set, overridden by the Voters records of the snapshot
        # and log (KIP-853); kraft.version 0 (static quorum) while the log has none.
        self.control = ControlState(voters if isinstance(voters, VoterSet) else VoterSet(voters))
        self.control.load(log)
        self.voter_history = self.control.voters
        self.quorum = QuorumState(self.local, self.voter_history, config, rng, emit)
        self.requests = RequestTracker(config.request_timeout_ms, config.retry_backoff_ms,
                                       int(rng.random() * (1 << 30)))
        outbox = Outbox(self.requests, emit)
        self.local_log = LocalLog(log, self.control, emit)
        self.leader_replication = LeaderReplication(node_id, self.quorum, self.local_log, config, emit)
        self.transitions = Transitions(node_id, self.quorum, self.local_log, self.requests,
                                       self.leader_replication, emit)
        self.elections = Elections(self.local, self.quorum, self.local_log, self.voter_history, outbox,
                                   self.transitions, config, rng)
        self.follower_replication = FollowerReplication(self.local, self.quorum, self.local_log,
                                                        self.voter_history, outbox, self.transitions, config,
                                                        tuple(bootstrap_ids))
        self.quorum.committed_offset = lambda: self.local_log.high_watermark
        self.membership = Membership(self.local, self.quorum, self.local_log, config, emit,
                                     self.leader_replication.drain, self.sync_leader_voters)
        self.leader_replication.on_commit = self.membership.on_high_watermark
        self.reassignment = Reassignment(self.membership)
        self.elections.describe_target = lambda: self.control.target
        self.follower_replication.control = self.control
        self.follower_replication.local_endpoints = tuple(local_endpoints)
        self.elections.local_endpoints = tuple(local_endpoints)
        self._deadline = now_ms
        self.quorum.initialize(election_state, OffsetAndEpoch(log.end_offset(), log.last_fetched_epoch()), now_ms)
        self.local_log.request_flush()
        self.transitions.note_leader_change()
        self._poll(now_ms)

    # ================================================================ public API
    @property
    def role(self) -> str:
        return self.quorum.state.name

    @property
    def state(self):
        return self.quorum.state

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_id(self) -> int:
        return self.quorum.leader_id

    def is_leader(self) -> bool:
        return isinstance(self.quorum.state, LeaderState)

    @property
    def high_watermark(self) -> int:
        """This node's high watermark (-1 until known); never decreases."""
        return self.local_log.high_watermark

    @property
    def leader_high_watermark(self) -> int:
        """The quorum's high watermark as this node last learned it (-1 while unknown): the
        leader's own, or what the leader reported to this follower or observer, which may be
        ahead of this node's log. Kafka's ``RaftClient.highWatermark()``, the target of a
        broker's initial metadata catch-up."""
        s = self.quorum.state
        if isinstance(s, LeaderState):
            return s.high_watermark  # -1 until its epoch's first record commits
        # Not this node's own high watermark: after a restart that is the snapshot's end
        # offset, far behind the records committed since.
        return getattr(s, "leader_high_watermark", -1)

    @property
    def flushed_offset(self) -> int:
        return self.local_log.flushed

    # Problems the core answers for itself but cannot log (no I/O here): the driver watches
    # the counters and logs the last occurrence. Follower: fetched records that failed
    # validation, as (leader id, fetch offset, reason). Leader: a log read that failed with a
    # storage error, as (fetch offset, reason).
    @property
    def corrupt_fetches(self) -> int:
        return self.local_log.corrupt_fetches

    @property
    def last_corrupt_fetch(self) -> tuple | None:
        return self.local_log.last_corrupt_fetch

    @property
    def storage_read_errors(self) -> int:
        return self.leader_replication.storage_read_errors

    @property
    def last_storage_read_error(self) -> tuple | None:
        return self.leader_replication.last_storage_read_error

    def observed(self) -> tuple:
        """``(leader id, epoch, corrupt_fetches, storage_read_errors, voters)``: what a driver
        watches after every batch of effects, in one call (it runs several times per write)."""
        q = self.quorum.state
        return (q.leader_id, q.epoch, self.local_log.corrupt_fetches, self.leader_replication.storage_read_errors,
                self.voter_history.last())

    @property
    def kraft_version(self) -> int:
        """0: static voters (``controller.quorum.voters``); 1: voters in the log (KIP-853)."""
        return self.control.kraft_version

    @property
    def voters(self) -> VoterSet:
        """The voter set in force (the latest one in the log, committed or not)."""
        return self.voter_history.last()

    @property
    def target_voters(self) -> VoterSet | None:
        """The voter set a reassignment moves to (seed 002), or None."""
        return self.control.target

    def leader_and_epoch(self) -> LeaderAndEpoch:
        return self.quorum.leader_and_epoch()

    def election_state(self) -> ElectionState | None:
        """The election state most recently handed out for persisting."""
        return self.quorum.persisted

    def step(self, message, now_ms: int) -> None:
        """Handle an ``InboundRequest``, ``InboundResponse`` or ``RequestFailed``. The body is
        a Kafka protocol message (``kraft.raft.rpcs``) in its newest form; requests for
        anything but our one partition are answered with Kafka's error codes."""
        self._now = now_ms
        if isinstance(message, InboundRequest):
            self._handle_request(message, now_ms)
        elif isinstance(message, InboundResponse):
            self._handle_response(message, now_ms)
        elif isinstance(message, RequestFailed):
            self.requests.on_result(message.destination, message.correlation_id, False, now_ms)
            if message.peer_gone:
                self.elections.on_peer_gone(message.destination, now_ms)
        else:
            raise TypeError(f"not a message envelope: {message!r}")
        self._poll(now_ms)

    def tick(self, now_ms: int) -> None:
        self._now = now_ms
        self._poll(now_ms)

    def on_flushed(self, offset: int, now_ms: int | None = None) -> None:
        """The log is durable below ``offset``."""
        now = self._now if now_ms is None else now_ms
        self._now = now
        if self.local_log.on_flushed(offset):
            s = self.quorum.state
            if isinstance(s, LeaderState):
                self.leader_replication.on_flushed(s, now)
            elif isinstance(s, FollowerState):
                self.follower_replication.update_high_watermark(s)
        self._poll(now)

    def propose(self, values, now_ms: int, epoch: int | None = None) -> int:
        """Append one atomic group of record values on the leader; returns the offset of the
        last one. Raises NotLeaderError if this node is not the leader (of ``epoch``).

        Nothing is appended before the next ``tick`` at ``poll_effects().next_deadline_ms``
        (at once when the linger is 0): proposals made before that tick share one append
        and one flush."""
        s = self._proposing_leader(now_ms, epoch)
        return self._after_proposal(s, s.accumulator.append(values, now_ms), now_ms)

    def propose_batches(self, data, records: int, now_ms: int, epoch: int | None = None) -> int:
        """Like ``propose`` for whole RecordBatch v2 batches built by a writer and already
        validated (CRC, framing, ``records`` records in all, each batch within the batch size
        limit): they are appended as they are, with base offset and leader epoch patched."""
        s = self._proposing_leader(now_ms, epoch)
        return self._after_proposal(s, s.accumulator.append_batches(data, records, now_ms), now_ms)

    def uncommitted(self) -> tuple[int, int]:
        """(records, bytes) this leader accepted and a majority has not acknowledged yet:
        appended above the high watermark or waiting in the accumulator; (0, 0) when not
        leading. Bytes count this epoch's appends and proposals only."""
        s = self.quorum.state
        if type(s) is not LeaderState:
            return 0, 0
        acc = s.accumulator
        return (s.backlog.records(acc.next_offset, self.local_log.high_watermark),
                s.backlog.appended_bytes + acc.pending_bytes)

    def accepting_proposals(self) -> bool:
        """Is this node a leader whose uncommitted tail is below ``max_uncommitted_records``
        and ``max_uncommitted_bytes``? Drivers start new work (a controller request) only
        then and wait for commits otherwise; ``propose`` itself never refuses for it, so an
        atomic unit is never cut (``kraft.raft.backlog``)."""
        s = self.quorum.state
        if type(s) is not LeaderState or s.resign_requested:
            return False
        records, nbytes = self.uncommitted()
        c = self.config
        return records < c.max_uncommitted_records and nbytes < c.max_uncommitted_bytes

    def _proposing_leader(self, now_ms: int, epoch: int | None) -> LeaderState:
        self._now = now_ms
        s = self.quorum.state
        if not isinstance(s, LeaderState) or s.resign_requested or (epoch is not None and epoch != s.epoch):
            raise NotLeaderError("not the leader", self.quorum.leader_id, self.quorum.epoch)
        return s

    def _after_proposal(self, s: LeaderState, last: int, now_ms: int) -> int:
        due = s.accumulator.drain_deadline()
        if due is not None:
            self._deadline = min(self._deadline, max(due, now_ms))
        return last

    def upgrade_kraft_version(self, level: int, validate_only: bool, now_ms: int):
        """Kafka 4.1's static-to-dynamic upgrade on the leader (``kraft.raft.kraft_version``):
        (error code, message, offset whose commit completes it, or None)."""
        self._now = now_ms
        out = upgrade_kraft_version(self.membership, self.quorum.state, level, validate_only, now_ms)
        self._poll(now_ms)
        return out

    def resign(self, now_ms: int, epoch: int | None = None) -> None:
        """Graceful resignation: the leader steps down, naming its most up-to-date followers
        as preferred successors (EndQuorumEpoch)."""
        self._now = now_ms
        s = self.quorum.state
        if isinstance(s, LeaderState) and (epoch is None or epoch == s.epoch):
            s.request_resignation()
        self._poll(now_ms)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, now_ms: int,
                        last_contained_log_timestamp: int = -1) -> SnapshotWriter | None:
        """A writer for a snapshot of the listener's state at committed offset
        ``snapshot_id.offset`` whose last record has epoch ``snapshot_id.epoch``; None if it
        already exists or lies below the log start."""
        log = self.log
        hw = self.local_log.high_watermark
        if snapshot_id.offset > hw:
            raise ValueError(f"snapshot {snapshot_id} past the high watermark {hw}")
        if snapshot_id.offset <= log.start_offset():
            return None
        found = log.end_offset_for_epoch(snapshot_id.epoch)
        if found.epoch != snapshot_id.epoch or found.offset < snapshot_id.offset:
            raise ValueError(f"snapshot {snapshot_id} does not match the log ({found})")
        raw = log.create_snapshot(snapshot_id)
        if raw is None:
            return None
        at = snapshot_id.offset - 1
        membership = None
        if self.control.kraft_version_at(at) >= 1:
            membership = membership_control_batch(self.voter_history.at(at), self.control.kraft_version_at(at),
                                                  1, snapshot_id.epoch, now_ms, self.control.target_at(at))
        return SnapshotWriter(raw, last_contained_log_timestamp, now_ms, self._on_snapshot_frozen, membership)

    def _on_snapshot_frozen(self, snapshot_id: OffsetAndEpoch) -> None:
        if snapshot_id.offset <= self.local_log.high_watermark:
            self.log.delete_before_snapshot(snapshot_id)

    @property
    def has_effects(self) -> bool:
        """Effects are waiting for ``poll_effects`` (a proposal alone makes none)."""
        return bool(self._effects)

    @property
    def next_deadline_ms(self) -> int:
        """When ``tick`` is next due (what ``poll_effects`` would say)."""
        return self._deadline

    def poll_effects(self) -> Ready:
        effects = self._effects[:]
        del self._effects[:]
        return Ready(effects, self._deadline)

    # ================================================================ dispatch
    def _handle_request(self, message: InboundRequest, now: int) -> None:
        body = message.body
        t = type(body)
        if t is FetchRequest:
            self.leader_replication.handle_fetch_request(message, now)
            return
        if t is AddRaftVoterRequest:
            self.membership.handle_add(message.handle, body, now)
            return
        if t is RemoveRaftVoterRequest:
            self.membership.handle_remove(message.handle, body, now)
            return
        if t is ReassignRaftVotersRequest:
            self.reassignment.handle(message.handle, body, now)
            return
        e = self.elections
        if t is UpdateRaftVoterRequest:
            response = self.membership.handle_update(body, now)
        elif t is VoteRequest:
            response = e.handle_vote_request(message.source, body, now)
        elif t is BeginQuorumEpochRequest:
            response = e.handle_begin_quorum_epoch_request(message.source, body, now)
        elif t is EndQuorumEpochRequest:
            response = e.handle_end_quorum_epoch_request(message.source, body, now)
        elif t is FetchSnapshotRequest:
            response = self.leader_replication.handle_fetch_snapshot_request(message.source, body, now)
        elif t is DescribeQuorumRequest:
            response = e.handle_describe_quorum_request(body, now)
        else:
            raise TypeError(f"not a KRaft request: {t.__name__}")
        self._effects.append(Respond(message.handle, response))

    def _handle_response(self, message: InboundResponse, now: int) -> None:
        request = self.requests.expected(message.source, message.correlation_id)
        if request is None:
            return  # late, duplicated or no longer wanted
        t = type(request)
        e, f = self.elections, self.follower_replication
        if t is FetchRequest:
            ok = f.handle_fetch_response(message.source, request, message.body, now)
        elif t is VoteRequest:
            ok = e.handle_vote_response(message.source, request, message.body, now)
        elif t is BeginQuorumEpochRequest:
            ok = e.handle_begin_quorum_epoch_response(message.source, message.body, now)
        elif t is EndQuorumEpochRequest:
            ok = e.handle_end_quorum_epoch_response(message.source, message.body, now)
        elif t is FetchSnapshotRequest:
            ok = f.handle_fetch_snapshot_response(message.source, request, message.body, now)
        elif t is UpdateRaftVoterRequest:
            leader = message.body.current_leader
            handled = self.transitions.common_response(message.body.error_code, leader.leader_id,
                                                       leader.leader_epoch, now)
            ok = handled if handled is not None else True
        else:
            ok = False
        self.requests.on_result(message.source, message.correlation_id, ok, now)

    # ================================================================ polling
    def _poll(self, now: int) -> None:
        e, f = self.elections, self.follower_replication
        if self.membership.pending is not None:
            self.membership.expire(now)  # a change pending when leadership ended is answered
        for _ in range(8):  # transitions made here may enable the next role's work at once
            s = self.quorum.state
            t = type(s)
            if t is LeaderState:
                deadline = self._poll_leader(s, now)
            elif t is FollowerState:
                deadline = f.poll_follower(s, now)
            elif t is CandidateState:
                deadline = e.poll_candidate(s, now)
            elif t is ProspectiveState:
                deadline = e.poll_prospective(s, now)
            elif t is UnattachedState:
                if not self.quorum.is_electable():  # an observer (also a voter whose removal committed)
                    deadline = f.poll_observer(now)
                else:
                    deadline = e.poll_unattached_voter(s, now)
            else:
                deadline = e.poll_resigned(s, now)
            if self.quorum.state is s:
                break
        self._deadline = max(deadline, now)

    def sync_leader_voters(self, s: LeaderState, now: int) -> None:
        """Count majorities over the voter set the log now holds (a Voters record appended)."""
        voters = self.voter_history.last()
        if s.voters is not voters and s.update_voters(voters, self.local_log.flushed, now):
            self.leader_replication.on_high_watermark(s, now)

    def _removed_leader_done(self, s: LeaderState) -> bool:
        """A leader that removed itself leads until the removal is committed, then resigns."""
        return (not self.quorum.is_voter() and s.high_watermark > self.voter_history.last_offset())

    def _poll_leader(self, s: LeaderState, now: int) -> int:
        # ``s.voters is not history.latest``: the voter set changed (a Voters record was
        # appended); checked inline, as this runs after every request.
        history = self.voter_history
        if s.voters is not history.latest:
            self.sync_leader_voters(s, now)
        self.membership.refresh_own_endpoints(s, self.follower_replication.local_endpoints, now)
        self.reassignment.poll(s, now)  # the next step toward the target voters, if due
        if s.voters is not history.latest:
            self.sync_leader_voters(s, now)
        if s.resign_requested or s.check_quorum_expired(now) or self._removed_leader_done(s):
            self.transitions.become_resigned(now)
            return now
        r = self.leader_replication
        deadline = r.drain_if_due(s, now)
        if s.voters is not history.latest:
            self.sync_leader_voters(s, now)
        deadline = min(deadline, self.elections.send_begin_epoch(s, now))
        deadline = min(deadline, r.answer_parked(s, now))
        if s.check_quorum_deadline is not None:
            deadline = min(deadline, s.check_quorum_deadline)
        if self.membership.pending is not None:
            deadline = min(deadline, self.membership.expire(now))
        return deadline
