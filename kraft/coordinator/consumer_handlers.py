"""KIP-848 consumer groups in a shard (Kafka's ``GroupMetadataManager``, consumer-group part):
ConsumerGroupHeartbeat (join, update, reconcile, leave, static leave), session and rebalance
timeouts, ConsumerGroupDescribe, and the checks OffsetCommit / OffsetFetch make of a consumer
group's members. A mixin of ``GroupShard``, sans-I/O like it.

Every change is a record: a handler builds the records Kafka would write and applies each to the
group as it makes it (``_emit``: the same ``ConsumerGroup.apply`` a loading coordinator replays),
so what is answered is what the log says; the answer waits until they are durable. One
heartbeat: (1) create or update the member (MemberMetadata; a subscription change bumps the
group epoch, as does a change of the subscribed topics' metadata); (2) a group epoch ahead of
the target assignment epoch computes a new target with the group's server assignor
(TargetAssignmentMember records for the members whose share changed, then
TargetAssignmentMetadata); (3) the member takes its next step towards its target
(CurrentMemberAssignment): partitions it must give up are revoked first, partitions another
member still owns are held back until they are released.
"""

from __future__ import annotations

import re

from kraft.coordinator.assignors import ASSIGNORS
from kraft.coordinator.consumer_group import (STATIC_LEFT_EPOCH, UNREVOKED_PARTITIONS, ConsumerGroup,
                                              ConsumerMember, next_assignment)
from kraft.coordinator.consumer_records import (ConsumerGroupCurrentMemberAssignmentKey,
                                                ConsumerGroupCurrentMemberAssignmentValue,
                                                ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue,
                                                ConsumerGroupMetadataKey, ConsumerGroupMetadataValue,
                                                ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue,
                                                ConsumerGroupTargetAssignmentMemberKey,
                                                ConsumerGroupTargetAssignmentMemberValue,
                                                ConsumerGroupTargetAssignmentMetadataKey,
                                                ConsumerGroupTargetAssignmentMetadataValue, record, topic_partitions)
from kraft.coordinator.group_records import group_tombstone
from kraft.coordinator.shard_state import Append, coordinator_error, valid_group_id
from kraft.errors import ErrorCode as E
from kraft.protocol.messages.consumer_group import (LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerGroupDescribeResponse,
                                                    ConsumerGroupHeartbeatResponse)

R = ConsumerGroupHeartbeatResponse
#: RE2/J constructs Python's ``re`` accepts with another meaning or RE2 refuses: lookaround,
#: backreferences, atomic groups, possessive quantifiers, conditionals.
_NOT_RE2 = re.compile(r"\(\?[=!<>(]|\(\?P[=>]|\\[1-9]|[*+?}]\+")


#: While a group rebalances, its members heartbeat at least this many ms apart per member.
REBALANCE_MS_PER_MEMBER = 10


class RegexError(ValueError):
    pass


def compile_regex(text: str):
    """A subscription regex as RE2/J reads it, matched against whole topic names."""
    if _NOT_RE2.search(text):
        raise RegexError(f"{text!r} uses a construct RE2/J does not have")
    try:
        return re.compile(text)
    except re.error as exc:
        raise RegexError(f"{text!r}: {exc}") from None


def _ALL(topic: str) -> bool:
    return True


def _NONE(topic: str) -> bool:
    return False


