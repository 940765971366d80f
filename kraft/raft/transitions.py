"""Role changes with their consequences: each ``become_*`` asks ``QuorumState`` for the
transition (the only place roles change) and then does what every role change implies —
in-flight requests are forgotten, a departing leader answers its parked fetches, listeners
hear of a new leader, a new leader writes its epoch's LeaderChange record.

Also what responses teach about epochs and leaders (Kafka's maybeTransition and
maybeHandleCommonResponse). No I/O: consequences are effects or log-port calls.
"""

from __future__ import annotations

from typing import Callable

from kraft.errors import ErrorCode
from kraft.raft.effects import LeaderChange
from kraft.raft.election import LeaderAndEpoch
from kraft.raft.leader import LeaderState
from kraft.raft.control_state import membership_control_batch
from kraft.raft.leader_replication import LeaderReplication
from kraft.raft.local_log import LocalLog
from kraft.raft.majority import VoteResult
from kraft.raft.quorum_state import QuorumState
from kraft.raft.requests import RequestTracker
from kraft.raft.roles import ProspectiveState, ResignedState
from kraft.raft.voters import ReplicaKey
from kraft.records import LeaderChangeMessage, build_control_record_batch

NONE = ErrorCode.NONE


class Transitions:
    def __init__(self, node_id: int, quorum: QuorumState, local_log: LocalLog, requests: RequestTracker,
                 leader_replication: LeaderReplication, emit: Callable[[object], None]):
        self.node_id = node_id
        self.quorum = quorum
        self.local_log = local_log
        self.requests = requests
        self.leader_replication = leader_replication
        self._emit = emit
        self._announced: LeaderAndEpoch | None = None

    # ------------------------------------------------------------ transitions
    def become_unattached(self, epoch: int, now: int) -> None:
        old = self.quorum.state
        self.quorum.transition_to_unattached(epoch, now)
        self._after_transition(old, now)

    def vote_for(self, candidate: ReplicaKey, now: int, addressed: bool = False) -> None:
        """Cast this epoch's vote (an unattached or prospective voter that has not voted;
        ``addressed``: asked by its exact replica key, see ``Elections.handle_vote_request``)."""
        q = self.quorum
        old = q.state
        q.transition_to_unattached_voted(old.epoch, candidate, now, addressed)
        if old is not q.state and isinstance(old, ProspectiveState):
            self._after_transition(old, now)

    def become_follower(self, epoch: int, leader_id: int, now: int) -> None:
        old = self.quorum.state
        self.quorum.transition_to_follower(epoch, leader_id, now)
        self._after_transition(old, now)

    def become_prospective(self, now: int) -> None:
        old = self.quorum.state
        s = self.quorum.transition_to_prospective(now)
        self._after_transition(old, now)
        if s.tally.result() is VoteResult.WON:  # the only voter
            self.become_candidate(now)

    def become_candidate(self, now: int) -> None:
        old = self.quorum.state
        s = self.quorum.transition_to_candidate(now)
        self._after_transition(old, now)
        if s.tally.result() is VoteResult.WON:
            self.become_leader(now)

    def become_leader(self, now: int) -> None:
        old = self.quorum.state
        local_log = self.local_log
        s = self.quorum.transition_to_leader(local_log.log.end_offset(), now)
        # Every epoch starts with a LeaderChange control record; committing it is what lets
        # the high watermark move in this epoch.
        data = build_control_record_batch(
            LeaderChangeMessage(self.node_id, tuple(sorted(s.voters.ids)), s.granting_voters),
            base_offset=s.epoch_start_offset, partition_leader_epoch=s.epoch, timestamp=now)
        control = local_log.control
        if control.kraft_version >= 1 and control.voters_from_bootstrap():
            # KIP-853: the voters of the bootstrap checkpoint go into the log with the first
            # epoch, so replicas that never saw that checkpoint (observers) learn them.
            data += membership_control_batch(s.voters, control.kraft_version, s.epoch_start_offset + 1,
                                             s.epoch, now)
        local_log.append_as_leader(data, s.epoch)
        s.start_appending_at(local_log.log.end_offset())
        s.update_local(local_log.flushed)
        local_log.request_flush()
        self._after_transition(old, now)

    def become_resigned(self, now: int) -> None:
        old = self.quorum.state
        self.quorum.transition_to_resigned(old.progress.followers_by_descending_end_offset(), now)
        self._after_transition(old, now)

    def lose_pre_election(self, s: ProspectiveState, now: int) -> None:
        if s.leader_id >= 0:
            self.become_follower(s.epoch, s.leader_id, now)
        else:
            self.become_unattached(s.epoch, now)

    def _after_transition(self, old, now: int) -> None:
        self.requests.reset_all()
        if isinstance(old, LeaderState):
            # Parked fetches get answered now (with the new epoch/leader) so followers move on.
            self.leader_replication.complete_parked(old, now, force=True)
        self.note_leader_change()

    def note_leader_change(self) -> None:
        s = self.quorum.state
        lae = LeaderAndEpoch(s.leader_id, s.epoch)
        if lae != self._announced:
            self._announced = lae
            start = s.epoch_start_offset if isinstance(s, LeaderState) else -1
            self._emit(LeaderChange(lae, start))

    # ------------------------------------------------------------ what messages teach
    def maybe_transition(self, leader_id: int, epoch: int, now: int) -> bool:
        """Move to a newer epoch, or follow a newly learned leader of this epoch. Returns
        False (and does nothing) if the claim contradicts what we know: two leaders in one
        epoch can only come from a bug, and we refuse to act on it."""
        s = self.quorum.state
        if epoch > s.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self.become_follower(epoch, leader_id, now)
            else:
                self.become_unattached(epoch, now)
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
        self.become_follower(epoch, leader_id, now)
        return True

    def common_response(self, error: int, leader_id: int, epoch: int, now: int):
        """Kafka's maybeHandleCommonResponse: returns True/False (handled; success or not),
        or None when the API-specific handler should go on."""
        s = self.quorum.state
        if epoch < s.epoch or error == ErrorCode.UNKNOWN_LEADER_EPOCH:
            return True  # we already moved on; the answer is irrelevant
        if epoch > s.epoch or error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER):
            self.maybe_transition(leader_id, epoch, now)
            # Learned something: retry at once. Told "not me" and nothing new: back off.
            return self.quorum.state is not s
        if leader_id >= 0 and leader_id != self.node_id and s.leader_id < 0:
            if not self.maybe_transition(leader_id, epoch, now):
                return False
            return None if error == NONE else True
        if error == NONE:
            return None
        if error == ErrorCode.INVALID_VOTER_KEY:
            return True
        return False  # BROKER_NOT_AVAILABLE, INCONSISTENT_CLUSTER_ID, INVALID_REQUEST, ...
