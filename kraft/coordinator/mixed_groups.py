"""Classic consumers in a KIP-848 consumer group, and the online upgrade and downgrade between a
classic group and a consumer group (Kafka 4's ``group.consumer.migration.policy``). A mixin of
``GroupShard``, sans-I/O like it.

Upgrade: a ConsumerGroupHeartbeat joining a classic group that has members (all speaking the
consumer protocol type) turns it into a consumer group: each classic member becomes a member
that keeps its classic session timeout and protocols, at the group's generation as its epoch,
with its last assignment as both its target and its current assignment; then the new member
joins as into any consumer group. Classic members stay in the group: JoinGroup gives a classic
member its member epoch as the generation and no members (no leader: the coordinator assigns),
SyncGroup hands it its assignment in the consumer protocol's bytes, Heartbeat tells it to rejoin
(REBALANCE_IN_PROGRESS) when the group epoch moved, it must revoke, or partitions it waits for
were released. The partitions it says it owns (its subscription's OwnedPartitions) are what
revocation waits for, as with a KIP-848 member.

Downgrade: when the last member speaking the consumer protocol leaves and classic members
remain, the group becomes a classic group again (generation = the group epoch, each member's
target as its assignment) and rebalances.
"""

from __future__ import annotations

from kraft.coordinator.classic_group import STABLE, ClassicGroup, ClassicMember
from kraft.coordinator.consumer_group import UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, ConsumerGroup, ConsumerMember
from kraft.coordinator.consumer_handlers import _metadata_value
from kraft.coordinator.consumer_protocol import assignment_bytes, parse_assignment, parse_subscription
from kraft.coordinator.consumer_records import (ClassicMemberMetadata, ConsumerGroupCurrentMemberAssignmentKey,
                                                ConsumerGroupCurrentMemberAssignmentValue,
                                                ConsumerGroupMemberMetadataKey, ConsumerGroupMetadataKey,
                                                ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataKey,
                                                ConsumerGroupPartitionMetadataValue,
                                                ConsumerGroupTargetAssignmentMemberKey,
                                                ConsumerGroupTargetAssignmentMemberValue,
                                                ConsumerGroupTargetAssignmentMetadataKey,
                                                ConsumerGroupTargetAssignmentMetadataValue, topic_partitions)
from kraft.coordinator.group_records import group_metadata_record, group_tombstone
from kraft.coordinator.shard_state import coordinator_error
from kraft.errors import ErrorCode as E
from kraft.protocol.messages.group_membership import (HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse,
                                                      SyncGroupResponse)

CONSUMER_PROTOCOL = "consumer"
UPGRADE, DOWNGRADE = "upgrade", "downgrade"
POLICIES = {"disabled": set(), UPGRADE: {UPGRADE}, DOWNGRADE: {DOWNGRADE}, "bidirectional": {UPGRADE, DOWNGRADE}}