class ConsumerHandlers:
    # --- ConsumerGroupHeartbeat ----------------------------------------------------------------
    def consumer_heartbeat(self, req, version: int, now_ms: int, client_id: str, client_host: str, respond,
                           may_describe=None) -> None:
        """``may_describe(topic) -> bool``: what the sender's principal may DESCRIBE (None: all)."""
        def fail(code, message=None):
            respond(R(error_code=code, error_message=message))
        problem = self._invalid_heartbeat(req, version)
        if problem is not None:
            return fail(*problem)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._consumer_leave(req, now_ms, respond, fail)
        records: list = []
        group = self.consumer_groups.get(req.group_id)
        if group is None:
            classic = self.groups.get(req.group_id)
            live = classic is not None and (classic.members or classic.state not in ("Empty", "Dead"))
            if live and (req.member_epoch != 0 or not self.can_upgrade(classic)):
                return fail(E.GROUP_ID_NOT_FOUND, f"group {req.group_id} is not a consumer group")
            if req.member_epoch != 0:
                # The group is gone (deleted, or its records were lost): the member rejoins.
                return fail(E.UNKNOWN_MEMBER_ID, f"group {req.group_id} has no member {req.member_id}")
            if live:
                group = self.upgrade(classic, records, now_ms)  # the online upgrade: its members stay
            elif classic is not None:
                # An empty classic group (e.g. offsets committed by an admin) becomes a consumer
                # group; its offsets stay.
                records.append(group_tombstone(req.group_id))
                del self.groups[req.group_id]
            if group is None:
                group = self.consumer_groups[req.group_id] = ConsumerGroup(req.group_id)
        member, code, message = self._heartbeat_member(group, req, records)
        if code != E.NONE:
            if records:  # a classic group was converted (or upgraded): that stays written
                return self._write(group, records, lambda: fail(code, message), lambda c: fail(code, message))
            if not group.members:
                self.consumer_groups.pop(req.group_id, None)  # created for nothing
            return fail(code, message)
        old_assigned = {t: set(ps) for t, ps in member.assigned.items()} if member.member_id in group.members else {}
        member = self._update_member(group, member, req, client_id, client_host, records)
        member.may_describe = may_describe or _ALL
        self._maybe_bump(group, records)
        if group.group_epoch > group.assignment_epoch:
            self._new_target(group, records)
        owned = None if req.topic_partitions is None else \
            {tp.topic_id: set(tp.partitions) for tp in req.topic_partitions}
        self._reconcile(group, member, owned, now_ms, records)
        member.session_deadline = now_ms + self.config.consumer_timeouts(group.group_id)[0]
        full = req.member_epoch == 0 or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                                         and req.topic_partitions is not None)
        answer = R(error_code=E.NONE, member_id=member.member_id, member_epoch=member.member_epoch,
                   heartbeat_interval_ms=self._interval(group))
        if full or member.assigned != old_assigned:
            answer.assignment = R.Assignment(topic_partitions=[
                R.TopicPartitions(topic_id=t.topic_id, partitions=t.partitions)
                for t in topic_partitions(member.assigned)])
        self._write(group, records, lambda: respond(answer), lambda c: fail(coordinator_error(c)))

    def _interval(self, group) -> int:
        """The heartbeat interval a member is given: the configured one; while a rebalance is
        under way, kraft's shorter one, so that owners hear of revocations, and members waiting
        for released partitions come back for them, in a fraction of a second instead of one or
        two intervals (Kafka always gives the configured one; set both equal for its behaviour).
        The shorter interval grows with the group (``REBALANCE_MS_PER_MEMBER`` each), so a big
        group rebalancing sends its coordinator at most ~100 heartbeats a second."""
        cfg = self.config
        interval = cfg.consumer_timeouts(group.group_id)[1]
        if group.rebalancing():
            fast = max(cfg.consumer_rebalance_heartbeat_interval_ms, REBALANCE_MS_PER_MEMBER * len(group.members))
            return min(fast, interval)
        return interval

    def _invalid_heartbeat(self, req, version):
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``: (code, message) or None."""
        bad = E.INVALID_REQUEST
        if not valid_group_id(req.group_id):
            return E.INVALID_GROUP_ID, "GroupId can't be empty."
        if req.instance_id == "" or req.rack_id == "":
            return bad, "InstanceId and RackId can't be empty."
        if not req.member_id:
            return bad, "MemberId can't be empty."  # KIP-1082: clients make their member ids
        epoch = req.member_epoch
        if epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return bad, "RebalanceTimeoutMs must be provided in first request."
            if req.topic_partitions is None or req.topic_partitions:
                return bad, "TopicPartitions must be empty when (re-)joining."
            if not req.subscribed_topic_names and not req.subscribed_topic_regex:
                return bad, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif epoch == STATIC_LEAVE_EPOCH:
            if req.instance_id is None:
                return bad, "InstanceId can't be null."
        elif epoch < 0 and epoch != LEAVE_EPOCH:
            return bad, "MemberEpoch is invalid."
        if req.server_assignor is not None and req.server_assignor not in self.config.consumer_assignors:
            return E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported."
        if req.subscribed_topic_regex:
            try:
                compile_regex(req.subscribed_topic_regex)
            except RegexError as exc:
                return E.INVALID_REGULAR_EXPRESSION, str(exc)
        return None

    def _heartbeat_member(self, group, req, records):
        """(member, error, message): the member this heartbeat is from, new or replacing a static
        member that left for a while; epochs fence a stale or unknown member."""
        mid, epoch, instance = req.member_id, req.member_epoch, req.instance_id
        existing = group.members.get(mid)
        if existing is None and len(group.members) >= self.config.consumer_max_size:
            return None, E.GROUP_MAX_SIZE_REACHED, "the consumer group is full"
        if instance is not None:
            static_id = group.static_members.get(instance)
            if epoch == 0 and static_id is not None and static_id != mid:
                old = group.members[static_id]
                if old.member_epoch != STATIC_LEFT_EPOCH:
                    return None, E.UNRELEASED_INSTANCE_ID, f"instance {instance} is owned by {static_id}"
                return self._replace_static(group, old, mid, records), E.NONE, None
            if epoch != 0:
                if static_id is None:
                    return None, E.UNKNOWN_MEMBER_ID, f"instance id {instance} is unknown"
                if static_id != mid:
                    return None, E.FENCED_INSTANCE_ID, f"instance {instance} is owned by {static_id}"
        if existing is None:
            if epoch != 0:
                return None, E.UNKNOWN_MEMBER_ID, f"{mid} is not a member of group {group.group_id}"
            return ConsumerMember(mid), E.NONE, None  # in the group once its MemberMetadata is applied
        if epoch == 0:
            # A member rejoining (it was fenced, or its first answer was lost): it starts over
            # and releases whatever it owned (it dropped its partitions before rejoining).
            if existing.member_epoch != 0 or existing.assigned or existing.pending_revocation:
                self._emit(group, records, ConsumerGroupCurrentMemberAssignmentKey(
                    group_id=group.group_id, member_id=mid), ConsumerGroupCurrentMemberAssignmentValue(
                    member_epoch=0, previous_member_epoch=0, state=0, assigned_partitions=[],
                    partitions_pending_revocation=[]))
            return existing, E.NONE, None
        if epoch > existing.member_epoch:
            return None, E.FENCED_MEMBER_EPOCH, f"epoch {epoch} is ahead of {existing.member_epoch}"
        if epoch < existing.member_epoch:
            # Its answer with the newer epoch may have been lost: the previous epoch is taken if
            # the member owns no more than it was assigned.
            owned = req.topic_partitions
            if epoch != existing.previous_epoch or owned is None or any(
                    p not in existing.assigned.get(tp.topic_id, ()) for tp in owned for p in tp.partitions):
                return None, E.FENCED_MEMBER_EPOCH, f"epoch {epoch} is behind {existing.member_epoch}"
        return existing, E.NONE, None

    def _replace_static(self, group, old, new_id: str, records):
        """Kafka's ``replaceMember``: the returning static member takes the old one's place,
        subscription, target and partitions under its new member id; the group epoch does not
        move, so nobody else is disturbed."""
        gid = group.group_id
        target = group.target.get(old.member_id, {})
        assigned = old.assigned
        self._remove_member_records(group, old, records)
        self._emit(group, records, ConsumerGroupMemberMetadataKey(group_id=gid, member_id=new_id),
                   _metadata_value(old))
        self._emit(group, records, ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=new_id),
                   ConsumerGroupTargetAssignmentMemberValue(topic_partitions=topic_partitions(target)))
        self._emit(group, records, ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=new_id),
                   ConsumerGroupCurrentMemberAssignmentValue(member_epoch=0, previous_member_epoch=0, state=0,
                                                             assigned_partitions=topic_partitions(assigned),
                                                             partitions_pending_revocation=[]))
        return group.members[new_id]

    def _update_member(self, group, member, req, client_id, client_host, records):
        """Step 1: the member's MemberMetadata, written when something in it changed; the
        group's member object."""
        new = member.member_id not in group.members
        value = _metadata_value(member)
        if req.instance_id is not None:
            value.instance_id = req.instance_id
        if req.rack_id is not None:
            value.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            value.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            value.server_assignor = req.server_assignor
        if req.subscribed_topic_names is not None:
            value.subscribed_topic_names = sorted(set(req.subscribed_topic_names))
        if req.subscribed_topic_regex is not None:
            value.subscribed_topic_regex = req.subscribed_topic_regex or None
        value.client_id, value.client_host = client_id, client_host
        if new or value != _metadata_value(member):
            subscription = (tuple(value.subscribed_topic_names), value.subscribed_topic_regex, value.server_assignor,
                            value.rack_id)
            before = (member.topics, member.regex, member.server_assignor, member.rack_id)
            self._emit(group, records, ConsumerGroupMemberMetadataKey(group_id=group.group_id,
                                                                      member_id=member.member_id), value)
            if new or subscription != before:
                group.bump_wanted = True
        return group.members[member.member_id]

    def _maybe_bump(self, group, records, force: bool = False) -> None:
        """The subscribed topics' metadata (recomputed on every heartbeat: a topic created or
        grown since bumps the group epoch too) and the group epoch."""
        bump = group.bump_wanted or force
        group.bump_wanted = False
        subscription = self._subscription_metadata(group)
        if subscription != group.subscription:
            bump = True
            T = ConsumerGroupPartitionMetadataValue.TopicMetadata
            self._emit(group, records, ConsumerGroupPartitionMetadataKey(group_id=group.group_id),
                       ConsumerGroupPartitionMetadataValue(topics=[
                           T(topic_id=tid, topic_name=name, num_partitions=n) for name, (tid, n) in
                           sorted(subscription.items())]))
        if bump:
            self._emit(group, records, ConsumerGroupMetadataKey(group_id=group.group_id),
                       ConsumerGroupMetadataValue(epoch=group.group_epoch + 1))

    def _member_topics(self, member) -> set:
        topics = set(member.topics)
        if member.regex:
            try:
                pattern = compile_regex(member.regex)
            except RegexError:
                return topics
            allowed = member.may_describe or (_NONE if self.config.regex_needs_describe else _ALL)
            topics.update(n for n in self.topics.names()
                          if not n.startswith("__") and pattern.fullmatch(n) and allowed(n))
        return topics

    def _subscription_metadata(self, group) -> dict:
        out = {}
        for m in group.members.values():
            for name in self._member_topics(m):
                info = self.topics.lookup(name)
                if info is not None:
                    out[name] = info
        return out

    def _new_target(self, group, records) -> None:
        """Step 2: the target assignment of the current group epoch."""
        assignor = ASSIGNORS[group.preferred_assignor(self.config.consumer_assignors[0])]
        subs = {mid: self._member_topics(m) for mid, m in group.members.items()}
        target = assignor(subs, group.subscription, group.target)
        for mid, share in sorted(target.items()):
            if mid not in group.target or group.target[mid] != share:
                self._emit(group, records, ConsumerGroupTargetAssignmentMemberKey(group_id=group.group_id,
                                                                                   member_id=mid),
                           ConsumerGroupTargetAssignmentMemberValue(topic_partitions=topic_partitions(share)))
        self._emit(group, records, ConsumerGroupTargetAssignmentMetadataKey(group_id=group.group_id),
                   ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=group.group_epoch))

    def _reconcile(self, group, member, owned, now_ms, records) -> None:
        """Step 3: the member's next step towards its target, and its rebalance timer (a member
        that does not revoke within its rebalance timeout is fenced)."""
        step = next_assignment(member, group.assignment_epoch, group.target.get(member.member_id, {}),
                               group.free, owned)
        if step is None:
            return
        epoch, previous, state, assigned, revoking = step
        was = (member.member_epoch, member.state)
        self._emit(group, records, ConsumerGroupCurrentMemberAssignmentKey(group_id=group.group_id,
                                                                            member_id=member.member_id),
                   ConsumerGroupCurrentMemberAssignmentValue(
                       member_epoch=epoch, previous_member_epoch=previous, state=state,
                       assigned_partitions=topic_partitions(assigned),
                       partitions_pending_revocation=topic_partitions(revoking)))
        if state == UNREVOKED_PARTITIONS:
            if was != (epoch, state) or member.rebalance_deadline is None:
                member.rebalance_deadline = now_ms + max(member.rebalance_timeout_ms, 0)
        else:
            member.rebalance_deadline = None

    # --- leaving and fencing -------------------------------------------------------------------
    def _consumer_leave(self, req, now_ms, respond, fail) -> None:
        group = self.consumer_groups.get(req.group_id)
        if group is None:
            return fail(E.GROUP_ID_NOT_FOUND, f"consumer group {req.group_id} not found")
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                return fail(E.UNKNOWN_MEMBER_ID, f"{req.member_id} is not a member of group {req.group_id}")
        else:
            static_id = group.static_members.get(req.instance_id)
            if static_id is None:
                return fail(E.UNKNOWN_MEMBER_ID, f"instance id {req.instance_id} is unknown")
            if static_id != req.member_id:
                return fail(E.FENCED_INSTANCE_ID, f"instance {req.instance_id} is owned by {static_id}")
            member = group.members[static_id]
        records: list = []
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # A static member leaving for a while keeps its partitions (nobody else gets them)
            # until it is back or its session expires.
            self._emit(group, records, ConsumerGroupCurrentMemberAssignmentKey(group_id=group.group_id,
                                                                                member_id=member.member_id),
                       ConsumerGroupCurrentMemberAssignmentValue(
                           member_epoch=STATIC_LEFT_EPOCH, previous_member_epoch=member.previous_epoch,
                           state=member.state, assigned_partitions=topic_partitions(member.assigned),
                           partitions_pending_revocation=[]))
            member.rebalance_deadline = None
        else:
            self._fence(group, member, records, now_ms)
        answer = R(error_code=E.NONE, member_id=req.member_id, member_epoch=req.member_epoch)
        self._write(group, records, lambda: respond(answer), lambda c: fail(coordinator_error(c)))

    def _fence(self, group, member, records, now_ms: int) -> None:
        """Kafka's ``consumerGroupFenceMember``: the member's records go, the group epoch moves
        (the others get its partitions with the next target); if only classic members are left,
        the group becomes a classic group (the online downgrade)."""
        downgrade = self.can_downgrade(group, member.member_id)
        self._remove_member_records(group, member, records)
        if downgrade:
            return self.downgrade(group, records, now_ms)
        self._maybe_bump(group, records, force=True)

    def _remove_member_records(self, group, member, records) -> None:
        gid, mid = group.group_id, member.member_id
        self._emit(group, records, ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=mid), None)
        self._emit(group, records, ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid), None)
        self._emit(group, records, ConsumerGroupMemberMetadataKey(group_id=gid, member_id=mid), None)

    def consumer_tick(self, now_ms: int) -> None:
        """Session expiries (a heartbeat missed for group.consumer.session.timeout.ms) and
        rebalance timeouts (partitions not revoked in time): the member is fenced."""
        for group in list(self.consumer_groups.values()):
            for member in list(group.members.values()):
                expired = member.session_deadline <= now_ms
                stuck = member.rebalance_deadline is not None and member.rebalance_deadline <= now_ms \
                    and member.state == UNREVOKED_PARTITIONS
                if (expired or stuck) and self.consumer_groups.get(group.group_id) is group:
                    records: list = []
                    self._fence(group, member, records, now_ms)
                    self._write(group, records)

    # --- writing -------------------------------------------------------------------------------
    def _emit(self, group, records: list, key, value) -> None:
        """One record: queued for the log and applied to the group now (as a loader would)."""
        records.append((key, value))
        group.apply(key, value)

    def _write(self, group, records: list, on_durable=None, on_failed=None) -> None:
        if not records:
            if on_durable is not None:
                on_durable()
            return
        encoded = [r if not isinstance(r, tuple) else record(*r) for r in records]
        if group.unsynced:
            # An earlier write of this group failed after it was applied here: the log gets the
            # whole group again (tombstones first for members that write may have removed).
            encoded = self._resync_records(group) + encoded
            group.unsynced = False

        def failed(code):
            group.unsynced = True
            group.maybe_removed |= {
                k.member_id for k, v in (r for r in records if isinstance(r, tuple))
                if isinstance(k, ConsumerGroupMemberMetadataKey) and v is None}
            if on_failed is not None:
                on_failed(code)
        self._appends.append(Append(encoded, on_durable, failed))

    def _resync_records(self, group) -> list:
        gid = group.group_id
        out = []
        for mid in sorted(group.maybe_removed - set(group.members)):
            for key in (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupTargetAssignmentMemberKey,
                        ConsumerGroupMemberMetadataKey):
                out.append(record(key(group_id=gid, member_id=mid), None))
        group.maybe_removed = set()
        out.extend(record(k, v) for k, v in group_records(group))
        return out

    # --- offsets of consumer groups ------------------------------------------------------------
    def check_consumer_commit(self, group, member_id: str, epoch: int, version: int) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``."""
        if epoch < 0 and not group.members:
            return E.NONE  # an admin client
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member.classic is not None:  # its generation is its member epoch
            return E.NONE if epoch == member.member_epoch else E.ILLEGAL_GENERATION
        if version < 9:
            return E.UNSUPPORTED_VERSION  # a consumer-protocol member commits with its member epoch
        if epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return E.NONE

    def check_consumer_fetch(self, group, member_id, epoch: int) -> int:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``."""
        if epoch < 0 and member_id is None:
            return E.NONE
        member = group.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        return E.NONE if epoch == member.member_epoch else E.STALE_MEMBER_EPOCH

    def consumer_group_tombstones(self, group) -> list:
        """Every record that deletes ``group`` (it is empty: only its group-level records)."""
        gid = group.group_id
        out = []
        for mid in sorted(group.members):
            for key in (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupTargetAssignmentMemberKey,
                        ConsumerGroupMemberMetadataKey):
                out.append(record(key(group_id=gid, member_id=mid), None))
        for key in (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupPartitionMetadataKey,
                    ConsumerGroupMetadataKey):
            out.append(record(key(group_id=gid), None))
        return out

    # --- ConsumerGroupDescribe -----------------------------------------------------------------
    def consumer_describe(self, group_id: str):
        G = ConsumerGroupDescribeResponse.Group
        A, TP = ConsumerGroupDescribeResponse.Assignment, ConsumerGroupDescribeResponse.TopicPartitions
        if not valid_group_id(group_id):
            return G(error_code=E.INVALID_GROUP_ID, error_message="GroupId can't be empty.", group_id=group_id)
        group = self.consumer_groups.get(group_id)
        if group is None or group.deleted:
            # librdkafka then asks DescribeGroups (a classic group, or none: Dead).
            what = "not a consumer group" if group_id in self.groups else "not found"
            return G(error_code=E.GROUP_ID_NOT_FOUND, error_message=f"group {group_id} {what}", group_id=group_id)
        names = {tid: name for name, (tid, _) in group.subscription.items()}

        def described(assignment):
            return A(topic_partitions=[TP(topic_id=t.topic_id, topic_name=names.get(t.topic_id) or
                                          self.topics.name_of(t.topic_id) or "", partitions=t.partitions)
                                       for t in topic_partitions(assignment)])
        members = [G.Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                            member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                            subscribed_topic_names=list(m.topics), subscribed_topic_regex=m.regex,
                            assignment=described(m.assigned), target_assignment=described(group.target.get(mid, {})))
                   for mid, m in group.members.items()]
        return G(error_code=E.NONE, group_id=group_id, group_state=group.state, group_epoch=group.group_epoch,
                 assignment_epoch=group.assignment_epoch,
                 assignor_name=group.preferred_assignor(self.config.consumer_assignors[0]), members=members)


