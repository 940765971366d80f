"""One classic group (Kafka's ``ClassicGroup``): its members, generation, chosen protocol and
state, and the state transitions. The request handlers that drive it are in ``group_shard``.

States and their legal transitions (Kafka's ``ClassicGroupState``)::

    Empty               -> PreparingRebalance (a member joins), Dead (deleted / expired)
    PreparingRebalance  -> CompletingRebalance (join complete), Empty (nobody rejoined), Dead
    CompletingRebalance -> Stable (leader's assignment durable), PreparingRebalance, Dead
    Stable              -> PreparingRebalance (join, leave, expiry), Dead

Sans-I/O: no clock (``now_ms`` is passed in), no answers sent from here. A member's pending
JoinGroup / SyncGroup answer is a ``respond`` callable the driver gave; it is called at most once.
"""

from __future__ import annotations

from kraft.coordinator.group_records import GroupMetadataValue

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable",
                                              "Dead")
_NEXT = {EMPTY: {PREPARING, DEAD}, PREPARING: {COMPLETING, EMPTY, DEAD},
         COMPLETING: {STABLE, PREPARING, DEAD}, STABLE: {PREPARING, DEAD}, DEAD: {DEAD}}
CLASSIC = "classic"


class ClassicMember:
    __slots__ = ("member_id", "instance_id", "client_id", "client_host", "session_timeout_ms",
                 "rebalance_timeout_ms", "protocol_type", "protocols", "assignment", "join_reply", "sync_reply",
                 "heartbeat_deadline", "is_new")

    def __init__(self, member_id: str, instance_id, client_id: str, client_host: str, session_timeout_ms: int,
                 rebalance_timeout_ms: int, protocol_type: str, protocols: list):
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id, self.client_host = client_id, client_host
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols  # [(name, metadata bytes)] in the member's order of preference
        self.assignment = b""
        self.join_reply = None  # respond(JoinGroupResponse) while its JoinGroup waits
        self.sync_reply = None  # respond(SyncGroupResponse) while its SyncGroup waits
        self.heartbeat_deadline = 0
        self.is_new = False  # joined in this rebalance and has not had a JoinGroup answer yet

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def same_protocols(self, protocols: list) -> bool:
        return [(n, bytes(m)) for n, m in self.protocols] == [(n, bytes(m)) for n, m in protocols]

    def keeps_alive(self, now_ms: int) -> bool:
        """Kafka's ``shouldKeepAlive``: a member whose JoinGroup or SyncGroup waits at the
        coordinator is not expired by its session (it cannot heartbeat meanwhile)."""
        if self.join_reply is not None or self.sync_reply is not None:
            return True
        return self.heartbeat_deadline > now_ms


class ClassicGroup:
    """Invariants: ``leader`` is None or a member id in ``members``; ``protocol`` is None exactly
    when the group is Empty or Dead or has never completed a join; ``generation`` never decreases."""

    TYPE = CLASSIC

    def __init__(self, group_id: str, now_ms: int = 0):
        self.group_id = group_id
        self.state = EMPTY
        self.state_since_ms = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.leader: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # member ids handed out by MEMBER_ID_REQUIRED -> deadline
        self.rebalance_deadline: int | None = None  # when the join phase completes anyway
        self.initial_join = False  # the join phase of a group that was Empty: waits the initial delay
        self.sync_deadline: int | None = None  # CompletingRebalance: members that have not synced by then leave

    # --- state ---------------------------------------------------------------------------------
    def transition(self, state: str, now_ms: int) -> None:
        if state not in _NEXT[self.state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state} -> {state}")
        self.state, self.state_since_ms = state, now_ms

    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if self.leader is None:
            self.leader = member.member_id

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        return member

    def replace_static(self, old_id: str, new_id: str) -> ClassicMember:
        """A static member rejoined with an unknown member id (KIP-345): it keeps its place
        (assignment, leadership) under the new id; the old id is fenced."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[member.instance_id] = new_id
        if self.leader == old_id:
            self.leader = new_id
        return member

    def supports_protocols(self, protocol_type: str, protocols: list) -> bool:
        """Kafka's ``supportsProtocols``: an empty group takes any; otherwise the type must
        match and at least one of the names must be one every member supports."""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        names = {n for n, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set:
        sets = [{n for n, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Kafka's ``selectProtocol``: among the protocols every member supports, each member
        votes for its most preferred one; the most voted wins (ties: first preferred seen)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n, _ in m.protocols if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda n: votes[n])

    def all_joined(self) -> bool:
        return all(m.join_reply is not None for m in self.members.values()) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set | None:
        """Topics the members subscribe to when the group uses the consumer protocol (None:
        unknown, e.g. another protocol type), from ConsumerProtocolSubscription's topic list."""
        if self.protocol_type != "consumer" or self.protocol is None:
            return None
        topics: set = set()
        for m in self.members.values():
            parsed = consumer_subscription_topics(m.metadata(self.protocol))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    # --- the record ------------------------------------------------------------------------------
    def metadata_value(self) -> GroupMetadataValue:
        M = GroupMetadataValue.MemberMetadata
        members = [M(member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                     client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                     session_timeout=m.session_timeout_ms,
                     subscription=m.metadata(self.protocol) if self.protocol else b"",
                     assignment=m.assignment) for m in self.members.values()]
        return GroupMetadataValue(protocol_type=self.protocol_type or "", generation=self.generation,
                                  protocol=self.protocol, leader=self.leader if self.members else None,
                                  current_state_timestamp=self.state_since_ms, members=members)

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> "ClassicGroup":
        """A loaded group: Empty without members, else Stable (its members must heartbeat
        within their session timeouts to stay), as Kafka loads one."""
        group = cls(group_id, value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol = value.protocol
        for mm in value.members:
            protocols = [(value.protocol, bytes(mm.subscription))] if value.protocol else []
            member = ClassicMember(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                                   mm.session_timeout, mm.rebalance_timeout if mm.rebalance_timeout >= 0
                                   else mm.session_timeout, value.protocol_type, protocols)
            member.assignment = bytes(mm.assignment)
            member.heartbeat_deadline = now_ms + mm.session_timeout
            group.add(member)
        group.leader = value.leader if value.leader in group.members else next(iter(group.members), None)
        group.state = STABLE if group.members else EMPTY
        return group


def consumer_subscription_topics(metadata) -> list | None:
    """The topic list at the start of a ConsumerProtocolSubscription (any version: int16
    version, then an int32-counted array of int16-length strings); None if it does not parse."""
    data = bytes(metadata)
    try:
        if len(data) < 6:
            return None
        n = int.from_bytes(data[2:6], "big", signed=True)
        pos, out = 6, []
        if n < 0 or n > len(data):
            return None
        for _ in range(n):
            ln = int.from_bytes(data[pos:pos + 2], "big", signed=True)
            if ln < 0 or pos + 2 + ln > len(data):
                return None
            out.append(data[pos + 2:pos + 2 + ln].decode("utf-8"))
            pos += 2 + ln
        return out
    except (UnicodeDecodeError, ValueError):
        return None
