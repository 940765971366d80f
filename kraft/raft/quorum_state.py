"""QuorumState: the one place where a replica's role changes.

Every transition is a method here that checks its preconditions, builds the new role and,
when the durable election state (epoch, leader, vote) changes, emits ``PersistElection``
*before* the caller can emit anything that depends on it (the driver executes effects in
order). Legal transitions (voters; KIP-595 + KIP-996):

  Unattached  -> Unattached   a higher epoch is learned, or a vote is cast in this epoch
              -> Prospective  the election timeout expires
              -> Follower     a leader of this or a higher epoch is learned
  Prospective -> Unattached   a higher epoch is learned, a vote is cast in this epoch, or
                              the pre-election is lost/times out with no leader known
              -> Follower     a leader of this or a higher epoch is learned, or the
                              pre-election is lost/times out and a leader was known
              -> Candidate    a majority granted the pre-vote (epoch + 1, votes for itself)
  Candidate   -> Unattached   a higher epoch is learned
              -> Follower     a leader of this or a higher epoch is learned
              -> Leader       a majority granted the vote
              -> Prospective  the backoff after a lost or timed-out election expires
  Leader      -> Unattached   a higher epoch is learned (no leader known)
              -> Follower     a leader of a higher epoch is learned
              -> Resigned     check-quorum fails, or graceful resignation
  Follower    -> Unattached   a higher epoch is learned
              -> Follower     a leader of a higher epoch is learned
              -> Prospective  the fetch timeout expires
  Resigned    -> Unattached   a higher epoch is learned
              -> Follower     a leader of a higher epoch is learned
              -> Prospective  the election timeout expires

Observers (not in the voter set) only move between Unattached and Follower (higher epoch or
leader learned). A restarted replica starts as: Resigned if the stored state says it led
the stored epoch (it never leads that epoch again), Follower if a leader is stored,
otherwise Unattached (keeping any stored vote); if the log holds a higher epoch than the
stored one, Unattached in the log's epoch.

No I/O, no clock, no ``random`` import: the random source is injected (anything with a
``random()`` method returning a float in [0, 1)).
"""

from __future__ import annotations

from typing import Callable

from kraft.raft.accumulator import BatchAccumulator
from kraft.raft.config import RaftConfig
from kraft.raft.effects import PersistElection
from kraft.raft.election import ElectionState, LeaderAndEpoch
from kraft.raft.leader import LeaderState
from kraft.raft.majority import VoteResult
from kraft.types import OffsetAndEpoch
from kraft.raft.roles import (
    CandidateState,
    EpochState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)
from kraft.raft.voters import ReplicaKey, VoterSetHistory


class IllegalTransitionError(RuntimeError):
    """A transition that QuorumState's table forbids: always a bug in the core."""


