"""The classic group state machine of one ``__consumer_offsets`` shard (Kafka's
GroupMetadataManager rules for classic groups), driven with a virtual clock: join/sync races,
session expiry, rebalance timeout, static members (KIP-345), generation fencing, group.max.size,
offsets commit/fetch/delete/retention, and the records a shard writes replayed into a new one."""

from __future__ import annotations

from kraft.coordinator.classic_group import COMPLETING, EMPTY, PREPARING, STABLE
from kraft.coordinator.group_shard import GroupConfig, GroupShard
from kraft.errors import ErrorCode as E
from kraft.protocol import (HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
                            SyncGroupRequest)

SESSION = 10_000
#: ConsumerProtocolSubscription v0: topics ["t"], null user data
SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
REBALANCE = 20_000


class Harness:
    """A shard whose appends become durable when ``flush()`` is called (or fail with ``fail``)."""

    def __init__(self, **config):
        self.shard = GroupShard(0, GroupConfig(**{"initial_rebalance_delay_ms": 0, **config}))
        self.pending = []
        self.log = []  # every record appended, in order

    def collect(self):
        for a in self.shard.take_appends():
            self.log.extend(a.records)
            self.pending.append(a)

    def flush(self):
        self.collect()
        while self.pending:
            a = self.pending.pop(0)
            if a.on_durable:
                a.on_durable()
            self.collect()

    def fail(self, code):
        self.collect()
        for a in self.pending:
            if a.on_failed:
                a.on_failed(code)
        self.pending.clear()

    def join(self, group="g", member_id="", now=0, instance=None, protocols=(("range", SUBSCRIPTION),), version=5):
        box = []
        J = JoinGroupRequest
        self.shard.join(J(group_id=group, session_timeout_ms=SESSION, rebalance_timeout_ms=REBALANCE,
                          member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                          protocols=[J.Protocol(name=n, metadata=m) for n, m in protocols]),
                        version, now, "client", "/127.0.0.1", box.append)
        self.collect()
        return box

    def join_id(self, group="g", now=0, **kw):
        """A new dynamic member: the KIP-394 round trip for its member id, then the real join."""
        [resp] = self.join(group, now=now, **kw)
        assert resp.error_code == E.MEMBER_ID_REQUIRED
        return resp.member_id

    def sync(self, member_id, generation, group="g", assignments=None, now=0, instance=None):
        box = []
        S = SyncGroupRequest
        given = [S.Assignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()]
        self.shard.sync(S(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance,
                          assignments=given),
                        5, now, box.append)
        self.collect()
        return box

    def heartbeat(self, member_id, generation, group="g", now=0, instance=None):
        return self.shard.heartbeat(HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                                     group_instance_id=instance), now).error_code

    def group(self, group="g"):
        return self.shard.groups[group]


def stable_group_of_one(h: Harness, now=0):
    mid = h.join_id(now=now)
    [j] = h.join(member_id=mid, now=now)
    assert (j.error_code, j.generation_id, j.leader) == (E.NONE, 1, mid)
    h.sync(mid, 1, assignments={mid: b"A"}, now=now)
    return mid


def test_a_single_member_joins_syncs_and_is_stable_once_the_assignment_is_durable():
    h = Harness()
    mid = h.join_id()
    [j] = h.join(member_id=mid)
    assert (j.error_code, j.generation_id, j.protocol_name, [m.member_id for m in j.members]) == \
        (E.NONE, 1, "range", [mid])
    sync = h.sync(mid, 1, assignments={mid: b"A"})
    assert sync == [] and h.group().state == COMPLETING  # answered only once the record is durable
    h.flush()
    assert (sync[0].error_code, bytes(sync[0].assignment)) == (E.NONE, b"A")
    assert h.group().state == STABLE


