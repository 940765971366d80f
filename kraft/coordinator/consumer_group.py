"""One KIP-848 consumer group (Kafka's ``ConsumerGroup`` and ``ConsumerGroupMember``): its epochs,
members, target assignment and who owns which partition now, changed only by replaying its
``__consumer_offsets`` records (``apply``), live or when a coordinator loads the partition, so a
coordinator that takes over has exactly the state the old one wrote. ``next_assignment`` is
Kafka's ``CurrentAssignmentBuilder``: one member's step towards its target.

Epochs. The *group epoch* goes up whenever the membership or a subscription changes; the
*target assignment epoch* is the group epoch the target assignment was computed for; a
member's *member epoch* is the target epoch it has reconciled to. Invariants:
``assignment_epoch <= group_epoch``; a member's epoch never exceeds ``assignment_epoch``;
``partition_epochs`` has an entry for exactly the partitions some member owns (assigned or
pending revocation), so one partition is never given to two members: a member gets a partition
of its target only once no one owns it (the owner revokes first).

The group state (Kafka's ``ConsumerGroupState``) is derived, never stored: Empty without
members, Assigning while the target lags the group epoch, Reconciling while a member has not
reached the target, else Stable. Sans-I/O: no clock, no answers sent from here.
"""

from __future__ import annotations

from kraft.coordinator.consumer_records import (STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS,
                                                ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupMemberMetadataKey,
                                                ConsumerGroupMetadataKey, ConsumerGroupPartitionMetadataKey,
                                                ConsumerGroupTargetAssignmentMemberKey,
                                                ConsumerGroupTargetAssignmentMetadataKey, assignment_of)

EMPTY, ASSIGNING, RECONCILING, STABLE_STATE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"
CONSUMER = "consumer"
STATIC_LEFT_EPOCH = -2  # a static member that left for a while keeps its assignment with this epoch


class ConsumerMember:
    __slots__ = ("member_id", "instance_id", "rack_id", "client_id", "client_host", "topics", "regex",
                 "rebalance_timeout_ms", "server_assignor", "member_epoch", "previous_epoch", "state", "assigned",
                 "pending_revocation", "classic", "session_deadline", "rebalance_deadline", "may_describe")

    def __init__(self, member_id: str):
        self.member_id = member_id
        self.instance_id = None
        self.rack_id = None
        self.client_id, self.client_host = "", ""
        self.topics: tuple = ()  # subscribed topic names, sorted
        self.regex = None
        self.rebalance_timeout_ms = -1
        self.server_assignor = None
        self.member_epoch = 0
        self.previous_epoch = 0
        self.state = STABLE
        self.assigned: dict = {}  # topic id -> set of partitions it may consume now
        self.pending_revocation: dict = {}  # topic id -> set of partitions it must give up first
        self.classic = None  # ClassicMemberMetadata of a member speaking JoinGroup/SyncGroup, else None
        # Not in records: timers start again when a coordinator loads the group.
        self.session_deadline = 0
        self.rebalance_deadline = None
        #: (topic name) -> bool: whether the member's principal may DESCRIBE it (from its last
        #: heartbeat; None: not known, e.g. loaded from the log)
        self.may_describe = None

    def reconciled_to(self, epoch: int) -> bool:
        return self.state == STABLE and self.member_epoch == epoch

    def owned(self):
        """Every (topic id, partition) this member still owns (assigned or being revoked)."""
        for part in (self.assigned, self.pending_revocation):
            for tid, ps in part.items():
                for p in ps:
                    yield tid, p


