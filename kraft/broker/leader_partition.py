"""The leader's view of one partition's replication (Kafka's ``Partition`` leader half with
``Replica`` progress): each follower's log end offset and last caught-up time, the committed
ISR from the metadata image, at most one ISR change in flight, and the high watermark.
Sans-I/O: every input carries ``now_ms``; ISR changes come out as ``IsrProposal`` values for
the broker-wide ``LeaderReplication`` to batch into AlterPartition; nothing here reads a log.

Rules, as Kafka runs them (KIP-497, KIP-841):
  * HW = min LEO over the *maximal* ISR (the committed ISR plus a member being added; a member
    being removed still counts until the controller commits the removal), and never moves back.
    It does not move at all while the committed ISR is smaller than ``min.insync.replicas``
    (capped at the replica count; Kafka's ``isUnderMinIsr``, KIP-966): with ELR, members that
    left such an ISR may be elected later, and they hold only what was committed before.
  * A follower is caught up when its LEO equals the leader's, or when it last reached the
    leader's LEO of its previous fetch within ``replica.lag.time.max.ms``; ISR members that
    are not are proposed for removal (shrink), a non-member whose LEO reached the HW and the
    start of the leader's epoch is proposed for addition (expand).
  * One proposal per partition in flight. It carries the leader epoch and partition epoch it
    was built on; the controller refuses it if either is stale (seed 003 "multiple leaders in
    transition": a deposed leader can neither shrink the ISR to itself nor advance the HW
    past what the real ISR holds). A proposal takes effect only when the image shows the new
    partition epoch (``on_registration``), never from the AlterPartition response alone.

HW math over many partitions at once: ``isr_min_leo`` and ``advance_hw`` from
``kraft.broker.hw_kernel`` (the Cython kernel ``_native/_hw.pyx``, or its pure twin).
"""

from __future__ import annotations

from typing import NamedTuple

from kraft.broker.hw_kernel import advance_hw, isr_min_leo  # noqa: F401  (re-exported: the HW math)
from kraft.errors import ErrorCode

#: Kafka's ``replica.lag.time.max.ms`` default.
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30000
NONE = int(ErrorCode.NONE)

#: AlterPartition errors after which our view is stale: wait for the image to change. The
#: proposal stays pending (its replica stays in the maximal ISR, as Kafka leaves the partition
#: state pending): NEW_LEADER_ELECTED means the ISR change was applied and completed a
#: reassignment that made another replica leader, so until the image says so, writes must
#: still wait for the replica that is about to lead.
_WAIT_FOR_IMAGE = frozenset(int(c) for c in (
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.NEW_LEADER_ELECTED))
#: AlterPartition errors that say the change was not applied: back to the committed ISR.
_NOT_APPLIED = frozenset(int(c) for c in (
    ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA, ErrorCode.INVALID_REQUEST))


class IsrProposal(NamedTuple):
    """One AlterPartition partition entry to send."""

    topic_id: object
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple


class ReplicaProgress:
    """What the leader knows of one follower (Kafka's ``ReplicaState``)."""

    __slots__ = ("replica_id", "log_end_offset", "log_start_offset", "last_caught_up_ms", "last_fetch_leader_leo",
                 "last_fetch_ms", "broker_epoch")

    def __init__(self, replica_id: int, last_caught_up_ms: int):
        self.replica_id = replica_id
        self.log_end_offset = -1  # unknown until it fetches in this leader epoch
        self.log_start_offset = -1
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_leader_leo = -1
        self.last_fetch_ms = -1
        self.broker_epoch = -1

    def update(self, fetch_offset: int, log_start_offset: int, leader_leo: int, now_ms: int) -> None:
        """Kafka's ``updateFetchStateOrThrow``: a fetch at ``fetch_offset`` means the
        follower holds everything below it."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now_ms

    def caught_up(self, leader_leo: int, now_ms: int, lag_max_ms: int) -> bool:
        return self.log_end_offset == leader_leo or now_ms - self.last_caught_up_ms <= lag_max_ms


class PartitionLeaderState:
    """Invariants: ``high_watermark`` never decreases; ``pending`` is None or the one
    proposal in flight, built on ``partition_epoch``; the leader is always in ``isr``."""

    def __init__(self, broker_id: int, topic: str, partition: int, topic_id, reg, *, leader_leo: int,
                 high_watermark: int, epoch_start_offset: int, now_ms: int,
                 lag_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS, min_isr: int = 1):
        if reg.leader != broker_id:
            raise ValueError(f"broker {broker_id} does not lead {topic}-{partition} (leader {reg.leader})")
        self.broker_id = broker_id
        self.topic, self.partition, self.topic_id = topic, partition, topic_id
        self.lag_max_ms = lag_max_ms
        self.min_isr = min_isr  # the topic's min.insync.replicas, refreshed by each image
        self.leader_epoch = reg.leader_epoch
        self.partition_epoch = reg.partition_epoch
        self.replicas = tuple(reg.replicas)
        self.isr = tuple(reg.isr)
        self.epoch_start_offset = epoch_start_offset
        self.high_watermark = high_watermark
        self.leader_leo = leader_leo
        # A new leader gives ISR members a full lag period before judging them (Kafka's
        # resetReplicaState with isFollowerInSync).
        self.followers = {r: ReplicaProgress(r, now_ms if r in self.isr else 0)
                          for r in self.replicas if r != broker_id}
        self.pending: IsrProposal | None = None
        self.pending_sent = False
        self.pending_committed_epoch = -1  # the controller said yes at this partition epoch
        self.stale = False  # the controller said our epochs are old: wait for the image

    # --- the ISR the HW and acks=all use -------------------------------------------------------
    @property
    def maximal_isr(self) -> tuple:
        if self.pending is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending.new_isr)))

    @property
    def under_min_isr(self) -> bool:
        """Kafka's ``isUnderMinIsr``: the committed ISR is below the effective min ISR."""
        return len(self.isr) < min(self.min_isr, len(self.replicas))

    def _recompute_hw(self) -> bool:
        if self.under_min_isr:
            return False
        hw = self.leader_leo
        for r in self.maximal_isr:
            if r != self.broker_id:
                f = self.followers.get(r)
                hw = min(hw, f.log_end_offset if f is not None else -1)
        if hw > self.high_watermark:
            self.high_watermark = hw
            return True
        return False

    # --- inputs --------------------------------------------------------------------------------
    def on_leader_append(self, leader_leo: int) -> bool:
        """The leader's log end moved; True if the HW moved (with RF 1 it follows the LEO)."""
        self.leader_leo = leader_leo
        return self._recompute_hw()

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, log_start_offset: int, leader_leo: int,
                          now_ms: int) -> tuple[bool, IsrProposal | None]:
        """A follower fetched at ``fetch_offset`` (already checked against its last fetched
        epoch). Returns (HW moved, an ISR expansion to send or None)."""
        f = self.followers.get(replica_id)
        if f is None:
            return False, None  # not a replica of this partition (any more)
        self.leader_leo = leader_leo
        f.update(fetch_offset, log_start_offset, leader_leo, now_ms)
        moved = self._recompute_hw()
        return moved, self._maybe_expand(f)

    def _maybe_expand(self, f: ReplicaProgress) -> IsrProposal | None:
        if self.pending is not None or self.stale or f.replica_id in self.isr:
            return None
        if f.log_end_offset >= self.high_watermark and f.log_end_offset >= self.epoch_start_offset:
            return self._propose(tuple(sorted(self.isr + (f.replica_id,))))
        return None

    def maybe_shrink(self, leader_leo: int, now_ms: int) -> IsrProposal | None:
        """Kafka's ``maybeShrinkIsr`` (run every lag/2): propose dropping the ISR members
        that are not caught up."""
        self.leader_leo = leader_leo
        if self.pending is not None or self.stale:
            return None
        out = [r for r in self.isr if r != self.broker_id
               and not self.followers[r].caught_up(leader_leo, now_ms, self.lag_max_ms)]
        if not out:
            return None
        return self._propose(tuple(r for r in self.isr if r not in out))

    def _propose(self, new_isr: tuple) -> IsrProposal:
        self.pending = IsrProposal(self.topic_id, self.topic, self.partition, self.leader_epoch,
                                   self.partition_epoch, new_isr)
        self.pending_sent = False
        self.pending_committed_epoch = -1
        self._recompute_hw()
        return self.pending

    def on_alter_partition_result(self, code: int, partition_epoch: int = -1) -> None:
        """The controller's answer for our proposal (or a transport failure as
        REQUEST_TIMED_OUT). NONE: keep it pending until the image shows ``partition_epoch``;
        stale epochs: stop proposing until the image changes; "not applied"
        (INELIGIBLE_REPLICA, ...): drop it so the next check may propose again; anything else
        (a timeout, a lost connection, a controller moving): the change may have been applied,
        so it stays pending, in the maximal ISR, and is to be sent again (``pending_sent``
        False; Kafka's AlterPartitionManager retries it). Dropping it would let the HW pass a
        member the controller may already count in the ISR."""
        if self.pending is None:
            return
        if code == NONE:
            if partition_epoch <= self.partition_epoch:  # the image already shows the answer
                self.pending = None
                self.pending_sent = False
                return
            self.pending_committed_epoch = partition_epoch
            return
        if code in _WAIT_FOR_IMAGE:
            self.stale = True
            return
        if code in _NOT_APPLIED:
            self.pending = None
        self.pending_sent = False

    def on_registration(self, reg, leader_leo: int, now_ms: int) -> bool:
        """A new image registration for this partition. False if this broker no longer
        leads it in this leader epoch (the caller drops this state; a new epoch makes a new
        state). Otherwise adopts the committed ISR and clears a proposal the change answers."""
        if reg.leader != self.broker_id or reg.leader_epoch != self.leader_epoch:
            return False
        self.leader_leo = leader_leo
        if reg.partition_epoch == self.partition_epoch:
            return True
        self.partition_epoch = reg.partition_epoch
        self.isr = tuple(reg.isr)
        if tuple(reg.replicas) != self.replicas:
            self.replicas = tuple(reg.replicas)
            old = self.followers
            self.followers = {r: old.get(r) or ReplicaProgress(r, 0) for r in self.replicas if r != self.broker_id}
        # Any newer partition epoch answers (or invalidates) the proposal built on the old one.
        self.pending = None
        self.pending_sent = False
        self.stale = False
        self._recompute_hw()
        return True

    # --- produce checks ------------------------------------------------------------------------
    def not_enough_replicas(self, min_isr: int) -> bool:
        """Before an acks=all append: the committed ISR is smaller than ``min.insync.replicas``."""
        return len(self.isr) < min_isr

    def acks_all_status(self, required_offset: int, min_isr: int) -> tuple[bool, int]:
        """(done, error) for an acks=all wait on offsets below ``required_offset`` (Kafka's
        ``checkEnoughReplicasReachOffset``)."""
        if self.high_watermark >= required_offset:
            if len(self.maximal_isr) >= min_isr:
                return True, NONE
            return True, int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        return False, NONE
