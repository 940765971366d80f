"""One class per non-leader role (Kafka's EpochState implementations).

Each role holds its epoch, what it knows of the leader and its vote, its timers as absolute
deadlines in ms, and answers ``can_grant_vote``. Roles never change themselves into other
roles: only ``QuorumState`` does that. Within a role, the rest of the core changes fields only
through the role's named methods (``back_off``, ``fetch_succeeded``, ...), never by assignment. ``LeaderState`` lives in ``leader.py``. No I/O, no
clock, no randomness (deadlines are computed by QuorumState and passed in).
"""

from __future__ import annotations

from kraft.raft.election import ElectionState
from kraft.raft.majority import VoteTally
from kraft.raft.voters import ReplicaKey


class EpochState:
    """What every role answers. ``leader_id`` is -1 when unknown."""

    name = "?"
    epoch: int
    leader_id: int = -1
    voted_key: ReplicaKey | None = None

    def election(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_key)

    def can_grant_vote(self, candidate: ReplicaKey, log_up_to_date: bool, pre_vote: bool,
                       now_ms: int) -> bool:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epoch={self.epoch}, leader={self.leader_id}, voted={self.voted_key})"


class UnattachedState(EpochState):
    """No known leader in ``epoch``; possibly voted. A voter starts a pre-election when
    ``election_deadline`` passes; an observer (deadline None) fetches from any voter."""

    name = "unattached"

    def __init__(self, epoch: int, voted_key: ReplicaKey | None, election_deadline: int | None):
        self.epoch = epoch
        self.voted_key = voted_key
        self.election_deadline = election_deadline

    def arm_election_timer(self, deadline_ms: int) -> None:
        self.election_deadline = deadline_ms

    def can_grant_vote(self, candidate, log_up_to_date, pre_vote, now_ms):
        if pre_vote or self.voted_key is None:
            return log_up_to_date
        # Re-granting to the candidate we voted for is idempotent (lost responses).
        return self.voted_key.matches(candidate)


class ProspectiveState(EpochState):
    """KIP-996 pre-election in ``epoch`` (not bumped). Keeps the leader it followed and its
    vote, so that losing the pre-election returns it to where it was."""

    name = "prospective"

    def __init__(self, epoch: int, leader_id: int, voted_key: ReplicaKey | None, voter_ids,
                 local_id: int, election_deadline: int, retries: int):
        self.epoch = epoch
        self.leader_id = leader_id
        self.voted_key = voted_key
        self.tally = VoteTally(voter_ids)
        self.tally.record(local_id, True)
        self.election_deadline = election_deadline
        self.retries = retries

    def record_vote(self, voter_id: int, granted: bool) -> None:
        self.tally.record(voter_id, granted)

    def voter_now_campaigns(self, voter_id: int) -> bool:
        """``voter_id`` refused our pre-vote (still following the old leader) but now asks
        for one itself: it no longer defends that leader, so ask it again. True if so."""
        return self.tally.reconsider(voter_id)

    def can_grant_vote(self, candidate, log_up_to_date, pre_vote, now_ms):
        if pre_vote:
            return log_up_to_date
        if self.voted_key is not None:
            return self.voted_key.matches(candidate)
        # A leader is known for this epoch: a standard vote for it is never needed.
        return self.leader_id < 0 and log_up_to_date


class CandidateState(EpochState):
    """Election in ``epoch`` (bumped), voted for itself. After losing or timing out it backs
    off (``backoff_until``) before the next pre-election."""

    name = "candidate"

    def __init__(self, epoch: int, local: ReplicaKey, voter_ids, election_deadline: int, retries: int):
        self.epoch = epoch
        self.voted_key = local
        self.tally = VoteTally(voter_ids)
        self.tally.record(local.id, True)
        self.election_deadline = election_deadline
        self.retries = retries
        self.backoff_until: int | None = None

    def record_vote(self, voter_id: int, granted: bool) -> None:
        self.tally.record(voter_id, granted)

    def back_off(self, until_ms: int) -> None:
        """The election is lost or timed out: wait until ``until_ms``, then pre-vote again."""
        self.backoff_until = until_ms

    def can_grant_vote(self, candidate, log_up_to_date, pre_vote, now_ms):
        if pre_vote:
            return log_up_to_date
        return False  # voted for itself in this epoch