class ConsumerGroup:
    TYPE = CONSUMER

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.subscription: dict = {}  # topic name -> (topic id, partitions): what the target was computed on
        self.target: dict[str, dict] = {}  # member id -> {topic id: set of partitions}
        self.partition_epochs: dict = {}  # (topic id, partition) -> epoch of the member owning it
        self.deleted = False  # DeleteGroups wrote its tombstones and they are not yet durable
        # Handler bookkeeping, not in records: a subscription changed in this heartbeat; a
        # write failed after it was applied here (the log must get the whole group again), and
        # the members that write may have removed.
        self.bump_wanted = False
        self.unsynced = False
        self.maybe_removed: set = set()

    @property
    def state(self) -> str:
        if self.deleted:
            return DEAD
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return RECONCILING
        return STABLE_STATE

    def rebalancing(self) -> bool:
        """A member can take a step now: the target lags the group epoch, or a member (other
        than a static member away for a while, who cannot) has not reached the target."""
        return self.group_epoch > self.assignment_epoch or any(
            m.member_epoch != STATIC_LEFT_EPOCH and not m.reconciled_to(self.assignment_epoch)
            for m in self.members.values())

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topic_names(self) -> set:
        return {t for m in self.members.values() for t in m.topics}

    def preferred_assignor(self, default: str) -> str:
        """Kafka's rule: the server assignor most members ask for (ties: by name), else the default."""
        votes: dict = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        return min(votes, key=lambda n: (-votes[n], n)) if votes else default

    def free(self, topic_id, partition: int) -> bool:
        return (topic_id, partition) not in self.partition_epochs

    def waiting_on_unreleased(self, member) -> bool:
        """Kafka's ``waitingOnUnreleasedPartition``: a partition of the member's target that it
        does not have is still owned by another member."""
        for tid, ps in self.target.get(member.member_id, {}).items():
            have = member.assigned.get(tid, ())
            if any(p not in have and not self.free(tid, p) for p in ps):
                return True
        return False

    # --- replaying records ------------------------------------------------------------------------
    def apply(self, key, value) -> None:
        """One record of this group, in log order (value None: a tombstone). The group's own
        tombstone (ConsumerGroupMetadataKey with no value) is the shard's to apply."""
        if isinstance(key, ConsumerGroupMetadataKey):
            self.group_epoch = value.epoch
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            self.subscription = {} if value is None else {t.topic_name: (t.topic_id, t.num_partitions)
                                                          for t in value.topics}
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            self._apply_member(key.member_id, value)
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            self.assignment_epoch = -1 if value is None else value.assignment_epoch
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            if value is None:
                self.target.pop(key.member_id, None)
            else:
                self.target[key.member_id] = assignment_of(value.topic_partitions)
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            self._apply_assignment(key.member_id, value)

    def _apply_member(self, member_id: str, value) -> None:
        if value is None:
            member = self.members.pop(member_id, None)
            if member is not None:
                self._release(member)
                if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                    del self.static_members[member.instance_id]
            return
        member = self.members.get(member_id)
        if member is None:
            member = self.members[member_id] = ConsumerMember(member_id)
        member.instance_id, member.rack_id = value.instance_id, value.rack_id
        member.client_id, member.client_host = value.client_id, value.client_host
        member.topics = tuple(sorted(value.subscribed_topic_names))
        member.regex = value.subscribed_topic_regex
        member.rebalance_timeout_ms = value.rebalance_timeout_ms
        member.server_assignor = value.server_assignor
        member.classic = value.classic_member_metadata
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member_id

    def _apply_assignment(self, member_id: str, value) -> None:
        member = self.members.get(member_id)
        if member is None:
            member = self.members[member_id] = ConsumerMember(member_id)
        self._release(member)
        if value is None:
            member.member_epoch, member.previous_epoch, member.state = -1, -1, STABLE
            member.assigned, member.pending_revocation = {}, {}
            return
        member.member_epoch, member.previous_epoch = value.member_epoch, value.previous_member_epoch
        member.state = value.state
        member.assigned = assignment_of(value.assigned_partitions)
        member.pending_revocation = assignment_of(value.partitions_pending_revocation)
        for tp in member.owned():
            self.partition_epochs[tp] = member.member_epoch

    def _release(self, member: ConsumerMember) -> None:
        for tp in member.owned():
            self.partition_epochs.pop(tp, None)


def next_assignment(member: ConsumerMember, target_epoch: int, target: dict, free, owned_reported):
    """Kafka's ``CurrentAssignmentBuilder.build``: (epoch, previous epoch, state, assigned,
    pending revocation) of ``member``'s next step towards ``target`` (computed at
    ``target_epoch``), or None when it stays as it is. ``free(topic id, partition)``: no member
    owns the partition; ``owned_reported``: the partitions the member says it owns in this
    heartbeat (None: not said, so it is assumed to own everything it was given)."""

    def still_owns(pending: dict) -> bool:
        if owned_reported is None:
            return True
        return any(p in pending.get(tid, ()) for tid, ps in owned_reported.items() for p in ps)

    if member.state == STABLE:
        if member.member_epoch == target_epoch:
            return None
        return _compute(member, member.member_epoch, target_epoch, target, free, still_owns)
    if member.state == UNREVOKED_PARTITIONS:
        if still_owns(member.pending_revocation):
            return None
        # Revoked: the member moves on (to the next epoch at least) and towards the target.
        return _compute(member, member.member_epoch + 1, target_epoch, target, free, still_owns)
    if member.state == UNRELEASED_PARTITIONS:
        return _compute(member, member.member_epoch, target_epoch, target, free, still_owns)
    # A state of a newer coordinator: start again from the target.
    return _compute(member, target_epoch, target_epoch, target, free, still_owns)


def _compute(member, epoch, target_epoch, target, free, still_owns):
    assigned, revoking, adding = {}, {}, {}
    unreleased = False
    for tid in set(target) | set(member.assigned):
        want = target.get(tid, set())
        have = member.assigned.get(tid, set())
        keep = have & want
        gone = have - keep
        new = {p for p in want - keep if free(tid, p)}
        unreleased = unreleased or len(new) < len(want - keep)
        if keep:
            assigned[tid] = keep
        if gone:
            revoking[tid] = gone
        if new:
            adding[tid] = new
    if revoking and still_owns(revoking):
        # Revocation first: the member keeps its epoch until it has given those partitions up.
        # (Kafka's updateMemberEpoch: the previous epoch is always the one it had.)
        return epoch, member.member_epoch, UNREVOKED_PARTITIONS, assigned, revoking
    for tid, ps in adding.items():
        assigned.setdefault(tid, set()).update(ps)
    return target_epoch, member.member_epoch, UNRELEASED_PARTITIONS if unreleased else STABLE, assigned, {}


class TopicsView:
    """The cluster's topics as a shard sees them: {name: (topic id, partition count)}. The
    driver gives one over its metadata image; tests give a dict."""

    def __init__(self, topics: dict | None = None):
        self.by_name = dict(topics or {})

    def lookup(self, name: str):
        return self.by_name.get(name)

    def name_of(self, topic_id):
        return next((n for n, (tid, _) in self.by_name.items() if tid == topic_id), None)

    def names(self):
        return self.by_name.keys()
