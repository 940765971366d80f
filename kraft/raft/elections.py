"""Elections: Vote (with KIP-996 pre-vote), BeginQuorumEpoch, EndQuorumEpoch and
DescribeQuorum, and the timers of the roles that elect or announce a leader (prospective,
candidate, unattached voter, resigned leader, a leader's BeginQuorumEpoch rounds).

Requests and responses are Kafka's protocol objects (``rpcs``). Request handlers return
response messages; response handlers return a success flag (the request tracker backs off on
failure; a top-level error or an answer without our partition is a failure, as in Kafka).
Roles change only through ``Transitions`` (which goes through QuorumState) or named methods
on the role states. No I/O.
"""

from __future__ import annotations

from kraft.errors import ErrorCode
from kraft.raft.config import RaftConfig
from kraft.raft.leader import LeaderState
from kraft.raft.local_log import LocalLog
from kraft.raft.majority import VoteResult
from kraft.raft.quorum_state import QuorumState
from kraft.raft.requests import Outbox
from kraft.raft.rpcs import (begin_quorum_epoch_request, begin_quorum_epoch_response, describe_quorum_response,
                             describe_quorum_unknown_partitions, end_quorum_epoch_request, end_quorum_epoch_response,
                             directory_bytes, named_partition, response_partition, vote_request, vote_response)
from kraft.raft.roles import (
    CandidateState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    UnattachedState,
)
from kraft.raft.transitions import Transitions
from kraft.raft.validation import cluster_ok, vote_request_malformed, voter_key_ok
from kraft.raft.voters import ReplicaKey, VoterSetHistory
from kraft.types import OffsetAndEpoch

NONE = ErrorCode.NONE
NO_DEADLINE = 1 << 62


