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
     ``step(InboundResponse(dest, cid, response), now)``. Losing it is fine.
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
"""

from __future__ import annotations

from kraft.errors import CorruptRecordError, InvalidRecordError, NotLeaderError
from kraft.raft.accumulator import PendingBatch
from kraft.raft.config import RaftConfig
from kraft.raft.effects import Append, Commit, Flush, LeaderChange, LoadSnapshot, Ready, Respond, Send
from kraft.raft.election import ElectionState, LeaderAndEpoch
from kraft.raft.election_rpcs import ElectionRpcs
from kraft.raft.leader import LeaderState
from kraft.raft.majority import VoteResult
from kraft.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    InboundRequest,
    InboundResponse,
    OffsetAndEpoch,
    RequestFailed,
    VoteRequest,
)
from kraft.raft.quorum_state import QuorumState
from kraft.raft.replication_rpcs import ReplicationRpcs
from kraft.raft.requests import RequestTracker
from kraft.raft.roles import CandidateState, FollowerState, ProspectiveState, ResignedState, UnattachedState
from kraft.raft.snapshot import SnapshotWriter
from kraft.raft.voters import ReplicaKey, VoterSet, VoterSetHistory
from kraft.records import LeaderChangeMessage, build_batch, build_control_record_batch

NO_DEADLINE = 1 << 62
DISCOVERY_INTERVAL_MS = 100


class RaftCore(ElectionRpcs, ReplicationRpcs):
    """One replica of the metadata partition.

    ``voters``: the bootstrap voter set (ids or ``ReplicaKey``s). ``rng``: any object with
    ``random() -> float in [0, 1)``. ``election_state``: what quorum-state held at start
    (None for a new node). ``directory_id``: this replica's log directory id, if known.
    """

    def __init__(self, node_id: int, log, config: RaftConfig, voters, rng, *,
                 directory_id: bytes | None = None, election_state: ElectionState | None = None,
                 now_ms: int = 0):
        self.node_id = node_id
        self.local = ReplicaKey(node_id, directory_id)
        self.log = log
        self.config = config
        self.rng = rng
        self._effects: list = []
        self._now = now_ms
        self.voter_history = VoterSetHistory(voters if isinstance(voters, VoterSet) else VoterSet(voters))
        self.quorum = QuorumState(self.local, self.voter_history, config, rng, self._effects.append)
        self.requests = RequestTracker(config.request_timeout_ms, config.retry_backoff_ms,
                                       int(rng.random() * (1 << 30)))
        end = log.end_offset()
        self._flushed = min(log.flushed_offset(), end)
        self._flush_requested = self._flushed
        self._hw = -1
        self._deadline = now_ms
        self._bootstrap_cursor = 0
        self._discovery_due = 0
        self._last_peer_gone_ms = -(1 << 62)
        self._announced: LeaderAndEpoch | None = None
        # Problems the core answers for itself but cannot log (no I/O here): the driver
        # watches the counters and logs the last occurrence. Follower: fetched records that
        # failed validation, as (leader id, fetch offset, reason). Leader: a log read that
        # failed with a storage error, as (fetch offset, reason).
        self.corrupt_fetches = 0
        self.last_corrupt_fetch: tuple | None = None
        self.storage_read_errors = 0
        self.last_storage_read_error: tuple | None = None
        self.quorum.initialize(election_state, OffsetAndEpoch(end, log.last_fetched_epoch()), now_ms)
        self._request_flush()
        self._note_leader_change()
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
        return self._hw

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    def leader_and_epoch(self) -> LeaderAndEpoch:
        return self.quorum.leader_and_epoch()

    def election_state(self) -> ElectionState | None:
        """The election state most recently handed out for persisting."""
        return self.quorum.persisted

    def step(self, message, now_ms: int) -> None:
        """Handle an ``InboundRequest``, ``InboundResponse`` or ``RequestFailed``."""
        self._now = now_ms
        if isinstance(message, InboundRequest):
            self._handle_request(message, now_ms)
        elif isinstance(message, InboundResponse):
            self._handle_response(message, now_ms)
        elif isinstance(message, RequestFailed):
            self.requests.on_result(message.destination, message.correlation_id, False, now_ms)
            if message.peer_gone:
                self._on_peer_gone(message.destination, now_ms)
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
        offset = min(offset, self.log.end_offset())
        if offset > self._flushed:
            self._flushed = offset
            s = self.quorum.state
            if isinstance(s, LeaderState):
                if s.update_local(offset):
                    self._on_leader_high_watermark(s, now)
            elif isinstance(s, FollowerState):
                self._update_follower_high_watermark(s)
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

    def resign(self, now_ms: int, epoch: int | None = None) -> None:
        """Graceful resignation: the leader steps down, naming its most up-to-date followers
        as preferred successors (EndQuorumEpoch)."""
        self._now = now_ms
        s = self.quorum.state
        if isinstance(s, LeaderState) and (epoch is None or epoch == s.epoch):
            s.resign_requested = True
        self._poll(now_ms)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, now_ms: int,
                        last_contained_log_timestamp: int = -1) -> SnapshotWriter | None:
        """A writer for a snapshot of the listener's state at committed offset
        ``snapshot_id.offset`` whose last record has epoch ``snapshot_id.epoch``; None if it
        already exists or lies below the log start."""
        log = self.log
        if snapshot_id.offset > self._hw:
            raise ValueError(f"snapshot {snapshot_id} past the high watermark {self._hw}")
        if snapshot_id.offset <= log.start_offset():
            return None
        found = log.end_offset_for_epoch(snapshot_id.epoch)
        if found.epoch != snapshot_id.epoch or found.offset < snapshot_id.offset:
            raise ValueError(f"snapshot {snapshot_id} does not match the log ({found})")
        raw = log.create_snapshot(snapshot_id)
        if raw is None:
            return None
        return SnapshotWriter(raw, last_contained_log_timestamp, now_ms, self._on_snapshot_frozen)

    def poll_effects(self) -> Ready:
        effects = self._effects[:]
        del self._effects[:]
        return Ready(effects, self._deadline)

    # ================================================================ dispatch
    def _handle_request(self, message: InboundRequest, now: int) -> None:
        body = message.body
        t = type(body)
        if t is FetchRequest:
            self._handle_fetch_request(message, now)
            return
        if t is VoteRequest:
            response = self._handle_vote_request(message.source, body, now)
        elif t is BeginQuorumEpochRequest:
            response = self._handle_begin_quorum_epoch_request(message.source, body, now)
        elif t is EndQuorumEpochRequest:
            response = self._handle_end_quorum_epoch_request(message.source, body, now)
        elif t is FetchSnapshotRequest:
            response = self._handle_fetch_snapshot_request(message.source, body, now)
        else:
            response = self._handle_describe_quorum_request(body)
        self._effects.append(Respond(message.handle, response))

    def _handle_response(self, message: InboundResponse, now: int) -> None:
        request = self.requests.expected(message.source, message.correlation_id)
        if request is None:
            return  # late, duplicated or no longer wanted
        t = type(request)
        if t is FetchRequest:
            ok = self._handle_fetch_response(message.source, request, message.body, now)
        elif t is VoteRequest:
            ok = self._handle_vote_response(message.source, request, message.body, now)
        elif t is BeginQuorumEpochRequest:
            ok = self._handle_begin_quorum_epoch_response(message.source, message.body, now)
        elif t is EndQuorumEpochRequest:
            ok = self._handle_end_quorum_epoch_response(message.source, message.body, now)
        elif t is FetchSnapshotRequest:
            ok = self._handle_fetch_snapshot_response(message.source, request, message.body, now)
        else:
            ok = False
        self.requests.on_result(message.source, message.correlation_id, ok, now)

    def _send(self, dest: int, request, now: int) -> None:
        cid = self.requests.next_correlation_id()
        self.requests.on_sent(dest, cid, request, now)
        self._effects.append(Send(dest, cid, request))

    def _send_if_ready(self, dest: int, build, now: int) -> int:
        """Send ``build()`` to ``dest`` if nothing is in flight there; returns the time at
        which to look again."""
        if self.requests.is_ready(dest, now):
            self._send(dest, build(), now)
        return self.requests.ready_at(dest)

    # ================================================================ polling
    def _poll(self, now: int) -> None:
        for _ in range(8):  # transitions made here may enable the next role's work at once
            s = self.quorum.state
            t = type(s)
            if t is LeaderState:
                deadline = self._poll_leader(s, now)
            elif t is FollowerState:
                deadline = self._poll_follower(s, now)
            elif t is CandidateState:
                deadline = self._poll_candidate(s, now)
            elif t is ProspectiveState:
                deadline = self._poll_prospective(s, now)
            elif t is UnattachedState:
                deadline = self._poll_unattached(s, now)
            else:
                deadline = self._poll_resigned(s, now)
            if self.quorum.state is s:
                break
        self._deadline = max(deadline, now)

    def _poll_leader(self, s: LeaderState, now: int) -> int:
        if s.resign_requested or s.check_quorum_expired(now):
            self._become_resigned(now)
            return now
        deadline = NO_DEADLINE
        due = s.accumulator.drain_deadline()
        if due is not None:
            if now >= due:
                self._drain(s, now)
            else:
                deadline = due
        if now >= s.begin_epoch_due:
            s.begin_epoch_due = now + self.config.begin_quorum_epoch_interval_ms
            for voter in s.voters.keys():
                if voter.id != self.node_id and self.requests.is_ready(voter.id, now):
                    self._send(voter.id, BeginQuorumEpochRequest(
                        self.node_id, s.epoch, voter.id, voter.directory_id, self.config.cluster_id), now)
        deadline = min(deadline, s.begin_epoch_due)
        if s.parked:
            self._complete_parked(s, now)
            hw_due = s.hw_changed_ms + self.config.hw_notify_delay_ms
            for p in s.parked:
                deadline = min(deadline, p.deadline if p.hw_seen == s.high_watermark else min(p.deadline, hw_due))
        if s.check_quorum_deadline is not None:
            deadline = min(deadline, s.check_quorum_deadline)
        return deadline

    def _poll_follower(self, s: FollowerState, now: int) -> int:
        voter = self.quorum.is_voter()
        if now >= s.fetch_deadline:
            if voter:
                self._become_prospective(now)
                return now
            # An observer that lost its leader asks any voter who leads now.
            return min(self._fetch_from_any_voter(now), now + self.config.fetch_timeout_ms)
        deadline = s.fetch_deadline
        if self._log_position_durable():
            deadline = min(deadline, self._send_if_ready(s.leader_id, self._build_fetch_or_snapshot, now))
        return deadline

    def _poll_candidate(self, s: CandidateState, now: int) -> int:
        if s.backoff_until is not None:
            if now >= s.backoff_until:
                self._become_prospective(now)
                return now
            return s.backoff_until
        if now >= s.election_deadline:
            s.backoff_until = now + self._election_backoff(s.retries)
            return s.backoff_until
        return min(s.election_deadline, self._solicit_votes(s, False, now))

    def _poll_prospective(self, s: ProspectiveState, now: int) -> int:
        if now >= s.election_deadline:
            self._lose_pre_election(s, now)
            return now
        return min(s.election_deadline, self._solicit_votes(s, True, now))

    def _poll_unattached(self, s: UnattachedState, now: int) -> int:
        if s.election_deadline is None:  # observer
            return min(self._fetch_from_any_voter(now), now + self.config.fetch_timeout_ms)
        if now >= s.election_deadline:
            self._become_prospective(now)
            return now
        return s.election_deadline

    def _poll_resigned(self, s: ResignedState, now: int) -> int:
        if now >= s.election_deadline:
            if self.quorum.is_voter():
                self._become_prospective(now)
            else:
                self._become_unattached(s.epoch + 1, now)
            return now
        deadline = s.election_deadline
        request = EndQuorumEpochRequest(self.node_id, s.epoch, s.preferred_successors, self.config.cluster_id)
        for voter in sorted(s.unacked):
            deadline = min(deadline, self._send_if_ready(voter, lambda: request, now))
        return deadline

    def _solicit_votes(self, s, pre_vote: bool, now: int) -> int:
        """Send (pre-)vote requests to voters that have not answered, once our log position
        is durable (we never claim an offset we might lose)."""
        if s.tally.result() is VoteResult.LOST or not self._log_position_durable():
            return NO_DEADLINE
        deadline = NO_DEADLINE
        log = self.log
        for voter_id in s.tally.unrecorded():
            voter = self.voter_history.last().key(voter_id)
            request = VoteRequest(s.epoch, self.node_id, log.last_fetched_epoch(), log.end_offset(),
                                  pre_vote, self.local.directory_id, voter_id,
                                  voter.directory_id if voter else None, self.config.cluster_id)
            deadline = min(deadline, self._send_if_ready(voter_id, lambda: request, now))
        return deadline

    def _fetch_from_any_voter(self, now: int) -> int:
        """Leader discovery for observers: one Fetch at a time, round robin over the voters,
        at most every DISCOVERY_INTERVAL_MS (a voter that is not the leader answers with
        what it knows of the leader)."""
        ids = sorted(self.voter_history.last().ids - {self.node_id})
        if not ids or not self._log_position_durable():
            return NO_DEADLINE
        if now < self._discovery_due:
            return self._discovery_due
        busy = [d for d in ids if self.requests.has_in_flight(d) and not self.requests.is_ready(d, now)]
        if busy:
            return min(self.requests.ready_at(d) for d in busy)
        for _ in range(len(ids)):
            dest = ids[self._bootstrap_cursor % len(ids)]
            self._bootstrap_cursor += 1
            if self.requests.is_ready(dest, now):
                self._send(dest, self._build_fetch(), now)
                self._discovery_due = now + DISCOVERY_INTERVAL_MS
                return self._discovery_due
        return max(now + 1, min(self.requests.ready_at(d) for d in ids))

    def _on_peer_gone(self, peer: int, now: int) -> None:
        """A voter following ``peer`` learned that the leader's process is gone (connection
        closed, reset or refused: what ZooKeeper's followers act on at a crash). Instead of
        waiting out the fetch timeout it starts a pre-vote at once; pre-vote keeps this safe,
        since voters still hearing from a live leader refuse it. At most once per election
        timeout, so a leader unreachable to only this voter cannot make it spin."""
        s = self.quorum.state
        if (type(s) is FollowerState and s.leader_id == peer and self.quorum.is_voter()
                and now - self._last_peer_gone_ms >= self.config.election_timeout_ms):
            self._last_peer_gone_ms = now
            self._become_prospective(now)

    def _election_backoff(self, retries: int) -> int:
        """Binary exponential backoff, randomised, capped at election.backoff.max.ms."""
        c = self.config
        slots = 2 << min(20, max(retries, 1) - 1)
        return min(c.election_backoff_base_ms * int(self.rng.random() * slots), c.election_backoff_max_ms)

    # ================================================================ transitions
    def _after_transition(self, old, now: int) -> None:
        self.requests.reset_all()
        if isinstance(old, LeaderState):
            # Parked fetches get answered now (with the new epoch/leader) so followers move on.
            self._complete_parked(old, now, force=True)
        self._note_leader_change()

    def _note_leader_change(self) -> None:
        s = self.quorum.state
        lae = LeaderAndEpoch(s.leader_id, s.epoch)
        if lae != self._announced:
            self._announced = lae
            start = s.epoch_start_offset if isinstance(s, LeaderState) else -1
            self._effects.append(LeaderChange(lae, start))

    def _become_unattached(self, epoch: int, now: int) -> None:
        old = self.quorum.state
        self.quorum.transition_to_unattached(epoch, now)
        self._after_transition(old, now)

    def _become_follower(self, epoch: int, leader_id: int, now: int) -> None:
        old = self.quorum.state
        self.quorum.transition_to_follower(epoch, leader_id, now)
        self._after_transition(old, now)

    def _become_prospective(self, now: int) -> None:
        old = self.quorum.state
        s = self.quorum.transition_to_prospective(now)
        self._after_transition(old, now)
        if s.tally.result() is VoteResult.WON:  # the only voter
            self._become_candidate(now)

    def _become_candidate(self, now: int) -> None:
        old = self.quorum.state
        s = self.quorum.transition_to_candidate(now)
        self._after_transition(old, now)
        if s.tally.result() is VoteResult.WON:
            self._become_leader(now)

    def _become_leader(self, now: int) -> None:
        old = self.quorum.state
        log = self.log
        s = self.quorum.transition_to_leader(log.end_offset(), now)
        # Every epoch starts with a LeaderChange control record; committing it is what lets
        # the high watermark move in this epoch.
        data = build_control_record_batch(
            LeaderChangeMessage(self.node_id, tuple(sorted(s.voters.ids)), s.granting_voters),
            base_offset=s.epoch_start_offset, partition_leader_epoch=s.epoch, timestamp=now)
        first, last = log.append_as_leader(data, s.epoch)
        self._effects.append(Append(first, last, s.epoch, True))
        s.accumulator.next_offset = log.end_offset()
        s.update_local(self._flushed)
        self._request_flush()
        self._after_transition(old, now)

    def _become_resigned(self, now: int) -> None:
        old = self.quorum.state
        self.quorum.transition_to_resigned(old.progress.followers_by_descending_end_offset(), now)
        self._after_transition(old, now)

    def _lose_pre_election(self, s: ProspectiveState, now: int) -> None:
        if s.leader_id >= 0:
            self._become_follower(s.epoch, s.leader_id, now)
        else:
            self._become_unattached(s.epoch, now)

    def _maybe_transition(self, leader_id: int, epoch: int, now: int) -> bool:
        """Move to a newer epoch, or follow a newly learned leader of this epoch. Returns
        False (and does nothing) if the claim contradicts what we know: two leaders in one
        epoch can only come from a bug, and we refuse to act on it."""
        s = self.quorum.state
        if epoch > s.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._become_follower(epoch, leader_id, now)
            else:
                self._become_unattached(epoch, now)
            return True
        if epoch < s.epoch or leader_id < 0:
            return True
        if leader_id == self.node_id:
            return isinstance(s, (LeaderState, ResignedState))
        if isinstance(s, (LeaderState, ResignedState)):
            return False
        if s.leader_id == leader_id and not isinstance(s, ProspectiveState):
            return True
        if s.leader_id >= 0 and s.leader_id != leader_id:
            return False
        self._become_follower(epoch, leader_id, now)
        return True

    # ================================================================ log & high watermark
    def _log_position_durable(self) -> bool:
        return self._flushed >= self.log.end_offset()

    def _request_flush(self) -> None:
        end = self.log.end_offset()
        if end > self._flush_requested and end > self._flushed:
            self._flush_requested = end
            self._effects.append(Flush(end))

    def _drain(self, s: LeaderState, now: int) -> None:
        """Everything the accumulator holds goes to the log in one append."""
        pending = s.accumulator.drain()
        if not pending:
            return
        parts = []
        for p in pending:
            if type(p) is PendingBatch:
                parts.append(build_batch(p.values, base_offset=p.base_offset,
                                         partition_leader_epoch=s.epoch, timestamp=now))
            else:
                parts.append(p.data)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        first, last = self.log.append_as_leader(data, s.epoch)
        if first != pending[0].base_offset or last != s.accumulator.next_offset - 1:
            raise AssertionError(f"accumulator offsets {pending[0].base_offset}..{s.accumulator.next_offset - 1}"
                                 f" != log {first}..{last}")
        self._effects.append(Append(first, last, s.epoch, True))
        self._request_flush()
        self._complete_parked(s, now)

    def _set_high_watermark(self, hw: int) -> None:
        if hw > self._hw:
            self._hw = hw
            self.log.update_high_watermark(hw)
            self._effects.append(Commit(hw))

    def _on_leader_high_watermark(self, s: LeaderState, now: int) -> None:
        self._set_high_watermark(s.high_watermark)
        s.hw_changed_ms = now
        self._complete_parked(s, now)

    def _update_follower_high_watermark(self, s: FollowerState) -> None:
        # Only what the leader says is committed *and* we hold durably and have validated.
        hw = min(s.leader_high_watermark, self._flushed)
        if hw > s.high_watermark:
            s.high_watermark = hw
            self._set_high_watermark(hw)

    def _truncate(self, offset: int) -> None:
        if offset < self._hw:
            raise AssertionError(f"truncation to {offset} below the high watermark {self._hw}")
        if not self._log_position_durable():
            raise AssertionError("truncation with a flush outstanding")
        self.log.truncate_to(offset)
        end = self.log.end_offset()
        self._flushed = min(self._flushed, end)
        self._flush_requested = min(self._flush_requested, end)
        self.voter_history.truncate_new_entries(end)

    def _append_as_follower(self, records: bytes) -> bool:
        try:
            first, last = self.log.append_as_follower(records)
        except (CorruptRecordError, InvalidRecordError) as exc:
            self.corrupt_fetches += 1
            self.last_corrupt_fetch = (self.quorum.leader_id, self.log.end_offset(), str(exc))
            return False
        if first >= 0:
            self._effects.append(Append(first, last, self.quorum.epoch, False))
            self._request_flush()
        return True

    def _on_snapshot_installed(self, s: FollowerState, snapshot_id: OffsetAndEpoch) -> None:
        # The log now starts (and ends) at the snapshot, which is durable once frozen.
        end = self.log.end_offset()
        self._flushed = self._flush_requested = end
        self.voter_history.truncate_new_entries(end)
        self._effects.append(LoadSnapshot(snapshot_id))
        # A snapshot is only ever taken at a committed offset.
        s.high_watermark = max(s.high_watermark, snapshot_id.offset)
        self._set_high_watermark(snapshot_id.offset)

    def _on_snapshot_frozen(self, snapshot_id: OffsetAndEpoch) -> None:
        if snapshot_id.offset <= self._hw:
            self.log.delete_before_snapshot(snapshot_id)