def test_a_second_member_triggers_a_rebalance_and_the_first_learns_it_from_its_heartbeat():
    h = Harness()
    a = stable_group_of_one(h)
    h.flush()
    b = h.join_id(now=10)
    waiting_b = h.join(member_id=b, now=10)
    assert waiting_b == [] and h.group().state == PREPARING
    assert h.heartbeat(a, 1, now=20) == E.REBALANCE_IN_PROGRESS
    [ja] = h.join(member_id=a, now=30)  # the last member to rejoin completes the join phase
    [jb] = waiting_b
    assert ja.generation_id == jb.generation_id == 2 and ja.leader == jb.leader == a
    assert len(ja.members) == 2 and jb.members == []  # only the leader gets the member list
    # The follower's SyncGroup arrives first and waits for the leader's.
    sb = h.sync(b, 2, now=40)
    sa = h.sync(a, 2, assignments={a: b"A", b: b"B"}, now=41)
    assert sb == [] and sa == []
    h.flush()
    assert (bytes(sa[0].assignment), bytes(sb[0].assignment)) == (b"A", b"B")


def test_generation_fencing_and_unknown_members():
    h = Harness()
    a = stable_group_of_one(h)
    h.flush()
    assert h.heartbeat(a, 0) == E.ILLEGAL_GENERATION
    assert h.heartbeat("stranger", 1) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat(a, 1, group="nope") == E.UNKNOWN_MEMBER_ID
    [s] = h.sync(a, 7)
    assert s.error_code == E.ILLEGAL_GENERATION
    [j] = h.join(member_id="stranger")
    assert j.error_code == E.UNKNOWN_MEMBER_ID
    # A sync for the generation being replaced: rejoin.
    h.join(member_id=h.join_id(now=5), now=5)
    [s] = h.sync(a, 1, now=6)
    assert s.error_code == E.REBALANCE_IN_PROGRESS


def test_a_member_whose_session_expires_is_removed_and_the_group_rebalances():
    h = Harness()
    a = stable_group_of_one(h)
    h.flush()
    b = h.join_id(now=0)
    h.join(member_id=b, now=0)
    [ja] = h.join(member_id=a, now=0)
    h.sync(a, 2, assignments={a: b"A", b: b"B"})
    h.sync(b, 2)
    h.flush()
    assert h.heartbeat(a, 2, now=SESSION - 1) == E.NONE  # a heartbeats, b goes silent
    h.shard.tick(SESSION + 1)
    h.collect()
    g = h.group()
    assert list(g.members) == [a] and g.state == PREPARING
    [j] = h.join(member_id=a, now=SESSION + 2)
    assert (j.error_code, j.generation_id, len(j.members)) == (E.NONE, 3, 1)


def test_the_rebalance_timeout_completes_the_join_without_the_members_that_did_not_rejoin():
    h = Harness()
    a = stable_group_of_one(h)
    h.flush()
    b = h.join_id(now=0)
    wb = h.join(member_id=b, now=0)
    # a never rejoins; heartbeats keep its session alive but the join phase ends at the timeout
    for t in range(1000, REBALANCE, 1000):
        h.heartbeat(a, 1, now=t)
        h.shard.tick(t)
    assert wb == []
    h.shard.tick(REBALANCE + 1)
    h.collect()
    [jb] = wb
    assert (jb.error_code, jb.generation_id, jb.leader) == (E.NONE, 2, b)
    assert list(h.group().members) == [b]


def test_leaving_the_last_member_empties_the_group_at_once():
    h = Harness()
    a = stable_group_of_one(h)
    h.flush()
    resp = h.shard.leave(LeaveGroupRequest(group_id="g", members=[LeaveGroupRequest.Member(member_id=a)]), 3, 5)
    assert [m.error_code for m in resp.members] == [E.NONE]
    assert h.group().state == EMPTY and h.group().generation == 2
    resp = h.shard.leave(LeaveGroupRequest(group_id="g", member_id=a), 0, 6)
    assert resp.error_code == E.UNKNOWN_MEMBER_ID


def test_a_static_member_that_restarts_keeps_its_assignment_without_a_rebalance():
    """KIP-345: the same group.instance.id with an unknown member id replaces the old member."""
    h = Harness()
    [j] = h.join(instance="i-1")  # static members need no KIP-394 round trip
    old = j.member_id
    assert j.error_code == E.NONE
    h.sync(old, 1, assignments={old: b"A"}, instance="i-1")
    b = h.join_id(now=1)
    h.join(member_id=b, now=1)
    h.join(member_id=old, instance="i-1", now=2)
    h.sync(old, 2, assignments={old: b"A", b: b"B"}, instance="i-1")
    h.sync(b, 2)
    h.flush()
    [j] = h.join(instance="i-1", now=100, version=9)  # restarted: no member id
    new = j.member_id
    assert new != old and j.error_code == E.NONE and j.generation_id == 2
    assert h.group().state == STABLE
    [s] = h.sync(new, 2, instance="i-1", now=101)
    assert bytes(s.assignment) == b"A"
    assert h.heartbeat(old, 2, instance="i-1") == E.FENCED_INSTANCE_ID