class Elections:
    def __init__(self, local: ReplicaKey, quorum: QuorumState, local_log: LocalLog,
                 voter_history: VoterSetHistory, outbox: Outbox, transitions: Transitions,
                 config: RaftConfig, rng):
        self.local = local
        self.node_id = local.id
        self.quorum = quorum
        self.local_log = local_log
        self.voter_history = voter_history
        self.outbox = outbox
        self.transitions = transitions
        self.config = config
        self.rng = rng
        self._last_peer_gone_ms = -(1 << 62)
        self.describe_target = lambda: None  # the reassignment target (the core sets this)
        self.local_endpoints: tuple = ()  # our listeners, announced in BeginQuorumEpoch

    # ------------------------------------------------------------ timers
    def poll_candidate(self, s: CandidateState, now: int) -> int:
        if s.backoff_until is not None:
            if now >= s.backoff_until:
                self.transitions.become_prospective(now)
                return now
            return s.backoff_until
        if now >= s.election_deadline:
            s.back_off(now + self._election_backoff(s.retries))
            return s.backoff_until
        return min(s.election_deadline, self._solicit_votes(s, False, now))

    def poll_prospective(self, s: ProspectiveState, now: int) -> int:
        if now >= s.election_deadline:
            self.transitions.lose_pre_election(s, now)
            return now
        return min(s.election_deadline, self._solicit_votes(s, True, now))

    def poll_unattached_voter(self, s: UnattachedState, now: int) -> int:
        if s.election_deadline is None:  # an observer that a Voters record made a voter
            s.arm_election_timer(self.quorum.random_election_timeout(now))
        if now >= s.election_deadline:
            self.transitions.become_prospective(now)
            return now
        return s.election_deadline

    def poll_resigned(self, s: ResignedState, now: int) -> int:
        if now >= s.election_deadline:
            if self.quorum.is_electable():
                self.transitions.become_prospective(now)
            else:
                self.transitions.become_unattached(s.epoch + 1, now)
            return now
        deadline = s.election_deadline
        request = end_quorum_epoch_request(self.node_id, s.epoch, s.preferred_successors, self.config.cluster_id)
        for voter in sorted(s.unacked):
            deadline = min(deadline, self.outbox.send_if_ready(voter, lambda: request, now))
        return deadline

    def send_begin_epoch(self, s: LeaderState, now: int) -> int:
        """The leader's periodic BeginQuorumEpoch round; returns when the next one is due."""
        if now >= s.begin_epoch_due:
            s.begin_epoch_sent(now + self.config.begin_quorum_epoch_interval_ms)
            requests = self.outbox.requests
            for voter in s.voters.keys():
                if voter.id != self.node_id and requests.is_ready(voter.id, now):
                    self.outbox.send(voter.id, begin_quorum_epoch_request(
                        self.node_id, s.epoch, voter.id, voter.directory_id, self.config.cluster_id,
                        self.local_endpoints), now)
        return s.begin_epoch_due

    def _solicit_votes(self, s, pre_vote: bool, now: int) -> int:
        """Send (pre-)vote requests to voters that have not answered, once our log position
        is durable (we never claim an offset we might lose)."""
        if s.tally.result() is VoteResult.LOST or not self.local_log.position_durable():
            return NO_DEADLINE
        deadline = NO_DEADLINE
        log = self.local_log.log
        for voter_id in s.tally.unrecorded():
            voter = self.voter_history.last().key(voter_id)
            request = vote_request(s.epoch, self.node_id, log.last_fetched_epoch(), log.end_offset(),
                                  pre_vote, self.local.directory_id, voter_id,
                                  voter.directory_id if voter else None, self.config.cluster_id)
            deadline = min(deadline, self.outbox.send_if_ready(voter_id, lambda: request, now))
        return deadline

    def on_peer_gone(self, peer: int, now: int) -> None:
        """A voter following ``peer`` learned that the leader's process is gone (connection
        closed, reset or refused: what ZooKeeper's followers act on at a crash). Instead of
        waiting out the fetch timeout it starts a pre-vote at once; pre-vote keeps this safe,
        since voters still hearing from a live leader refuse it. At most once per election
        timeout, so a leader unreachable to only this voter cannot make it spin."""
        s = self.quorum.state
        if (type(s) is FollowerState and s.leader_id == peer and self.quorum.is_electable()
                and now - self._last_peer_gone_ms >= self.config.election_timeout_ms):
            self._last_peer_gone_ms = now
            self.transitions.become_prospective(now)

    def _election_backoff(self, retries: int) -> int:
        """Binary exponential backoff, randomised, capped at election.backoff.max.ms."""
        c = self.config
        slots = 2 << min(20, max(retries, 1) - 1)
        return min(c.election_backoff_base_ms * int(self.rng.random() * slots), c.election_backoff_max_ms)

    # ------------------------------------------------------------ Vote
    def handle_vote_request(self, source: int, r, now: int):
        q = self.quorum
        if not cluster_ok(self.config.cluster_id, r.cluster_id):
            return vote_response(ErrorCode.INCONSISTENT_CLUSTER_ID, q.leader_id, q.epoch)
        p = named_partition(r)
        if p is None:
            return vote_response(ErrorCode.INVALID_REQUEST, -1, -1)
        if vote_request_malformed(p):
            return vote_response(ErrorCode.INVALID_REQUEST, q.leader_id, q.epoch)
        candidate_epoch, pre_vote = p.replica_epoch, p.pre_vote
        if candidate_epoch < q.epoch:
            return vote_response(ErrorCode.FENCED_LEADER_EPOCH, q.leader_id, q.epoch)
        if candidate_epoch > q.epoch and not pre_vote:
            self.transitions.become_unattached(candidate_epoch, now)
        if not voter_key_ok(self.local, r.voter_id, directory_bytes(p.voter_directory_id)):
            return vote_response(ErrorCode.INVALID_VOTER_KEY, q.leader_id, q.epoch)
        candidate = ReplicaKey(p.replica_id, directory_bytes(p.replica_directory_id))
        voters = self.voter_history.last()
        # KIP-853 / Raft dissertation 4.1: a replica whose log has not yet caught up with its
        # own addition is still asked for its vote, by its exact replica key; it answers on
        # the logs alone. A candidate we know under another directory is a wiped replica.
        addressed = (r.voter_id == self.node_id and self.local.directory_id is not None
                     and directory_bytes(p.voter_directory_id) == self.local.directory_id)
        known = voters.key(candidate.id)
        candidate_ok = voters.is_voter(candidate) if known is not None or not addressed else True
        granted = False
        if (q.is_electable() or addressed) and candidate_ok and candidate.id != self.node_id:
            log = self.local_log.log
            theirs = OffsetAndEpoch(p.last_offset, p.last_offset_epoch)
            ours = OffsetAndEpoch(log.end_offset(), log.last_fetched_epoch())
            up_to_date = theirs >= ours
            s = q.state
            granted = s.can_grant_vote(candidate, up_to_date, pre_vote, now)
            if (granted and pre_vote and isinstance(s, ProspectiveState) and theirs == ours
                    and candidate.id < self.node_id):
                # Two prospectives with equal logs (their leader died, both timed out together)
                # would each win the other's pre-vote and split the real vote. Pre-votes change
                # no durable state, so breaking the tie by id is safe: the higher id wins.
                granted = False
            if granted and not pre_vote and isinstance(s, (UnattachedState, ProspectiveState)) \
                    and s.voted_key is None:
                self.transitions.vote_for(candidate, now, addressed)
            if pre_vote and isinstance(s, ProspectiveState) and candidate_epoch == s.epoch:
                # Whoever refused us while it still followed the old leader and now campaigns
                # itself would answer differently: ask again (the poll after this step does).
                s.voter_now_campaigns(candidate.id)
        return vote_response(NONE, q.leader_id, q.epoch, granted)

    def handle_vote_response(self, source: int, request, r, now: int) -> bool:
        p = response_partition(r)
        if r.error_code or p is None:
            return False
        t = self.transitions
        if p.error_code != NONE:
            handled = t.common_response(p.error_code, p.leader_id, p.leader_epoch, now)
            return bool(handled)
        s = self.quorum.state
        if p.leader_epoch > s.epoch or (p.leader_epoch == s.epoch and p.leader_id >= 0
                                        and p.leader_id != self.node_id and s.leader_id < 0):
            # Someone knows a newer epoch, or a leader of our epoch we did not know: follow it.
            # (A prospective that already knew that leader just counts the answer.)
            t.maybe_transition(p.leader_id, p.leader_epoch, now)
            return True
        asked = request.topics[0].partitions[0]
        if asked.pre_vote:
            if isinstance(s, ProspectiveState) and asked.replica_epoch == s.epoch:
                s.record_vote(source, p.vote_granted)
                result = s.tally.result()
                if result is VoteResult.WON:
                    t.become_candidate(now)
                elif result is VoteResult.LOST:
                    t.lose_pre_election(s, now)
        elif isinstance(s, CandidateState) and asked.replica_epoch == s.epoch:
            s.record_vote(source, p.vote_granted)
            result = s.tally.result()
            if result is VoteResult.WON:
                t.become_leader(now)
            elif result is VoteResult.LOST and s.backoff_until is None:
                # Rejected by enough voters: back off at once rather than wait out the timeout.
                s.back_off(now + self._election_backoff(s.retries))
        return True

    # ------------------------------------------------------------ BeginQuorumEpoch
    def _leader_announcement(self, r, respond, now: int):
        """(refusal, partition): the checks BeginQuorumEpoch and EndQuorumEpoch share — cluster
        id, the one partition, a current epoch, a named leader — and the move to that leader's
        epoch. ``respond(code, leader_id, epoch)`` builds the refusal."""
        q = self.quorum
        if not cluster_ok(self.config.cluster_id, r.cluster_id):
            return respond(ErrorCode.INCONSISTENT_CLUSTER_ID, q.leader_id, q.epoch), None
        p = named_partition(r)
        if p is None:
            return respond(ErrorCode.INVALID_REQUEST, -1, -1), None
        if p.leader_epoch < q.epoch:
            return respond(ErrorCode.FENCED_LEADER_EPOCH, q.leader_id, q.epoch), None
        if p.leader_id < 0:
            return respond(ErrorCode.INVALID_REQUEST, q.leader_id, q.epoch), None
        if not self.transitions.maybe_transition(p.leader_id, p.leader_epoch, now):
            return respond(ErrorCode.INVALID_REQUEST, q.leader_id, q.epoch), None
        return None, p

    def handle_begin_quorum_epoch_request(self, source: int, r, now: int):
        q = self.quorum
        refused, p = self._leader_announcement(r, begin_quorum_epoch_response, now)
        if refused is not None:
            return refused
        if not voter_key_ok(self.local, r.voter_id, directory_bytes(p.voter_directory_id)):
            return begin_quorum_epoch_response(ErrorCode.INVALID_VOTER_KEY, q.leader_id, q.epoch)
        return begin_quorum_epoch_response(NONE, q.leader_id, q.epoch)

    def handle_begin_quorum_epoch_response(self, source: int, r, now: int) -> bool:
        p = response_partition(r)
        if r.error_code or p is None:
            return False
        handled = self.transitions.common_response(p.error_code, p.leader_id, p.leader_epoch, now)
        if handled is not None:
            return handled
        s = self.quorum.state
        if isinstance(s, LeaderState):
            s.begin_epoch_acknowledged(source)
        return True

    # ------------------------------------------------------------ EndQuorumEpoch
    def handle_end_quorum_epoch_request(self, source: int, r, now: int):
        q = self.quorum
        refused, p = self._leader_announcement(r, end_quorum_epoch_response, now)
        if refused is not None:
            return refused
        s = q.state
        if isinstance(s, FollowerState) and s.leader_id == p.leader_id and s.epoch == p.leader_epoch:
            # The leader is going away: start an election sooner the higher we rank among
            # its preferred successors.
            successors = [c.candidate_id for c in p.preferred_candidates]
            s.note_leader_resigned(now + self._end_epoch_backoff(successors))
        return end_quorum_epoch_response(NONE, q.leader_id, q.epoch)

    def _end_epoch_backoff(self, successors: list) -> int:
        """Kafka's strict exponential backoff by position among the preferred successors."""
        max_ms = self.config.election_backoff_max_ms
        if self.node_id not in successors:
            return max_ms
        pos = successors.index(self.node_id)
        if pos == 0:
            return 0
        base = max_ms >> (len(successors) - 1)
        return min(max_ms, base << (pos - 1))

    def handle_end_quorum_epoch_response(self, source: int, r, now: int) -> bool:
        p = response_partition(r)
        if r.error_code or p is None:
            return False
        handled = self.transitions.common_response(p.error_code, p.leader_id, p.leader_epoch, now)
        if handled is not None:
            return handled
        s = self.quorum.state
        if isinstance(s, ResignedState):
            s.acknowledged(source)
        return True

    # ------------------------------------------------------------ DescribeQuorum
    def handle_describe_quorum_request(self, r, now: int):
        if named_partition(r) is None:
            return describe_quorum_unknown_partitions(r)
        s = self.quorum.state
        if not isinstance(s, LeaderState):
            return describe_quorum_response(ErrorCode.NOT_LEADER_OR_FOLLOWER, s.leader_id, s.epoch)
        return describe_quorum_response(NONE, self.node_id, s.epoch, s.high_watermark,
                                        s.progress.describe_voters(now), s.progress.describe_observers(now),
                                        self.describe_target())
