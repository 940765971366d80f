"""LeaderState: the leader's view of its epoch (Kafka's LeaderState).

Holds follower progress, the high watermark, the check-quorum and BeginQuorumEpoch
timers, the batch accumulator and the long-poll fetches parked until data arrives. The
high watermark rule (REFERENCE.md section 5) is here and nowhere else. The rest of the core
changes these fields only through the named methods below. No I/O: the core reads the log
and hands offsets in.
"""

from __future__ import annotations

from kraft.raft.accumulator import BatchAccumulator
from kraft.raft.backlog import UncommittedBacklog
from kraft.raft.majority import majority_offset
from kraft.raft.progress import ProgressTracker, ReplicaProgress
from kraft.raft.roles import EpochState
from kraft.raft.voters import ReplicaKey, VoterSet


class ParkedFetch:
    """A valid Fetch that found no new data and waits up to its max wait."""

    __slots__ = ("handle", "request", "partition", "deadline", "hw_seen")

    def __init__(self, handle, request, partition, deadline: int, hw_seen: int):
        self.handle = handle
        self.request = request  # the FetchRequest, and its one partition
        self.partition = partition
        self.deadline = deadline
        self.hw_seen = hw_seen


class LeaderState(EpochState):
    """Leader of ``epoch``.

    Invariants: ``high_watermark`` never decreases; it is -1 until a majority of voters
    (the leader counted with its *flushed* end offset) hold an offset above
    ``epoch_start_offset`` (the epoch's LeaderChange record); a leader never truncates.
    """

    name = "leader"

    def __init__(self, epoch: int, local: ReplicaKey, voters: VoterSet, epoch_start_offset: int,
                 granting_voters, now_ms: int, check_quorum_timeout_ms: int,
                 accumulator: BatchAccumulator):
        self.epoch = epoch
        self.leader_id = local.id
        self.voted_key = local
        self.local = local
        self.voters = voters
        self.epoch_start_offset = epoch_start_offset
        self.granting_voters = tuple(sorted(granting_voters))
        self.progress = ProgressTracker(local, voters)
        if voters.key(local.id) is None:  # elected while its own removal is uncommitted
            self.progress.observers[local] = ReplicaProgress(local)
        self.high_watermark = -1
        self.check_quorum_timeout_ms = check_quorum_timeout_ms
        # A single voter is its own quorum and never resigns for lack of fetches.
        self.check_quorum_deadline = None if voters.is_only_voter(local) else now_ms + check_quorum_timeout_ms
        self.begin_epoch_due = now_ms
        self.accumulator = accumulator
        self.backlog = UncommittedBacklog()  # appends of this epoch not committed yet
        self.parked: list[ParkedFetch] = []
        self.hw_changed_ms = -1  # when the high watermark last moved (parked fetches learn it)
        # replica id -> the high watermark in the last Fetch answer it got: a parked fetch is
        # answered once the HW differs from what its replica knows (not from what the HW was
        # when it parked: the fetch that moves the HW would otherwise never carry it)
        self.hw_sent: dict[int, int] = {}
        self.resign_requested = False
        # node id -> the directory id its latest valid Fetch carried (a static voter set has
        # none; upgrading kraft.version to 1 writes them into the Voters record)
        self.fetched_directories: dict[int, bytes] = {}

    def can_grant_vote(self, candidate, log_up_to_date, pre_vote, now_ms):
        return False

    def request_resignation(self) -> None:
        self.resign_requested = True

    def start_appending_at(self, offset: int) -> None:
        """The epoch's LeaderChange record is in the log; proposals go from ``offset`` on."""
        self.accumulator.next_offset = offset

    def begin_epoch_sent(self, next_due_ms: int) -> None:
        self.begin_epoch_due = next_due_ms

    def begin_epoch_acknowledged(self, voter_id: int) -> None:
        p = self.progress.voters.get(voter_id)
        if p is not None:
            p.acknowledged = True

    def park(self, fetch: ParkedFetch) -> None:
        self.parked.append(fetch)

    def keep_parked(self, still_waiting: list[ParkedFetch]) -> None:
        """The parked fetches that remain after the others were answered."""
        self.parked = still_waiting

    def high_watermark_announced(self, now_ms: int) -> None:
        """The core published the new high watermark at ``now_ms``."""
        self.hw_changed_ms = now_ms

    def _maybe_advance_high_watermark(self) -> bool:
        candidate = majority_offset(self.progress.voter_end_offsets())
        # The leader must first commit a record of its own epoch (KIP-595; KAFKA-12619).
        if candidate > self.epoch_start_offset and candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def update_local(self, flushed_end_offset: int) -> bool:
        """The leader's log is durable up to ``flushed_end_offset``; True if the HW moved."""
        return self.progress.update_local(flushed_end_offset) and self._maybe_advance_high_watermark()

    def update_replica(self, key: ReplicaKey, fetch_offset: int, now_ms: int, leader_end: int) -> bool:
        """A valid fetch from ``key`` at ``fetch_offset``; True if the HW moved."""
        changed = self.progress.update_replica(key, fetch_offset, now_ms, leader_end)
        self._note_following(now_ms)
        return changed and self._maybe_advance_high_watermark()

    def note_fetch_snapshot(self, key: ReplicaKey, now_ms: int) -> None:
        self.progress.note_fetch_snapshot(key, now_ms)
        self._note_following(now_ms)

    def _note_following(self, now_ms: int) -> None:
        if self.check_quorum_deadline is not None and self.progress.check_quorum_satisfied():
            self.check_quorum_deadline = now_ms + self.check_quorum_timeout_ms

    def update_voters(self, voters: VoterSet, flushed_end_offset: int, now_ms: int) -> bool:
        """A Voters record was appended: majorities are counted over ``voters`` from now on
        (the leader counts only while it is one of them). True if the HW moved."""
        self.voters = voters
        self.progress.set_voters(voters)
        if voters.key(self.local.id) is None:
            self.progress.observers.setdefault(self.local, ReplicaProgress(self.local))
        self.progress.update_local(flushed_end_offset)
        if voters.is_only_voter(self.local):
            self.check_quorum_deadline = None
        elif self.check_quorum_deadline is None:
            self.check_quorum_deadline = now_ms + self.check_quorum_timeout_ms
        return self._maybe_advance_high_watermark()

    def check_quorum_expired(self, now_ms: int) -> bool:
        return self.check_quorum_deadline is not None and now_ms >= self.check_quorum_deadline
