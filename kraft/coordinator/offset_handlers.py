"""Committed offsets of a shard's groups (Kafka's ``OffsetMetadataManager``, classic groups):
OffsetCommit with Kafka's commit validation, OffsetFetch, OffsetDelete, DeleteGroups and
offsets retention. A mixin of ``GroupShard`` (it uses the shard's groups, offsets, appends and
member checks); sans-I/O like it."""

from __future__ import annotations

from kraft.coordinator.classic_group import DEAD, EMPTY, COMPLETING, ClassicGroup
from kraft.coordinator.group_records import group_tombstone, offset_commit_record, offset_tombstone
from kraft.coordinator.shard_state import Append, OffsetEntry, commit_error, coordinator_error, valid_group_id
from kraft.errors import ErrorCode as E
from kraft.protocol.messages.group_offsets import OffsetCommitResponse


class OffsetHandlers:
    def commit(self, req, version: int, now_ms: int, respond) -> None:
        R = OffsetCommitResponse
        too_large: set = set()  # ids of the partitions whose metadata is over the limit

        def answer(ok):
            respond(R(topics=[R.Topic(name=t.name, partitions=[
                R.Topic.Partition(partition_index=p.partition_index,
                                  error_code=E.OFFSET_METADATA_TOO_LARGE if too_large and id(p) in too_large else ok)
                for p in t.partitions]) for t in req.topics]))
        group = self.groups.get(req.group_id)
        modern = self.consumer_groups.get(req.group_id)
        if modern is not None:
            code = E.COORDINATOR_NOT_AVAILABLE if modern.deleted else self.check_consumer_commit(
                modern, req.member_id if version >= 1 else "", req.generation_id_or_member_epoch if version >= 1
                else -1, version)
        else:
            code = self._check_commit(group, req, version)
        if code != E.NONE:
            return answer(code)
        if group is None and modern is None:
            group = self.groups[req.group_id] = ClassicGroup(req.group_id, now_ms)  # a "simple" group
        if group is not None and group.members and req.member_id in group.members:
            m = group.members[req.member_id]
            m.heartbeat_deadline = max(m.heartbeat_deadline, now_ms + m.session_timeout_ms)
        limit = self.config.offset_metadata_max_bytes
        records, entries = [], []
        for t in req.topics:
            for p in t.partitions:
                meta = p.committed_metadata or ""
                # UTF-8 is at most 4 bytes a character: short metadata is not encoded to be measured
                if len(meta) * 4 > limit and len(meta.encode("utf-8")) > limit:
                    too_large.add(id(p))
                    continue
                entry = OffsetEntry(p.committed_offset, p.committed_leader_epoch, meta, now_ms)
                records.append(offset_commit_record(req.group_id, t.name, p.partition_index, entry.offset,
                                                    entry.leader_epoch, meta, now_ms))
                entries.append(((t.name, p.partition_index), entry))

        def durable():
            offsets = self.offsets.setdefault(req.group_id, {})
            for key, entry in entries:
                offsets[key] = entry
            answer(E.NONE)

        def failed(code):
            answer(commit_error(code))
        if not records:
            return durable()
        self._appends.append(Append(records, durable, failed))

    def _check_commit(self, group, req, version) -> int:
        return self.check_classic_commit(group, req.group_id, req.generation_id_or_member_epoch if version >= 1 else -1,
                                         req.member_id if version >= 1 else "", req.group_instance_id)

    def check_classic_commit(self, group, group_id: str, generation: int, member_id: str, instance_id,
                             transactional: bool = False) -> int:
        """Kafka's ``ClassicGroup.validateOffsetCommit``: any of a generation, a member id or an
        instance id given, the member must be the group's and of its generation (a member
        that lost its membership commits with its old generation and no member id: refused)."""
        if not valid_group_id(group_id):
            return E.INVALID_GROUP_ID
        if group is None:
            return E.NONE if generation < 0 else E.ILLEGAL_GENERATION
        if group.state == DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state == EMPTY:
            return E.NONE  # an admin client or a simple (assign) consumer
        if generation >= 0 or member_id or instance_id is not None:
            code = self._check_member(group, group_id, member_id, instance_id, generation)
            if code != E.NONE:
                return code
        elif group.state != EMPTY and not transactional:
            return E.UNKNOWN_MEMBER_ID  # (a producer's offsets without a member: accepted, as Kafka)
        if group.state == COMPLETING:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def fetch_offsets(self, group_id: str, topics, member_id=None, member_epoch: int = -1) -> tuple[int, list]:
        """(error, [(topic, [(partition, OffsetEntry or None)])]) for ``topics`` = [(name,
        [partitions])], or every committed offset of the group when ``topics`` is None. A
        consumer group's member (OffsetFetch v9+) must be one, in its current epoch."""
        code = E.NONE if valid_group_id(group_id) else E.INVALID_GROUP_ID
        modern = self.consumer_groups.get(group_id)
        if code == E.NONE and modern is not None:
            code = self.check_consumer_fetch(modern, member_id, member_epoch)
        if code != E.NONE:
            return code, [(name, [(p, None) for p in parts]) for name, parts in topics or ()]
        offsets = self.offsets.get(group_id, {})
        if topics is None:
            by_topic: dict = {}
            for (t, p), entry in sorted(offsets.items()):
                by_topic.setdefault(t, []).append((p, entry))
            return E.NONE, list(by_topic.items())
        return E.NONE, [(name, [(p, offsets.get((name, p))) for p in parts]) for name, parts in topics]

    def delete_offsets(self, group_id: str, topics, respond) -> None:
        """OffsetDelete: ``topics`` = [(name, [partitions])]; respond(error, {(t, p): code})."""
        group = self.groups.get(group_id)
        modern = self.consumer_groups.get(group_id)
        if not valid_group_id(group_id):
            return respond(E.INVALID_GROUP_ID, {})
        if group is None and modern is None and group_id not in self.offsets:
            return respond(E.GROUP_ID_NOT_FOUND, {})
        if group is not None and group.state != EMPTY and group.protocol_type != "consumer" and group.members:
            return respond(E.NON_EMPTY_GROUP, {})
        subscribed = group.subscribed_topics() if group is not None and group.members else set()
        if modern is not None:
            subscribed = {t for m in modern.members.values() for t in self._member_topics(m)}
        codes, records = {}, []
        offsets = self.offsets.get(group_id, {})
        for name, parts in topics:
            for p in parts:
                if subscribed is not None and name in subscribed:
                    codes[(name, p)] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    codes[(name, p)] = E.NONE
                    if (name, p) in offsets:
                        records.append(offset_tombstone(group_id, name, p))

        def durable():
            for r in records:
                self.replay(r.key, None, 0)
            respond(E.NONE, codes)
        if not records:
            return durable()
        self._appends.append(Append(records, durable, lambda code: respond(coordinator_error(code), {})))

    def delete_groups(self, group_ids, respond, now_ms: int | None = None) -> None:
        """DeleteGroups: respond({group_id: code}) once the tombstones are durable. With
        ``now_ms``, the sessions due by then expire first, as Kafka's exact timers would have
        (the ticks come every TICK_S; an admin deleting a group one session after its static
        members closed, as librdkafka's 0081 does, must not find them still there)."""
        if now_ms is not None:
            self.tick(now_ms)
        codes, records, doomed = {}, [], []
        for gid in group_ids:
            group = self.groups.get(gid)
            modern = self.consumer_groups.get(gid)
            if not valid_group_id(gid):
                codes[gid] = E.INVALID_GROUP_ID
            elif group is None and (modern is None or modern.deleted) and gid not in self.offsets:
                codes[gid] = E.GROUP_ID_NOT_FOUND
            elif (group is not None and group.state not in (EMPTY, DEAD)) or (modern is not None and modern.members):
                codes[gid] = E.NON_EMPTY_GROUP
            else:
                codes[gid] = E.NONE
                records.extend(offset_tombstone(gid, t, p) for (t, p) in self.offsets.get(gid, {}))
                if modern is not None:
                    records.extend(self.consumer_group_tombstones(modern))
                    modern.deleted = True
                else:
                    records.append(group_tombstone(gid))
                doomed.append(gid)
                if group is not None:
                    group.transition(DEAD, group.state_since_ms)

        def durable():
            for gid in doomed:
                self.groups.pop(gid, None)
                self.offsets.pop(gid, None)
                modern = self.consumer_groups.get(gid)
                if modern is not None and modern.deleted:
                    del self.consumer_groups[gid]
            respond(codes)

        def failed(code):
            for gid in doomed:
                group = self.groups.get(gid)
                if group is not None:
                    group.state = EMPTY  # back as it was: nothing was deleted
                if gid in self.consumer_groups:
                    self.consumer_groups[gid].deleted = False
                codes[gid] = coordinator_error(code)
            respond(codes)
        if not records:
            return durable()
        self._appends.append(Append(records, durable, failed))

    def expire_offsets(self, now_ms: int) -> None:
        """Offsets retention (Kafka's ``cleanupGroupMetadata``): offsets of groups without
        members expire ``offsets.retention.minutes`` after the later of their commit and the
        group becoming Empty; an Empty group left without offsets is deleted."""
        retention = self.config.offsets_retention_ms
        records, expired = [], []
        for gid in set(self.offsets) | set(self.groups) | set(self.consumer_groups):
            group = self.groups.get(gid)
            modern = self.consumer_groups.get(gid)
            if modern is not None:
                # A consumer group's offsets expire once it has no members; the empty group
                # goes with its last offset.
                if modern.members or modern.deleted:
                    continue
                offsets = self.offsets.get(gid, {})
                gone = [k for k, e in offsets.items() if e.commit_ms + retention <= now_ms]
                records.extend(offset_tombstone(gid, t, p) for t, p in gone)
                expired.extend((gid, k) for k in gone)
                if len(gone) == len(offsets):
                    records.extend(self.consumer_group_tombstones(modern))
                    expired.append((gid, None))
                continue
            if group is not None and group.state != EMPTY:
                continue
            since = group.state_since_ms if group is not None else 0
            offsets = self.offsets.get(gid, {})
            gone = [k for k, e in offsets.items() if max(e.commit_ms, since) + retention <= now_ms]
            records.extend(offset_tombstone(gid, t, p) for t, p in gone)
            expired.extend((gid, k) for k in gone)
            if group is not None and len(gone) == len(offsets) and group.generation >= 0:
                records.append(group_tombstone(gid))
                expired.append((gid, None))

        def durable():
            for gid, k in expired:
                if k is None:
                    group = self.groups.get(gid)
                    if group is not None and group.state == EMPTY and not self.offsets.get(gid):
                        del self.groups[gid]
                    modern = self.consumer_groups.get(gid)
                    if modern is not None and not modern.members and not self.offsets.get(gid):
                        del self.consumer_groups[gid]
                else:
                    self.offsets.get(gid, {}).pop(k, None)
                    if gid in self.offsets and not self.offsets[gid]:
                        del self.offsets[gid]
        if records:
            self._appends.append(Append(records, durable))

    # --- ListGroups / DescribeGroups -----------------------------------------------------------