class QuorumState:
    def __init__(self, local: ReplicaKey, voters: VoterSetHistory, config: RaftConfig, rng,
                 emit: Callable[[object], None]):
        self.local = local
        self.voter_history = voters
        self.config = config
        self.rng = rng
        self._emit = emit
        self.state: EpochState = UnattachedState(0, None, None)
        self.persisted: ElectionState | None = None
        self.committed_offset = lambda: -1  # the local high watermark (set by the core)

    # --- queries --------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    def is_voter(self) -> bool:
        return self.voter_history.last().is_voter(self.local)

    def is_electable(self) -> bool:
        """May this replica campaign and vote? A voter of the latest voter set; also a voter
        that the latest change removed while that change may be uncommitted (Raft
        dissertation 4.2.2: it may still be needed to elect the leader that commits it —
        a stale voter may need its vote, or its longer log may be the one to win). Once the
        removal is known committed it stops; a wiped replica (new directory id) never
        matches either set."""
        h = self.voter_history
        if h.last().is_voter(self.local):
            return True
        prev = h.previous()
        return prev is not None and prev.is_voter(self.local) and self.committed_offset() <= h.last_offset()

    def leader_and_epoch(self) -> LeaderAndEpoch:
        return LeaderAndEpoch(self.state.leader_id, self.state.epoch)

    def random_election_timeout(self, now_ms: int) -> int:
        """A deadline uniformly in [T, 2T) from now (Raft section 5.2)."""
        t = self.config.election_timeout_ms
        return now_ms + t + int(self.rng.random() * t)

    # --- start-up -------------------------------------------------------------------
    def initialize(self, stored: ElectionState | None, log_end: OffsetAndEpoch, now_ms: int) -> None:
        election = stored if stored is not None else ElectionState.initial()
        voter = self.is_electable()
        if election.epoch < log_end.epoch:
            # The quorum-state file is older than the log: never go back in epochs.
            state = UnattachedState(log_end.epoch, None, self._voter_deadline(now_ms))
        elif voter and election.is_leader(self.local.id):
            state = ResignedState(election.epoch, self.local, self.voter_history.last().ids, (),
                                  self.random_election_timeout(now_ms))
        elif election.has_leader and election.leader_id != self.local.id:
            state = FollowerState(election.epoch, election.leader_id, election.voted_key,
                                  now_ms + self.config.fetch_timeout_ms, self.config.fetch_timeout_ms)
        else:
            state = UnattachedState(election.epoch, election.voted_key if voter else None,
                                    self._voter_deadline(now_ms))
        self.persisted = stored
        self._install(state)

    # --- transitions ------------------------------------------------------------------
    def transition_to_unattached(self, epoch: int, now_ms: int, voted_key: ReplicaKey | None = None) -> None:
        s = self.state
        if epoch > s.epoch:
            voted_key = None
        elif epoch == s.epoch and isinstance(s, ProspectiveState):
            voted_key = s.voted_key  # lost the pre-election, no leader known
        else:
            raise IllegalTransitionError(f"unattached in epoch {epoch} from {s}")
        self._install(UnattachedState(epoch, voted_key, self._voter_deadline(now_ms)))

    def transition_to_unattached_voted(self, epoch: int, candidate: ReplicaKey, now_ms: int,
                                       addressed: bool = False) -> None:
        s = self.state
        if not (self.is_electable() or addressed):
            raise IllegalTransitionError("an observer cannot vote")
        if epoch != s.epoch or not isinstance(s, (UnattachedState, ProspectiveState)) or s.voted_key is not None:
            raise IllegalTransitionError(f"vote for {candidate} in epoch {epoch} from {s}")
        if s.leader_id >= 0:
            raise IllegalTransitionError(f"vote in epoch {epoch} whose leader is known: {s}")
        # Voting resets the election timer, so the candidate we voted for can finish.
        self._install(UnattachedState(epoch, candidate, self.random_election_timeout(now_ms)))

    def transition_to_prospective(self, now_ms: int) -> ProspectiveState:
        s = self.state
        if not self.is_electable():
            raise IllegalTransitionError("an observer cannot start an election")
        if isinstance(s, (UnattachedState, FollowerState, ResignedState)):
            retries = 1
        elif isinstance(s, CandidateState) and s.backoff_until is not None:
            retries = s.retries + 1
        else:
            raise IllegalTransitionError(f"prospective from {s}")
        # Keep the leader we followed (losing returns to it) and any vote cast in this epoch
        # (a candidate or resigned leader voted for itself; that stays true).
        leader = s.leader_id if isinstance(s, FollowerState) else -1
        state = ProspectiveState(s.epoch, leader, s.voted_key, self.voter_history.last().ids, self.local.id,
                                 self.random_election_timeout(now_ms), retries)
        self._install(state)
        return state

    def transition_to_candidate(self, now_ms: int) -> CandidateState:
        s = self.state
        if not isinstance(s, ProspectiveState) or s.tally.result() is not VoteResult.WON:
            raise IllegalTransitionError(f"candidate from {s}")
        state = CandidateState(s.epoch + 1, self.local, self.voter_history.last().ids,
                               self.random_election_timeout(now_ms), s.retries)
        self._install(state)
        return state

    def transition_to_leader(self, epoch_start_offset: int, now_ms: int) -> LeaderState:
        s = self.state
        if not isinstance(s, CandidateState) or s.tally.result() is not VoteResult.WON:
            raise IllegalTransitionError(f"leader from {s}")
        c = self.config
        acc = BatchAccumulator(s.epoch, epoch_start_offset, c.append_linger_ms,
                               c.max_batch_size_bytes, c.max_records_per_batch)
        state = LeaderState(s.epoch, self.local, self.voter_history.last(), epoch_start_offset,
                            s.tally.granted, now_ms, c.check_quorum_timeout_ms, acc)
        self._install(state)
        return state

    def transition_to_follower(self, epoch: int, leader_id: int, now_ms: int) -> FollowerState:
        s = self.state
        if leader_id < 0 or leader_id == self.local.id:
            raise IllegalTransitionError(f"follow {leader_id}")
        if epoch < s.epoch:
            raise IllegalTransitionError(f"follower in older epoch {epoch} from {s}")
        if epoch == s.epoch:
            if isinstance(s, (LeaderState, ResignedState)):
                raise IllegalTransitionError(f"another leader {leader_id} in our epoch {epoch}")
            if isinstance(s, FollowerState) or (s.leader_id >= 0 and s.leader_id != leader_id):
                raise IllegalTransitionError(f"leader {leader_id} conflicts with {s}")
        voted = s.voted_key if epoch == s.epoch else None
        state = FollowerState(epoch, leader_id, voted, now_ms + self.config.fetch_timeout_ms,
                              self.config.fetch_timeout_ms)
        self._install(state)
        return state

    def transition_to_resigned(self, preferred_successors, now_ms: int) -> ResignedState:
        s = self.state
        if not isinstance(s, LeaderState):
            raise IllegalTransitionError(f"resigned from {s}")
        state = ResignedState(s.epoch, self.local, self.voter_history.last().ids, preferred_successors,
                              self.random_election_timeout(now_ms))
        self._install(state)
        return state

    # --- internals ----------------------------------------------------------------------
    def _voter_deadline(self, now_ms: int) -> int | None:
        return self.random_election_timeout(now_ms) if self.is_electable() else None

    def _install(self, state: EpochState) -> None:
        election = state.election()
        if self.persisted is not None and election.epoch < self.persisted.epoch:
            raise IllegalTransitionError(f"epoch would go back {self.persisted.epoch} -> {election.epoch}")
        if election != self.persisted:
            self._emit(PersistElection(election))  # durable before anything that depends on it
            self.persisted = election
        self.state = state