def test_group_max_size():
    h = Harness(max_size=1)
    stable_group_of_one(h)
    [j] = h.join()
    assert j.error_code == E.GROUP_MAX_SIZE_REACHED


def test_the_initial_rebalance_delay_lets_more_members_join_the_first_generation():
    h = Harness(initial_rebalance_delay_ms=3000)
    a = h.join_id()
    wa = h.join(member_id=a, now=0)
    b = h.join_id(now=1000)
    wb = h.join(member_id=b, now=1000)
    h.shard.tick(2999)
    assert wa == wb == []  # both joined, but the delay (pushed to 4000 by b) is not over
    h.shard.tick(4000)
    assert wa[0].generation_id == wb[0].generation_id == 1 and len(wa[0].members) == 2


def test_a_failed_assignment_write_sends_the_members_back_to_rejoin():
    h = Harness()
    a = h.join_id()
    h.join(member_id=a)
    sa = h.sync(a, 1, assignments={a: b"A"})
    h.fail(E.NOT_LEADER_OR_FOLLOWER)
    assert sa[0].error_code == E.NOT_COORDINATOR and h.group().state == PREPARING


def commit(h, group, offset, generation=-1, member="", now=0, metadata=""):
    C = OffsetCommitRequest
    box = []
    h.shard.commit(C(group_id=group, generation_id_or_member_epoch=generation, member_id=member, topics=[
        C.Topic(name="t", partitions=[C.Topic.Partition(partition_index=0, committed_offset=offset,
                                                        committed_metadata=metadata)])]), 8, now, box.append)
    h.collect()
    return box


def test_commits_are_visible_only_once_durable_and_a_member_commits_in_its_generation():
    h = Harness()
    box = commit(h, "simple", 5)
    assert box == [] and h.shard.fetch_offsets("simple", [("t", [0])])[1] == [("t", [(0, None)])]
    h.flush()
    assert box[0].topics[0].partitions[0].error_code == E.NONE
    assert h.shard.fetch_offsets("simple", None)[1][0][1][0][1].offset == 5
    a = stable_group_of_one(h)
    h.flush()
    [r] = commit(h, "g", 9, generation=0, member=a)
    assert r.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
    [r] = commit(h, "g", 9, generation=-1, member="")
    assert r.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID  # not Empty: members only
    [r] = commit(h, "g", 9, generation=1, member=a, metadata="x" * 5000)
    assert r.topics[0].partitions[0].error_code == E.OFFSET_METADATA_TOO_LARGE
    box = commit(h, "g", 9, generation=1, member=a)
    h.flush()
    assert box[0].topics[0].partitions[0].error_code == E.NONE


def test_metadata_is_limited_in_utf8_bytes_not_characters():
    """offset.metadata.max.bytes (4096) counts UTF-8 bytes: 1,024 four-byte characters fit
    exactly, 1,025 do not, 2,000 two-byte ones fit, 1,400 three-byte ones do not."""
    h = Harness()
    for meta, code in (("\U0001d11e" * 1024, E.NONE), ("\U0001d11e" * 1025, E.OFFSET_METADATA_TOO_LARGE),
                       ("é" * 2000, E.NONE), ("€" * 1400, E.OFFSET_METADATA_TOO_LARGE), ("x" * 4096, E.NONE)):
        box = commit(h, "simple", 5, metadata=meta)
        h.flush()
        assert box[0].topics[0].partitions[0].error_code == code, (len(meta), code)