class MixedGroupHandlers:
    # --- upgrade -------------------------------------------------------------------------------
    def can_upgrade(self, classic) -> bool:
        return UPGRADE in POLICIES.get(self.config.consumer_migration_policy, set()) and \
            classic.protocol_type == CONSUMER_PROTOCOL and classic.protocol is not None and \
            len(classic.members) <= self.config.consumer_max_size and \
            all(parse_subscription(m.metadata(classic.protocol)) is not None for m in classic.members.values())

    def upgrade(self, classic, records: list, now_ms: int) -> ConsumerGroup:
        """Kafka's ``convertToConsumerGroup``: the classic group's tombstone, then the records
        of the consumer group it becomes (members, epoch, subscribed topics, target, current)."""
        for m in classic.members.values():  # a rebalance under way: they rejoin the new group
            self._answer_join(m, JoinGroupResponse(error_code=E.REBALANCE_IN_PROGRESS, member_id=m.member_id))
            self._answer_sync(m, E.REBALANCE_IN_PROGRESS)
        gid, epoch = classic.group_id, classic.generation
        records.append(group_tombstone(gid))
        del self.groups[gid]
        group = self.consumer_groups[gid] = ConsumerGroup(gid)
        shares, taken = {}, set()
        for m in classic.members.values():
            _, sub = parse_subscription(m.metadata(classic.protocol))
            value = _metadata_value(ConsumerMember(m.member_id))
            value.instance_id, value.rack_id = m.instance_id, sub.rack_id
            value.client_id, value.client_host = m.client_id, m.client_host
            value.subscribed_topic_names = sorted(set(sub.topics))
            value.rebalance_timeout_ms = m.rebalance_timeout_ms
            value.classic_member_metadata = _classic_metadata(m.session_timeout_ms, m.protocols)
            self._emit(group, records, ConsumerGroupMemberMetadataKey(group_id=gid, member_id=m.member_id), value)
            # Its last assignment, by topic id; a partition claimed twice stays with the first.
            share: dict = {}
            for name, ps in parse_assignment(m.assignment).items():
                info = self.topics.lookup(name)
                for p in ps:
                    if info is not None and 0 <= p < info[1] and (info[0], p) not in taken:
                        taken.add((info[0], p))
                        share.setdefault(info[0], set()).add(p)
            shares[m.member_id] = share
        self._emit(group, records, ConsumerGroupMetadataKey(group_id=gid), ConsumerGroupMetadataValue(epoch=epoch))
        T = ConsumerGroupPartitionMetadataValue.TopicMetadata
        self._emit(group, records, ConsumerGroupPartitionMetadataKey(group_id=gid),
                   ConsumerGroupPartitionMetadataValue(topics=[
                       T(topic_id=tid, topic_name=name, num_partitions=n)
                       for name, (tid, n) in sorted(self._subscription_metadata(group).items())]))
        for mid, share in shares.items():
            self._emit(group, records, ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid),
                       ConsumerGroupTargetAssignmentMemberValue(topic_partitions=topic_partitions(share)))
        self._emit(group, records, ConsumerGroupTargetAssignmentMetadataKey(group_id=gid),
                   ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))
        for mid, share in shares.items():
            self._emit(group, records, ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=mid),
                       ConsumerGroupCurrentMemberAssignmentValue(
                           member_epoch=epoch, previous_member_epoch=epoch, state=0,
                           assigned_partitions=topic_partitions(share), partitions_pending_revocation=[]))
        for m in classic.members.values():
            group.members[m.member_id].session_deadline = now_ms + m.session_timeout_ms
        return group

    # --- downgrade -----------------------------------------------------------------------------
    def can_downgrade(self, group, leaving_id: str) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMember``."""
        others = [m for mid, m in group.members.items() if mid != leaving_id]
        return DOWNGRADE in POLICIES.get(self.config.consumer_migration_policy, set()) and bool(others) and \
            all(m.classic is not None for m in others) and group.members.get(leaving_id) is not None and \
            group.members[leaving_id].classic is None and len(others) <= self.config.max_size

    def downgrade(self, group, records: list, now_ms: int) -> None:
        """Kafka's ``convertToClassicGroup`` (the leaving member's records are already there):
        the consumer group's tombstones, the classic group's record, and a rebalance."""
        gid = group.group_id
        classic = ClassicGroup(gid, now_ms)
        classic.generation, classic.protocol_type = group.group_epoch, CONSUMER_PROTOCOL
        for m in group.members.values():
            member = ClassicMember(m.member_id, m.instance_id, m.client_id, m.client_host, m.classic.session_timeout_ms,
                                   m.rebalance_timeout_ms if m.rebalance_timeout_ms > 0 else m.classic.session_timeout_ms,
                                   CONSUMER_PROTOCOL, [(p.name, bytes(p.metadata)) for p in m.classic.supported_protocols])
            member.heartbeat_deadline = now_ms + member.session_timeout_ms
            classic.add(member)
        classic.protocol = classic.select_protocol()
        names = {tid: name for name, (tid, _) in group.subscription.items()}
        for mid, member in classic.members.items():
            parsed = parse_subscription(member.metadata(classic.protocol))
            share = {names.get(tid) or self.topics.name_of(tid): ps for tid, ps in group.target.get(mid, {}).items()}
            member.assignment = assignment_bytes(parsed[0] if parsed else 0, {n: ps for n, ps in share.items() if n})
        classic.state = STABLE
        records.extend(self.consumer_group_tombstones(group))
        records.append(group_metadata_record(gid, classic.metadata_value()))
        del self.consumer_groups[gid]
        self.groups[gid] = classic
        self._prepare_rebalance(classic, now_ms, "downgraded from a consumer group")

    # --- classic members in a consumer group ---------------------------------------------------
    def classic_join(self, group, req, version: int, now_ms: int, client_id: str, client_host: str, respond) -> None:
        """Kafka's ``classicGroupJoinToConsumerGroup``."""
        def fail(code, member_id=None):
            respond(JoinGroupResponse(error_code=code, generation_id=-1, member_id=member_id or req.member_id,
                                      protocol_name=None if version >= 7 else "", leader=""))
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        if not self._supports_classic(group, req.protocol_type, protocols):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        parsed = parse_subscription(protocols[0][1])
        if parsed is None:
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        sub = parsed[1]
        member_id, instance = req.member_id, req.group_instance_id
        unknown = not member_id
        if unknown:
            member_id = self.new_member_id(client_id)
        if member_id not in group.members and len(group.members) >= self.config.consumer_max_size:
            return fail(E.GROUP_MAX_SIZE_REACHED, member_id)
        if unknown and instance is None and version >= 4:
            return fail(E.MEMBER_ID_REQUIRED, member_id)  # KIP-394, as in a classic group
        records: list = []
        static_id = group.static_members.get(instance) if instance is not None else None
        if static_id is not None and static_id != member_id:
            if not unknown:
                return fail(E.FENCED_INSTANCE_ID, member_id)
            member = self._replace_static(group, group.members[static_id], member_id, records)
        else:
            member = group.members.get(member_id) or ConsumerMember(member_id)
        value = _metadata_value(member)
        value.instance_id = instance if instance is not None else value.instance_id
        if sub.rack_id is not None:
            value.rack_id = sub.rack_id
        value.rebalance_timeout_ms = req.rebalance_timeout_ms if version >= 1 and req.rebalance_timeout_ms > 0 \
            else req.session_timeout_ms
        value.subscribed_topic_names = sorted(set(sub.topics))
        value.client_id, value.client_host = client_id, client_host
        value.classic_member_metadata = _classic_metadata(req.session_timeout_ms, protocols)
        new = member.member_id not in group.members
        if new or value != _metadata_value(member):
            if new or tuple(value.subscribed_topic_names) != member.topics or value.rack_id != member.rack_id:
                group.bump_wanted = True
            self._emit(group, records, ConsumerGroupMemberMetadataKey(group_id=group.group_id, member_id=member_id),
                       value)
        member = group.members[member_id]
        self._maybe_bump(group, records)
        if group.group_epoch > group.assignment_epoch:
            self._new_target(group, records)
        owned = {}
        for tp in sub.owned_partitions or ():
            info = self.topics.lookup(tp.topic)
            if info is not None:
                owned.setdefault(info[0], set()).update(tp.partitions)
        self._reconcile(group, member, owned, now_ms, records)
        member.session_deadline = now_ms + req.session_timeout_ms
        answer = JoinGroupResponse(error_code=E.NONE, generation_id=member.member_epoch,
                                   protocol_type=CONSUMER_PROTOCOL, protocol_name=protocols[0][0], leader="",
                                   member_id=member_id, members=[])
        self._write(group, records, lambda: respond(answer), lambda c: fail(coordinator_error(c), member_id))

    def _supports_classic(self, group, protocol_type, protocols) -> bool:
        """Kafka's ``ConsumerGroup.supportsClassicProtocols``: the consumer protocol type, and a
        protocol name every classic member of the group has."""
        if protocol_type != CONSUMER_PROTOCOL or not protocols:
            return False
        names = {n for n, _ in protocols}
        for m in group.members.values():
            if m.classic is not None:
                names &= {p.name for p in m.classic.supported_protocols}
        return bool(names)

    def _classic_member(self, group, member_id, instance):
        """(member, error) of a classic request to a consumer group (``validateConsumerGroupMember``)."""
        if instance is not None:
            static_id = group.static_members.get(instance)
            if static_id is None:
                return None, E.UNKNOWN_MEMBER_ID
            if static_id != member_id:
                return None, E.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            return None, E.UNKNOWN_MEMBER_ID
        return member, E.NONE

    def classic_sync(self, group, req, now_ms: int, respond) -> None:
        member, code = self._classic_member(group, req.member_id, req.group_instance_id)
        if code == E.NONE and req.generation_id != member.member_epoch:
            code = E.ILLEGAL_GENERATION
        if code == E.NONE and ((req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL) or (
                req.protocol_name is not None and req.protocol_name != member.classic.supported_protocols[0].name)):
            code = E.INCONSISTENT_GROUP_PROTOCOL
        if code == E.NONE and group.group_epoch > member.member_epoch and member.state != UNREVOKED_PARTITIONS:
            code = E.REBALANCE_IN_PROGRESS
        if code != E.NONE:
            return respond(SyncGroupResponse(error_code=code, assignment=b""))
        member.session_deadline = now_ms + member.classic.session_timeout_ms
        first = member.classic.supported_protocols[0]
        parsed = parse_subscription(first.metadata)
        names = {tid: name for name, (tid, _) in group.subscription.items()}
        share = {names.get(tid) or self.topics.name_of(tid): ps for tid, ps in member.assigned.items()}
        respond(SyncGroupResponse(error_code=E.NONE, protocol_type=CONSUMER_PROTOCOL, protocol_name=first.name,
                                  assignment=assignment_bytes(parsed[0] if parsed else 0,
                                                              {n: ps for n, ps in share.items() if n})))

    def classic_heartbeat(self, group, req, now_ms: int) -> HeartbeatResponse:
        member, code = self._classic_member(group, req.member_id, req.group_instance_id)
        if code == E.NONE and req.generation_id != member.member_epoch:
            code = E.ILLEGAL_GENERATION
        if code != E.NONE:
            return HeartbeatResponse(error_code=code)
        member.session_deadline = now_ms + member.classic.session_timeout_ms
        # Rejoin when the group moved on, to revoke, or to collect partitions released since.
        if member.member_epoch < group.group_epoch or member.state == UNREVOKED_PARTITIONS or (
                member.state == UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member)):
            return HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS)
        return HeartbeatResponse(error_code=E.NONE)

    def classic_leave(self, group, req, version: int, now_ms: int) -> LeaveGroupResponse:
        R = LeaveGroupResponse
        leaving = [(req.member_id, None)] if version < 3 else [(m.member_id, m.group_instance_id) for m in req.members]
        answers, records = [], []
        for member_id, instance in leaving:
            if self.consumer_groups.get(group.group_id) is not group:
                answers.append(R.Member(member_id=member_id, group_instance_id=instance,
                                        error_code=E.UNKNOWN_MEMBER_ID))  # downgraded by an earlier one
                continue
            if instance is not None and not member_id:
                member_id = group.static_members.get(instance, "")  # an admin removing by instance id
            member, code = self._classic_member(group, member_id, instance)
            if code == E.NONE:
                self._fence(group, member, records, now_ms)
            answers.append(R.Member(member_id=member_id, group_instance_id=instance, error_code=code))
        self._write(group, records)
        if version < 3:
            return R(error_code=answers[0].error_code)
        return R(error_code=E.NONE, members=answers)


def _classic_metadata(session_timeout_ms: int, protocols) -> ClassicMemberMetadata:
    P = ClassicMemberMetadata.ClassicProtocol
    return ClassicMemberMetadata(session_timeout_ms=session_timeout_ms,
                                 supported_protocols=[P(name=n, metadata=bytes(m)) for n, m in protocols])