def _metadata_value(member) -> ConsumerGroupMemberMetadataValue:
    return ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
        client_host=member.client_host, subscribed_topic_names=list(member.topics),
        subscribed_topic_regex=member.regex, rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor, classic_member_metadata=member.classic)


def group_records(group) -> list:
    """The whole group as (key, value) records, in the order Kafka writes them: what replaying
    gives back ``group`` exactly (a resync after a failed write, tests)."""
    gid = group.group_id
    T = ConsumerGroupPartitionMetadataValue.TopicMetadata
    out = [(ConsumerGroupMetadataKey(group_id=gid), ConsumerGroupMetadataValue(epoch=group.group_epoch)),
           (ConsumerGroupPartitionMetadataKey(group_id=gid), ConsumerGroupPartitionMetadataValue(topics=[
               T(topic_id=tid, topic_name=name, num_partitions=n) for name, (tid, n) in
               sorted(group.subscription.items())]))]
    for mid, m in sorted(group.members.items()):
        out.append((ConsumerGroupMemberMetadataKey(group_id=gid, member_id=mid), _metadata_value(m)))
    for mid, share in sorted(group.target.items()):
        out.append((ConsumerGroupTargetAssignmentMemberKey(group_id=gid, member_id=mid),
                    ConsumerGroupTargetAssignmentMemberValue(topic_partitions=topic_partitions(share))))
    out.append((ConsumerGroupTargetAssignmentMetadataKey(group_id=gid),
                ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=group.assignment_epoch)))
    for mid, m in sorted(group.members.items()):
        out.append((ConsumerGroupCurrentMemberAssignmentKey(group_id=gid, member_id=mid),
                    ConsumerGroupCurrentMemberAssignmentValue(
                        member_epoch=m.member_epoch, previous_member_epoch=m.previous_epoch, state=m.state,
                        assigned_partitions=topic_partitions(m.assigned),
                        partitions_pending_revocation=topic_partitions(m.pending_revocation))))
    return out