def test_a_new_shard_replaying_the_records_has_the_same_groups_and_offsets():
    h = Harness()
    a = stable_group_of_one(h)
    h.flush()
    commit(h, "g", 11, generation=1, member=a)
    commit(h, "simple", 3)
    h.flush()
    box = []
    h.shard.delete_groups(["simple"], box.append)
    h.flush()
    assert box == [{"simple": E.NONE}]
    other = GroupShard(0)
    for r in h.log:
        other.replay(r.key, r.value, 50)
    g = other.groups["g"]
    assert (g.state, g.generation, g.leader, g.members[a].assignment) == (STABLE, 1, a, b"A")
    assert other.offsets == {"g": h.shard.offsets["g"]} and "simple" not in other.groups
    assert other.heartbeat(HeartbeatRequest(group_id="g", generation_id=1, member_id=a), 60).error_code == E.NONE


def test_delete_groups_and_offsets_rules():
    h = Harness()
    stable_group_of_one(h)
    h.flush()
    box = []
    h.shard.delete_groups(["g", "nope", ""], box.append)
    assert box == [{"g": E.NON_EMPTY_GROUP, "nope": E.GROUP_ID_NOT_FOUND, "": E.INVALID_GROUP_ID}]
    got = []
    h.shard.delete_offsets("g", [("t", [0])], lambda code, codes: got.append((code, codes)))
    assert got == [(E.NONE, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC})]  # the member subscribes to "t"


def test_delete_groups_expires_the_sessions_due_by_its_time_first():
    """Between two ticks a member whose session has passed is gone for DeleteGroups, as with
    Kafka's exact timers (librdkafka's 0081 deletes its groups one session after closing their
    static members); without a time, only ticks expire sessions."""
    h = Harness()
    stable_group_of_one(h, now=0)
    h.flush()
    box = []
    h.shard.delete_groups(["g"], box.append)  # no time given: the member is still there
    assert box == [{"g": E.NON_EMPTY_GROUP}]
    h.shard.delete_groups(["g"], box.append, SESSION - 1)
    assert box[-1] == {"g": E.NON_EMPTY_GROUP}
    h.shard.delete_groups(["g"], box.append, SESSION)
    h.flush()
    assert box[-1] == {"g": E.NONE} and "g" not in h.shard.groups


def test_offsets_of_an_empty_group_expire_after_the_retention():
    h = Harness(offsets_retention_ms=1000)
    commit(h, "old", 1, now=0)
    h.flush()
    h.shard.expire_offsets(999)
    h.flush()
    assert "old" in h.shard.offsets
    h.shard.expire_offsets(1000)
    h.flush()
    assert "old" not in h.shard.offsets and "old" not in h.shard.groups


def test_a_static_leader_restarting_skips_the_assignment_from_v9_and_rebalances_before():
    h = Harness()
    [j] = h.join(instance="lead", version=9)
    h.sync(j.member_id, 1, assignments={j.member_id: b"A"}, instance="lead")
    h.flush()
    [j9] = h.join(instance="lead", version=9, now=5)
    assert (j9.error_code, j9.skip_assignment, len(j9.members), j9.generation_id) == (E.NONE, True, 1, 1)
    assert h.group().state == STABLE
    assert h.join(instance="lead", version=5, now=6)[0].generation_id == 2  # a new generation for it
    assert h.group().state == COMPLETING


def test_losing_the_partition_answers_waiting_joins_not_coordinator_and_failed_commits_map_to_group_errors():
    h = Harness()
    stable_group_of_one(h)
    h.flush()
    b = h.join_id(now=1)
    wb = h.join(member_id=b, now=1)  # waits for a to rejoin
    h.shard.unload()
    assert wb[0].error_code == E.NOT_COORDINATOR and h.shard.groups == {}
    h2 = Harness()
    box = commit(h2, "simple", 5)
    h2.fail(E.NOT_LEADER_OR_FOLLOWER)
    assert box[0].topics[0].partitions[0].error_code == E.NOT_COORDINATOR
    box = commit(h2, "simple", 5)
    h2.fail(E.REQUEST_TIMED_OUT)
    assert box[0].topics[0].partitions[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    box = commit(h2, "simple", 5)
    h2.fail(E.RECORD_LIST_TOO_LARGE)
    assert box[0].topics[0].partitions[0].error_code == E.INVALID_COMMIT_OFFSET_SIZE
    assert h2.shard.offsets == {}  # nothing failed became visible
