"""Election RPCs of the Raft core: Vote (with KIP-996 pre-vote), BeginQuorumEpoch,
EndQuorumEpoch and DescribeQuorum, and the epoch/leader handling common to all responses.

A mixin of ``RaftCore`` (it uses the core's quorum, log, requests and transition methods);
split out only to keep files small. Handlers return response messages or a success flag;
they never perform I/O.
"""

from __future__ import annotations

from kraft.errors import ErrorCode
from kraft.raft.leader import LeaderState
from kraft.raft.majority import VoteResult
from kraft.raft.messages import (
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochResponse,
    OffsetAndEpoch,
    VoteResponse,
)
from kraft.raft.roles import CandidateState, FollowerState, ProspectiveState, ResignedState, UnattachedState
from kraft.raft.voters import ReplicaKey

NONE = ErrorCode.NONE


class ElectionRpcs:
    # ------------------------------------------------------------ shared checks
    def _cluster_ok(self, cluster_id) -> bool:
        """A request without a cluster id is accepted (as Kafka does)."""
        return cluster_id is None or self.config.cluster_id is None or cluster_id == self.config.cluster_id

    def _voter_key_ok(self, voter_id: int, directory_id) -> bool:
        """Was this request meant for this replica (KIP-853 voter key)? -1 = unspecified."""
        if voter_id < 0:
            return True
        return self.local.matches(ReplicaKey(voter_id, directory_id))

    def _common_response(self, error: int, leader_id: int, epoch: int, now: int):
        """Kafka's maybeHandleCommonResponse: returns True/False (handled; success or not),
        or None when the API-specific handler should go on."""
        s = self.quorum.state
        if epoch < s.epoch or error == ErrorCode.UNKNOWN_LEADER_EPOCH:
            return True  # we already moved on; the answer is irrelevant
        if epoch > s.epoch or error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
            self._maybe_transition(leader_id, epoch, now)
            # Learned something: retry at once. Told "not me" and nothing new: back off.
            return self.quorum.state is not s
        if leader_id >= 0 and leader_id != self.node_id and s.leader_id < 0:
            if not self._maybe_transition(leader_id, epoch, now):
                return False
            return None if error == NONE else True
        if error == NONE:
            return None
        if error == ErrorCode.INVALID_VOTER_KEY:
            return True
        return False  # BROKER_NOT_AVAILABLE, INCONSISTENT_CLUSTER_ID, INVALID_REQUEST, ...

    # ------------------------------------------------------------ Vote
    def _handle_vote_request(self, source: int, r, now: int) -> VoteResponse:
        q = self.quorum
        if not self._cluster_ok(r.cluster_id):
            return VoteResponse(ErrorCode.INCONSISTENT_CLUSTER_ID, q.leader_id, q.epoch)
        # A pre-vote carries the prospective's current epoch; a real vote a bumped one.
        bad_epoch = r.last_offset_epoch > r.candidate_epoch if r.pre_vote else r.last_offset_epoch >= r.candidate_epoch
        if r.last_offset < 0 or r.last_offset_epoch < 0 or bad_epoch or r.candidate_id < 0:
            return VoteResponse(ErrorCode.INVALID_REQUEST, q.leader_id, q.epoch)
        if r.candidate_epoch < q.epoch:
            return VoteResponse(ErrorCode.FENCED_LEADER_EPOCH, q.leader_id, q.epoch)
        if r.candidate_epoch > q.epoch and not r.pre_vote:
            self._become_unattached(r.candidate_epoch, now)
        if not self._voter_key_ok(r.voter_id, r.voter_directory_id):
            return VoteResponse(ErrorCode.INVALID_VOTER_KEY, q.leader_id, q.epoch)
        candidate = ReplicaKey(r.candidate_id, r.candidate_directory_id)
        voters = self.voter_history.last()
        granted = False
        if q.is_voter() and voters.is_voter(candidate) and candidate.id != self.node_id:
            log = self.log
            theirs = OffsetAndEpoch(r.last_offset, r.last_offset_epoch)
            ours = OffsetAndEpoch(log.end_offset(), log.last_fetched_epoch())
            up_to_date = theirs >= ours
            s = q.state
            granted = s.can_grant_vote(candidate, up_to_date, r.pre_vote, now)
            if (granted and r.pre_vote and isinstance(s, ProspectiveState) and theirs == ours
                    and candidate.id < self.node_id):
                # Two prospectives with equal logs (their leader died, both timed out together)
                # would each win the other's pre-vote and split the real vote. Pre-votes change
                # no durable state, so breaking the tie by id is safe: the higher id wins.
                granted = False
            if granted and not r.pre_vote and isinstance(s, (UnattachedState, ProspectiveState)) \
                    and s.voted_key is None:
                old = s
                q.transition_to_unattached_voted(s.epoch, candidate, now)
                if old is not q.state and isinstance(old, ProspectiveState):
                    self._after_transition(old, now)
        return VoteResponse(NONE, q.leader_id, q.epoch, granted)

    def _handle_vote_response(self, source: int, request, r: VoteResponse, now: int) -> bool:
        if r.error_code != NONE:
            handled = self._common_response(r.error_code, r.leader_id, r.leader_epoch, now)
            return bool(handled)
        s = self.quorum.state
        if r.leader_epoch > s.epoch or (r.leader_epoch == s.epoch and r.leader_id >= 0
                                        and r.leader_id != self.node_id and s.leader_id < 0):
            # Someone knows a newer epoch, or a leader of our epoch we did not know: follow it.
            # (A prospective that already knew that leader just counts the answer.)
            self._maybe_transition(r.leader_id, r.leader_epoch, now)
            return True
        if request.pre_vote:
            if isinstance(s, ProspectiveState) and request.candidate_epoch == s.epoch:
                s.tally.record(source, r.vote_granted)
                result = s.tally.result()
                if result is VoteResult.WON:
                    self._become_candidate(now)
                elif result is VoteResult.LOST:
                    self._lose_pre_election(s, now)
        elif isinstance(s, CandidateState) and request.candidate_epoch == s.epoch:
            s.tally.record(source, r.vote_granted)
            result = s.tally.result()
            if result is VoteResult.WON:
                self._become_leader(now)
            elif result is VoteResult.LOST and s.backoff_until is None:
                # Rejected by enough voters: back off at once rather than wait out the timeout.
                s.backoff_until = now + self._election_backoff(s.retries)
        return True

    # ------------------------------------------------------------ BeginQuorumEpoch
    def _handle_begin_quorum_epoch_request(self, source: int, r, now: int) -> BeginQuorumEpochResponse:
        q = self.quorum
        if not self._cluster_ok(r.cluster_id):
            return BeginQuorumEpochResponse(ErrorCode.INCONSISTENT_CLUSTER_ID, q.leader_id, q.epoch)
        if r.leader_epoch < q.epoch:
            return BeginQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, q.leader_id, q.epoch)
        if r.leader_id < 0:
            return BeginQuorumEpochResponse(ErrorCode.INVALID_REQUEST, q.leader_id, q.epoch)
        if not self._maybe_transition(r.leader_id, r.leader_epoch, now):
            return BeginQuorumEpochResponse(ErrorCode.INVALID_REQUEST, q.leader_id, q.epoch)
        if not self._voter_key_ok(r.voter_id, r.voter_directory_id):
            return BeginQuorumEpochResponse(ErrorCode.INVALID_VOTER_KEY, q.leader_id, q.epoch)
        return BeginQuorumEpochResponse(NONE, q.leader_id, q.epoch)

    def _handle_begin_quorum_epoch_response(self, source: int, r, now: int) -> bool:
        handled = self._common_response(r.error_code, r.leader_id, r.leader_epoch, now)
        if handled is not None:
            return handled
        s = self.quorum.state
        if isinstance(s, LeaderState):
            p = s.progress.voters.get(source)
            if p is not None:
                p.acknowledged = True
        return True

    # ------------------------------------------------------------ EndQuorumEpoch
    def _handle_end_quorum_epoch_request(self, source: int, r, now: int) -> EndQuorumEpochResponse:
        q = self.quorum
        if not self._cluster_ok(r.cluster_id):
            return EndQuorumEpochResponse(ErrorCode.INCONSISTENT_CLUSTER_ID, q.leader_id, q.epoch)
        if r.leader_epoch < q.epoch:
            return EndQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, q.leader_id, q.epoch)
        if r.leader_id < 0:
            return EndQuorumEpochResponse(ErrorCode.INVALID_REQUEST, q.leader_id, q.epoch)
        if not self._maybe_transition(r.leader_id, r.leader_epoch, now):
            return EndQuorumEpochResponse(ErrorCode.INVALID_REQUEST, q.leader_id, q.epoch)
        s = q.state
        if isinstance(s, FollowerState) and s.leader_id == r.leader_id and s.epoch == r.leader_epoch:
            # The leader is going away: stop defending it against pre-votes, and start an
            # election sooner the higher we rank among its preferred successors.
            s.leader_resigned = True
            s.fetch_deadline = min(s.fetch_deadline, now + self._end_epoch_backoff(r.preferred_successors))
        return EndQuorumEpochResponse(NONE, q.leader_id, q.epoch)

    def _end_epoch_backoff(self, successors) -> int:
        """Kafka's strict exponential backoff by position among the preferred successors."""
        max_ms = self.config.election_backoff_max_ms
        successors = list(successors)
        if self.node_id not in successors:
            return max_ms
        pos = successors.index(self.node_id)
        if pos == 0:
            return 0
        base = max_ms >> (len(successors) - 1)
        return min(max_ms, base << (pos - 1))

    def _handle_end_quorum_epoch_response(self, source: int, r, now: int) -> bool:
        handled = self._common_response(r.error_code, r.leader_id, r.leader_epoch, now)
        if handled is not None:
            return handled
        s = self.quorum.state
        if isinstance(s, ResignedState):
            s.unacked.discard(source)
        return True

    # ------------------------------------------------------------ DescribeQuorum
    def _handle_describe_quorum_request(self, r) -> DescribeQuorumResponse:
        s = self.quorum.state
        if not isinstance(s, LeaderState):
            return DescribeQuorumResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, s.leader_id, s.epoch)
        return DescribeQuorumResponse(NONE, self.node_id, s.epoch, s.high_watermark,
                                      s.progress.describe_voters(self._now), s.progress.describe_observers(self._now))