class FollowerState(EpochState):
    """Following ``leader_id`` in ``epoch``. Invariant: ``high_watermark`` never decreases
    within the epoch and never exceeds the local flushed end offset."""

    name = "follower"

    def __init__(self, epoch: int, leader_id: int, voted_key: ReplicaKey | None,
                 fetch_deadline: int, fetch_timeout_ms: int):
        self.epoch = epoch
        self.leader_id = leader_id
        self.voted_key = voted_key
        self.fetch_deadline = fetch_deadline
        self.fetch_timeout_ms = fetch_timeout_ms
        self.high_watermark = -1
        self.leader_high_watermark = -1  # as last reported by the leader in a valid response
        self.fetching_snapshot = None  # RawSnapshotWriter while downloading a snapshot
        self.last_fetch_ok_ms = -1  # last successful Fetch/FetchSnapshot response
        self.leader_resigned = False  # the leader sent EndQuorumEpoch

    def fetch_succeeded(self, now_ms: int) -> None:
        self.last_fetch_ok_ms = now_ms
        self.fetch_deadline = now_ms + self.fetch_timeout_ms

    def restart_fetching(self, now_ms: int) -> None:
        """Drop any snapshot download; the next request is a Fetch."""
        self.fetching_snapshot = None
        self.fetch_deadline = now_ms + self.fetch_timeout_ms

    def start_snapshot_download(self, writer) -> None:
        self.fetching_snapshot = writer

    def end_snapshot_download(self) -> None:
        self.fetching_snapshot = None

    def note_leader_high_watermark(self, hw: int) -> None:
        if hw > self.leader_high_watermark:
            self.leader_high_watermark = hw

    def advance_high_watermark(self, hw: int) -> bool:
        """Raise the high watermark to ``hw`` (never lowers it); True if it moved."""
        if hw > self.high_watermark:
            self.high_watermark = hw
            return True
        return False

    def note_leader_resigned(self, election_deadline_ms: int) -> None:
        """The leader sent EndQuorumEpoch: stop defending it against pre-votes, and start an
        election no later than ``election_deadline_ms``."""
        self.leader_resigned = True
        self.fetch_deadline = min(self.fetch_deadline, election_deadline_ms)

    def has_recently_fetched(self, now_ms: int) -> bool:
        return self.last_fetch_ok_ms >= 0 and now_ms - self.last_fetch_ok_ms < self.fetch_timeout_ms

    def can_grant_vote(self, candidate, log_up_to_date, pre_vote, now_ms):
        if pre_vote:
            # KIP-996: a follower that still hears from its leader refuses to help unseat it.
            return log_up_to_date and (self.leader_resigned or not self.has_recently_fetched(now_ms))
        return False


class ResignedState(EpochState):
    """A leader of ``epoch`` that stepped down (check-quorum, graceful resignation, or a
    restart after leading). It tells voters with EndQuorumEpoch until they acknowledge,
    and never leads ``epoch`` again."""

    name = "resigned"

    def __init__(self, epoch: int, local: ReplicaKey, voter_ids, preferred_successors,
                 election_deadline: int):
        self.epoch = epoch
        self.leader_id = local.id
        self.voted_key = local
        self.preferred_successors = tuple(preferred_successors)
        self.unacked = set(voter_ids) - {local.id}
        self.election_deadline = election_deadline

    def acknowledged(self, voter_id: int) -> None:
        """``voter_id`` answered our EndQuorumEpoch."""
        self.unacked.discard(voter_id)

    def can_grant_vote(self, candidate, log_up_to_date, pre_vote, now_ms):
        return pre_vote and log_up_to_date
