"""The groups and committed offsets of one ``__consumer_offsets`` partition, and the classic
group request handlers over them (Kafka's ``GroupMetadataManager`` + ``OffsetMetadataManager``
for one shard, classic groups only).

Contract (as the controller's): a handler changes memory and queues ``Append``s: the records to
write to this shard's partition, what to do once they are durable (apply, answer) and what to do
if the write fails. Every answer goes through a ``respond`` callable the caller passes, called
exactly once, perhaps later (a JoinGroup waits for the rebalance). The driver drains
``take_appends()`` after every call and ``tick(now_ms)``. Sans-I/O: no clock, no randomness
(member ids come from ``new_member_id``), no sockets.
"""

from __future__ import annotations

import logging

from kraft.coordinator.classic_group import (CLASSIC, COMPLETING, DEAD, EMPTY, PREPARING, STABLE, ClassicGroup,
                                             ClassicMember)
from kraft.coordinator.consumer_group import CONSUMER, ConsumerGroup, TopicsView
from kraft.coordinator.consumer_handlers import ConsumerHandlers
from kraft.coordinator.mixed_groups import MixedGroupHandlers
from kraft.coordinator.consumer_records import ConsumerGroupMemberMetadataKey, ConsumerGroupMetadataKey
from kraft.coordinator.group_records import GroupMetadataKey, OffsetCommitKey, decode_record, group_metadata_record
from kraft.coordinator.offset_handlers import OffsetHandlers
from kraft.coordinator.shard_state import (Append, GroupConfig, OffsetEntry, TxnMarker, TxnOffsets,
                                           coordinator_error, valid_group_id)
from kraft.coordinator.txn_offsets import TxnOffsetHandlers
from kraft.errors import ErrorCode as E
from kraft.protocol.messages.group_admin import DescribeGroupsResponse, ListGroupsResponse

log = logging.getLogger("kraft.groups")
from kraft.protocol.messages.group_membership import (HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse,
                                                      SyncGroupResponse)

class GroupShard(OffsetHandlers, TxnOffsetHandlers, ConsumerHandlers, MixedGroupHandlers):
    """Invariant: a group id is in ``groups`` (classic) or ``consumer_groups`` (KIP-848), never
    both; committed offsets (``offsets``) are the same for both types."""

    def __init__(self, partition: int, config: GroupConfig | None = None, *, new_member_id=None, topics=None):
        self.partition = partition
        self.config = config or GroupConfig()
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.topics = topics or TopicsView()  # the cluster's topics: what consumer groups subscribe to
        self.offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
        #: transactional offsets waiting for their producer's marker: pid -> group -> (t, p) -> entry
        self.pending_txn: dict[int, dict[str, dict[tuple[str, int], OffsetEntry]]] = {}
        self._counter = 0
        self.new_member_id = new_member_id or self._next_member_id
        self._appends: list[Append] = []

    def _next_member_id(self, client_id: str) -> str:
        self._counter += 1
        return f"{client_id}-{self.partition}-{self._counter}"

    def take_appends(self) -> list:
        out, self._appends = self._appends, []
        return out

    # --- loading -------------------------------------------------------------------------------
    def replay(self, key, value, now_ms: int) -> None:
        """Apply one record of this shard's partition, in log order (loading, or a follower's
        view). Unknown record types are skipped; undecodable ones raise ProtocolError."""
        self.apply(decode_record(key, value), now_ms)

    def apply(self, decoded, now_ms: int) -> None:
        """``replay`` of a record already decoded (``decode_record``; a loader decodes off the
        event loop and applies on it)."""
        if decoded is None:
            return
        if isinstance(decoded, TxnOffsets):
            return self.apply_txn_offset(decoded.producer_id, decoded.decoded)
        if isinstance(decoded, TxnMarker):
            return self.complete_txn(decoded.producer_id, decoded.committed, now_ms)
        k, v = decoded
        if isinstance(k, OffsetCommitKey):
            offsets = self.offsets.setdefault(k.group, {})
            if v is None:
                offsets.pop((k.topic, k.partition), None)
                if not offsets:
                    del self.offsets[k.group]
            else:
                offsets[(k.topic, k.partition)] = OffsetEntry(v.offset, v.leader_epoch, v.metadata,
                                                              v.commit_timestamp)
        elif isinstance(k, GroupMetadataKey):
            if v is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = ClassicGroup.from_record(k.group, v, now_ms)
        elif isinstance(k, ConsumerGroupMetadataKey) and v is None:
            self.consumer_groups.pop(k.group_id, None)
        else:  # a KIP-848 record
            group = self.consumer_groups.get(k.group_id)
            if group is None:
                if v is None:
                    return  # a tombstone of a group already gone
                group = self.consumer_groups[k.group_id] = ConsumerGroup(k.group_id)
            group.apply(k, v)
            if isinstance(k, ConsumerGroupMemberMetadataKey) and v is not None:
                # A loaded member must heartbeat within its session to stay.
                member = group.members[k.member_id]
                session = member.classic.session_timeout_ms if member.classic is not None \
                    else self.config.consumer_timeouts(k.group_id)[0]
                member.session_deadline = max(member.session_deadline, now_ms + session)

    def unload(self) -> None:
        """This broker no longer coordinates the shard: waiting answers get NOT_COORDINATOR."""
        for group in self.groups.values():
            for m in group.members.values():
                self._answer_join(m, JoinGroupResponse(error_code=E.NOT_COORDINATOR, member_id=m.member_id))
                self._answer_sync(m, E.NOT_COORDINATOR)
        self.groups.clear()
        self.consumer_groups.clear()
        self.offsets.clear()
        self.pending_txn.clear()

    # --- JoinGroup -----------------------------------------------------------------------------
    def join(self, req, version: int, now_ms: int, client_id: str, client_host: str, respond) -> None:
        def fail(code, member_id=""):
            respond(JoinGroupResponse(error_code=code, generation_id=-1, member_id=member_id,
                                      protocol_name=None if version >= 7 else "", leader=""))
        cfg = self.config
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        if not valid_group_id(req.group_id):
            return fail(E.INVALID_GROUP_ID, req.member_id)
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return fail(E.INVALID_SESSION_TIMEOUT, req.member_id)
        if not req.protocol_type or not protocols or any(len(m) > cfg.max_metadata_bytes for _, m in protocols):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        modern = self.consumer_groups.get(req.group_id)
        if modern is not None:
            if modern.deleted:
                return fail(E.COORDINATOR_NOT_AVAILABLE, req.member_id)
            if modern.members:  # a classic member in a consumer group
                return self.classic_join(modern, req, version, now_ms, client_id, client_host, respond)
            # An empty consumer group becomes a classic one (its offsets stay).
            self._appends.append(Append(self.consumer_group_tombstones(modern)))
            del self.consumer_groups[req.group_id]
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return fail(E.UNKNOWN_MEMBER_ID, req.member_id)
            group = self.groups[req.group_id] = ClassicGroup(req.group_id, now_ms)
        if group.state == DEAD:
            return fail(E.COORDINATOR_NOT_AVAILABLE, req.member_id)
        if not group.supports_protocols(req.protocol_type, protocols):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        rebalance_ms = req.rebalance_timeout_ms if version >= 1 and req.rebalance_timeout_ms > 0 \
            else req.session_timeout_ms
        instance = req.group_instance_id
        if not req.member_id or req.member_id in group.pending_members:
            self._join_unknown(group, req, version, now_ms, client_id, client_host, protocols, rebalance_ms,
                               instance, respond, fail)
        else:
            self._join_known(group, req, version, now_ms, protocols, rebalance_ms, instance, respond, fail)
        if group.state == PREPARING and not group.initial_join and group.all_joined():
            self._complete_join(group, now_ms)

    def _join_unknown(self, group, req, version, now_ms, client_id, client_host, protocols, rebalance_ms, instance,
                      respond, fail):
        cfg = self.config
        if instance is not None and instance in group.static_members:
            old_id = group.static_members[instance]
            new_id = self.new_member_id(client_id)
            old = group.members[old_id]
            self._answer_join(old, JoinGroupResponse(error_code=E.FENCED_INSTANCE_ID, member_id=old_id))
            self._answer_sync(old, E.FENCED_INSTANCE_ID)
            member = group.replace_static(old_id, new_id)
            member.session_timeout_ms, member.rebalance_timeout_ms = req.session_timeout_ms, rebalance_ms
            member.heartbeat_deadline = now_ms + req.session_timeout_ms
            leader = group.leader == new_id
            if group.state == STABLE and member.same_protocols(protocols) and (version >= 9 or not leader):
                # KIP-345: a known static member restarting does not rebalance the group; it
                # gets the current generation and syncs to its old assignment. A leader also
                # gets the members with SkipAssignment (KIP-814, v9+); an older leader cannot
                # be told to skip, so it rebalances (Kafka's rule).
                respond(self._join_answer(group, member, version, with_members=leader, skip=leader))
                return
            member.protocols = protocols
            member.join_reply = respond
            if group.state in (STABLE, COMPLETING):
                self._prepare_rebalance(group, now_ms, "static member rejoined")
            return  # in PreparingRebalance it just waits with the others
        member_id = req.member_id
        if not member_id:
            if len(group.members) + len(group.pending_members) >= cfg.max_size:
                return fail(E.GROUP_MAX_SIZE_REACHED)
            member_id = self.new_member_id(client_id)
            if instance is None and version >= 4:
                # KIP-394: a dynamic member first learns its id, then joins with it.
                group.pending_members[member_id] = now_ms + req.session_timeout_ms
                return fail(E.MEMBER_ID_REQUIRED, member_id)
        else:
            del group.pending_members[member_id]
            if len(group.members) >= cfg.max_size:
                return fail(E.GROUP_MAX_SIZE_REACHED, member_id)
        member = ClassicMember(member_id, instance, client_id, client_host, req.session_timeout_ms, rebalance_ms,
                               req.protocol_type, protocols)
        member.is_new = True
        member.join_reply = respond
        member.heartbeat_deadline = now_ms + cfg.new_member_join_timeout_ms
        group.add(member)
        if group.state in (EMPTY, STABLE, COMPLETING):
            self._prepare_rebalance(group, now_ms, f"member {member_id} joined")
        elif group.initial_join:
            # Kafka's InitialDelayedJoin: each new member pushes the end out by the delay, up to
            # the rebalance timeout from the start.
            group.rebalance_deadline = min(now_ms + cfg.initial_rebalance_delay_ms,
                                           group.state_since_ms + max(group.rebalance_timeout_ms(),
                                                                      cfg.initial_rebalance_delay_ms))

    def _join_known(self, group, req, version, now_ms, protocols, rebalance_ms, instance, respond, fail):
        member = group.members.get(req.member_id)
        if member is None:
            return fail(E.UNKNOWN_MEMBER_ID, req.member_id)
        if member.instance_id != instance and instance is not None:
            return fail(E.FENCED_INSTANCE_ID, req.member_id)
        member.session_timeout_ms, member.rebalance_timeout_ms = req.session_timeout_ms, rebalance_ms
        if group.state == PREPARING:
            self._answer_join(member, JoinGroupResponse(error_code=E.REBALANCE_IN_PROGRESS, member_id=member.member_id))
            member.protocols = protocols
            member.join_reply = respond
        elif group.state == COMPLETING:
            if member.same_protocols(protocols):
                # Its earlier answer was lost: the same answer again.
                respond(self._join_answer(group, member, version, with_members=member.member_id == group.leader))
            else:
                member.protocols = protocols
                member.join_reply = respond
                self._prepare_rebalance(group, now_ms, f"member {member.member_id} changed its protocols")
        elif group.state == STABLE:
            if member.member_id == group.leader or not member.same_protocols(protocols):
                member.protocols = protocols
                member.join_reply = respond
                self._prepare_rebalance(group, now_ms, f"member {member.member_id} rejoined")
            else:
                member.heartbeat_deadline = now_ms + member.session_timeout_ms
                respond(self._join_answer(group, member, version, with_members=False))
        else:  # Empty with a member id: it was removed
            fail(E.UNKNOWN_MEMBER_ID, req.member_id)

    def _join_answer(self, group, member, version, *, with_members: bool, skip: bool = False):
        R = JoinGroupResponse
        members = []
        if with_members:
            members = [R.Member(member_id=m.member_id, group_instance_id=m.instance_id,
                                metadata=m.metadata(group.protocol)) for m in group.members.values()]
        return R(error_code=E.NONE, generation_id=group.generation, protocol_type=group.protocol_type,
                 protocol_name=group.protocol, leader=group.leader or "", member_id=member.member_id,
                 members=members, skip_assignment=skip)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int, reason: str) -> None:
        # Kafka's GroupCoordinator lines, so an operator can follow a group's rebalances.
        log.info("Preparing to rebalance group %s in state %s with old generation %d (%s-%d) (reason: %s)",
                 group.group_id, group.state, group.generation, "__consumer_offsets", self.partition, reason)
        if group.state == COMPLETING:
            # Members waiting for the assignment of a generation that will not be: rejoin.
            for m in group.members.values():
                self._answer_sync(m, E.REBALANCE_IN_PROGRESS)
        delay = self.config.initial_rebalance_delay_ms
        group.initial_join = group.state == EMPTY and delay > 0
        group.transition(PREPARING, now_ms)
        group.sync_deadline = None
        group.rebalance_deadline = now_ms + (min(delay, max(group.rebalance_timeout_ms(), 1))
                                             if group.initial_join else group.rebalance_timeout_ms())

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        """Kafka's ``onCompleteJoin``: members that did not rejoin leave; a new generation starts
        with the chosen protocol, and every waiting JoinGroup is answered (the leader with the
        member list)."""
        for m in [m for m in group.members.values() if m.join_reply is None]:
            group.remove(m.member_id)
        group.pending_members.clear()
        group.initial_join = False
        group.rebalance_deadline = None
        group.generation += 1
        if not group.members:
            group.protocol = None
            group.transition(EMPTY, now_ms)
            self._appends.append(Append([group_metadata_record(group.group_id, group.metadata_value())]))
            return
        group.protocol = group.select_protocol()
        log.info("Stabilized group %s generation %d (__consumer_offsets-%d) with %d members", group.group_id,
                 group.generation, self.partition, len(group.members))
        group.transition(COMPLETING, now_ms)
        group.sync_deadline = now_ms + group.rebalance_timeout_ms()
        for m in group.members.values():
            answer = self._join_answer(group, m, 0, with_members=m.member_id == group.leader)
            m.is_new = False
            m.heartbeat_deadline = now_ms + m.session_timeout_ms
            self._answer_join(m, answer)

    def _answer_join(self, member, response) -> None:
        reply, member.join_reply = member.join_reply, None
        if reply is not None:
            reply(response)

    def _answer_sync(self, member, code, assignment=b"", group=None) -> None:
        reply, member.sync_reply = member.sync_reply, None
        if reply is not None:
            reply(SyncGroupResponse(error_code=code, assignment=assignment,
                                    protocol_type=group.protocol_type if group else None,
                                    protocol_name=group.protocol if group else None))

    # --- SyncGroup -----------------------------------------------------------------------------
    def sync(self, req, version: int, now_ms: int, respond) -> None:
        def fail(code):
            respond(SyncGroupResponse(error_code=code, assignment=b""))
        if req.group_id in self.consumer_groups:
            return self.classic_sync(self.consumer_groups[req.group_id], req, now_ms, respond)
        group = self.groups.get(req.group_id)
        code = self._check_member(group, req.group_id, req.member_id, req.group_instance_id, req.generation_id)
        if code != E.NONE:
            return fail(code)
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or \
                (req.protocol_name is not None and req.protocol_name != group.protocol):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[req.member_id]
        if group.state == PREPARING:
            return fail(E.REBALANCE_IN_PROGRESS)
        if group.state == STABLE:
            member.heartbeat_deadline = now_ms + member.session_timeout_ms
            return respond(SyncGroupResponse(error_code=E.NONE, assignment=member.assignment,
                                             protocol_type=group.protocol_type, protocol_name=group.protocol))
        # CompletingRebalance
        self._answer_sync(member, E.REBALANCE_IN_PROGRESS)
        member.sync_reply = respond
        if member.member_id != group.leader:
            return
        assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
        generation = group.generation
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        record = group_metadata_record(group.group_id, group.metadata_value())

        def durable():
            if group.state != COMPLETING or group.generation != generation:
                return
            group.transition(STABLE, now_ms)
            group.sync_deadline = None
            for m in group.members.values():
                m.heartbeat_deadline = max(m.heartbeat_deadline, now_ms + m.session_timeout_ms)
                self._answer_sync(m, E.NONE, m.assignment, group)

        def failed(code):
            if group.state != COMPLETING or group.generation != generation:
                return
            for m in group.members.values():
                m.assignment = b""
                self._answer_sync(m, coordinator_error(code))
            self._prepare_rebalance(group, now_ms, "writing the assignment failed")
        self._appends.append(Append([record], durable, failed))

    def _check_member(self, group, group_id, member_id, instance_id, generation) -> int:
        if not valid_group_id(group_id):
            return E.INVALID_GROUP_ID
        if group is None or group.state == DEAD:
            return E.UNKNOWN_MEMBER_ID if group is None else E.COORDINATOR_NOT_AVAILABLE
        member = group.members.get(member_id)
        if instance_id is not None and instance_id in group.static_members \
                and group.static_members[instance_id] != member_id:
            return E.FENCED_INSTANCE_ID
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return E.ILLEGAL_GENERATION
        return E.NONE

    # --- Heartbeat -----------------------------------------------------------------------------
    def heartbeat(self, req, now_ms: int) -> HeartbeatResponse:
        if req.group_id in self.consumer_groups:
            return self.classic_heartbeat(self.consumer_groups[req.group_id], req, now_ms)
        group = self.groups.get(req.group_id)
        code = self._check_member(group, req.group_id, req.member_id, req.group_instance_id, req.generation_id)
        if code == E.NONE:
            member = group.members[req.member_id]
            member.heartbeat_deadline = now_ms + member.session_timeout_ms
            if group.state == PREPARING:
                code = E.REBALANCE_IN_PROGRESS
        return HeartbeatResponse(error_code=code)

    # --- LeaveGroup ----------------------------------------------------------------------------
    def leave(self, req, version: int, now_ms: int) -> LeaveGroupResponse:
        R = LeaveGroupResponse
        if not valid_group_id(req.group_id):
            return R(error_code=E.INVALID_GROUP_ID)
        if req.group_id in self.consumer_groups:
            return self.classic_leave(self.consumer_groups[req.group_id], req, version, now_ms)
        group = self.groups.get(req.group_id)
        if group is None or group.state == DEAD:
            return R(error_code=E.UNKNOWN_MEMBER_ID if group is None else E.COORDINATOR_NOT_AVAILABLE)
        leaving = [(req.member_id, None, None)] if version < 3 else \
            [(m.member_id, m.group_instance_id, m) for m in req.members]
        answers = []
        for member_id, instance, _ in leaving:
            code = E.NONE
            if instance is not None:
                known = group.static_members.get(instance)
                if known is None:
                    code = E.UNKNOWN_MEMBER_ID
                elif member_id and member_id != known:
                    code = E.FENCED_INSTANCE_ID
                else:
                    member_id = known
            elif member_id not in group.members:
                code = E.UNKNOWN_MEMBER_ID
            if code == E.NONE:
                self._remove_member(group, member_id, now_ms, "left the group")
            answers.append(R.Member(member_id=member_id, group_instance_id=instance, error_code=code))
        if version < 3:
            return R(error_code=answers[0].error_code)
        return R(error_code=E.NONE, members=answers)

    def _remove_member(self, group, member_id, now_ms, reason) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        self._answer_join(member, JoinGroupResponse(error_code=E.UNKNOWN_MEMBER_ID, member_id=member_id))
        self._answer_sync(member, E.UNKNOWN_MEMBER_ID)
        if group.state in (STABLE, COMPLETING):
            self._prepare_rebalance(group, now_ms, f"member {member_id} {reason}")
        # The last member the join phase waited for left: it ends now (with nobody left the
        # group is Empty at once, so an admin may commit or delete right after a close()).
        if group.state == PREPARING and not group.initial_join and group.all_joined():
            self._complete_join(group, now_ms)

    # --- timers --------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """Session expiries, the end of join phases, members that never synced, expired
        pending member ids; consumer groups' session and rebalance timeouts."""
        self.consumer_tick(now_ms)
        for group in list(self.groups.values()):
            for mid, deadline in list(group.pending_members.items()):
                if deadline <= now_ms:
                    del group.pending_members[mid]
            if group.state == PREPARING and group.rebalance_deadline is not None \
                    and (group.rebalance_deadline <= now_ms or (not group.initial_join and group.all_joined())):
                self._complete_join(group, now_ms)
            if group.state == COMPLETING and group.sync_deadline is not None and group.sync_deadline <= now_ms:
                for m in [m for m in group.members.values() if m.sync_reply is None]:
                    self._remove_member(group, m.member_id, now_ms, "did not sync in time")
            for m in list(group.members.values()):
                if not m.keeps_alive(now_ms) and group.state != DEAD:
                    self._remove_member(group, m.member_id, now_ms, "session expired")

    def list_groups(self, states, types) -> list:
        states = {s.lower() for s in states or ()}
        types = {t.lower() for t in types or ()}
        out = []
        for group in self.groups.values():
            if group.state == DEAD or (states and group.state.lower() not in states) or \
                    (types and CLASSIC not in types):
                continue
            out.append(ListGroupsResponse.Group(group_id=group.group_id, protocol_type=group.protocol_type or "",
                                                group_state=group.state, group_type=CLASSIC))
        for group in self.consumer_groups.values():
            state = group.state
            if state == DEAD or (states and state.lower() not in states) or (types and CONSUMER not in types):
                continue
            out.append(ListGroupsResponse.Group(group_id=group.group_id, protocol_type=CONSUMER, group_state=state,
                                                group_type=CONSUMER))
        return out

    def describe(self, group_id: str):
        G = DescribeGroupsResponse.Group
        if not valid_group_id(group_id):
            return G(error_code=E.INVALID_GROUP_ID, group_id=group_id, group_state="", protocol_type="",
                     protocol_data="")
        group = self.groups.get(group_id)
        if group is None:  # also a consumer group: Kafka's DescribeGroups v0-5 answer Dead (see ConsumerGroupDescribe)
            return G(error_code=E.NONE, group_id=group_id, group_state=DEAD, protocol_type="", protocol_data="")
        stable = group.state == STABLE
        members = [G.Member(member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata(group.protocol) if stable else b"",
                            member_assignment=m.assignment if stable else b"") for m in group.members.values()]
        return G(error_code=E.NONE, group_id=group_id, group_state=group.state,
                 protocol_type=group.protocol_type or "", protocol_data=(group.protocol or "") if stable else "",
                 members=members)
