"""Classic consumers in a KIP-848 consumer group, and the online upgrade and downgrade between the
two group types (Kafka 4's ``group.consumer.migration.policy``): a consumer-protocol member
joining a live classic group converts it, classic members keep consuming and are told to rejoin
to revoke or collect partitions, nobody owns a partition twice, the records replay; when the
last consumer-protocol member leaves, the group is classic again and rebalances."""

from __future__ import annotations

from consumer_harness import Client, Shard, snapshot, topic_id

from kraft.coordinator.consumer_protocol import (ConsumerProtocolSubscription, TopicPartition, assignment_bytes,
                                                 parse_assignment)
from kraft.errors import ErrorCode as E
from kraft.protocol import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, SyncGroupRequest

T = topic_id("t")


class ClassicClient:
    """A classic consumer (JoinGroup v5 / SyncGroup; the leader of a classic group assigns by
    range): it owns what its last SyncGroup gave it and says so in its subscription (v1)."""

    def __init__(self, h: Shard, name: str):
        self.h, self.name = h, name
        self.member_id, self.generation, self.owned = "", -1, set()
        self.answers = []  # JoinGroup answers, also those that come later (a classic rebalance)

    def answered(self):
        """The join answer that came meanwhile (a classic rebalance completed), applied."""
        resp = self.answers.pop() if self.answers else None
        if resp is not None and resp.error_code == E.NONE:
            self.member_id, self.generation = resp.member_id, resp.generation_id
        return resp

    def metadata(self) -> bytes:
        sub = ConsumerProtocolSubscription(topics=["t"], owned_partitions=[
            TopicPartition(topic="t", partitions=sorted(self.owned))] if self.owned else [])
        return b"\x00\x01" + sub.encode(1)

    def join(self, now=0):
        J = JoinGroupRequest
        for _ in range(2):
            self.h.shard.join(J(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=20_000,
                                member_id=self.member_id, protocol_type="consumer",
                                protocols=[J.Protocol(name="range", metadata=self.metadata())]),
                              5, now, self.name, "/h", self.answers.append)
            self.h.flush()
            if not self.answers:
                return None  # a classic rebalance: the answer comes when every member has joined
            resp = self.answers[-1]
            self.member_id = resp.member_id or self.member_id
            if resp.error_code != E.MEMBER_ID_REQUIRED:
                break
            self.answers.pop()
        return self.answered()

    def sync(self, assignments=None, now=0):
        S = SyncGroupRequest
        box = []
        self.h.shard.sync(S(group_id="g", generation_id=self.generation, member_id=self.member_id, assignments=[
            S.Assignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()]), 5, now, box.append)
        self.h.flush()
        if box and box[0].error_code == E.NONE:
            self.owned = parse_assignment(box[0].assignment).get("t", set())
        return box[0] if box else None

    def heartbeat(self, now=0):
        return self.h.shard.heartbeat(HeartbeatRequest(group_id="g", generation_id=self.generation,
                                                       member_id=self.member_id), now).error_code

    def rebalance(self, now=0):
        """Join then sync (a follower in a consumer group: the coordinator assigns)."""
        resp = self.join(now)
        assert resp is not None and resp.error_code == E.NONE, resp
        assert resp.leader == "" and resp.members == []
        return self.sync(now=now)


def classic_group_of_two(h: Shard):
    """A stable classic group: a leads and gives 0-2 to a, 3-5 to b."""
    a, b = ClassicClient(h, "a"), ClassicClient(h, "b")
    assert a.join() is None and b.join() is None  # group.initial.rebalance.delay.ms
    h.shard.tick(3000)
    h.flush()
    assert a.answered().error_code == 0 and b.answered().error_code == 0
    lead = a if h.shard.groups["g"].leader == a.member_id else b
    other = b if lead is a else a
    plan = {lead.member_id: assignment_bytes(1, {"t": {0, 1, 2}}), other.member_id: assignment_bytes(1, {"t": {3, 4, 5}})}
    other.sync()
    lead.sync(plan)
    other.sync()
    assert (lead.owned, other.owned) == ({0, 1, 2}, {3, 4, 5})
    return lead, other


def nobody_shares(clients) -> bool:
    seen = set()
    for c in clients:
        mine = c.owned if isinstance(c, ClassicClient) else c.owned.get(T, set())
        if seen & mine:
            return False
        seen |= mine
    return True


def test_a_consumer_member_joining_a_live_classic_group_upgrades_it_and_classic_members_keep_going():
    h = Shard()
    a, b = classic_group_of_two(h)
    c = Client(h, "c")
    resp = c.heartbeat()
    assert resp.error_code == 0 and "g" in h.shard.consumer_groups and "g" not in h.shard.groups
    g = h.group()
    assert {m.member_id: (m.classic is not None) for m in g.members.values()} == \
        {a.member_id: True, b.member_id: True, "c": False}
    assert g.members[a.member_id].assigned == {T: {0, 1, 2}}  # the classic assignment carries over
    # Classic members hear of the rebalance from their heartbeats, rejoin, revoke, rejoin, collect.
    clients = [a, b, c]
    for _ in range(6):
        for x in (a, b):
            if x.heartbeat() != E.NONE:
                x.rebalance()
            assert nobody_shares(clients)
        c.heartbeat()
        assert nobody_shares(clients)
    assert sorted(len(x.owned) if isinstance(x, ClassicClient) else len(x.owned[T]) for x in clients) == [2, 2, 2]
    assert h.group().state == "Stable"
    assert snapshot(h.replayed()) == snapshot(h.shard)  # the classic members' metadata is in the records


def test_a_classic_member_commits_with_its_generation_in_a_consumer_group():
    h = Shard()
    a, _ = classic_group_of_two(h)
    Client(h, "c").heartbeat()
    C = OffsetCommitRequest
    box = []
    req = C(group_id="g", generation_id_or_member_epoch=a.generation, member_id=a.member_id, topics=[C.Topic(
        name="t", partitions=[C.Topic.Partition(partition_index=0, committed_offset=3)])])
    h.shard.commit(req, 7, 0, box.append)
    h.flush()
    assert box[0].topics[0].partitions[0].error_code == E.NONE
    req.generation_id_or_member_epoch = 99
    h.shard.commit(req, 7, 0, box.append)
    assert box[-1].topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION


def test_the_last_consumer_member_leaving_downgrades_the_group_to_classic():
    h = Shard()
    a, b = classic_group_of_two(h)
    c = Client(h, "c")
    c.heartbeat()
    for _ in range(3):
        for x in (a, b):
            if x.heartbeat() != E.NONE:
                x.rebalance()
        c.heartbeat()
    c.leave()
    assert "g" not in h.shard.consumer_groups
    classic = h.shard.groups["g"]
    assert classic.state == "PreparingRebalance" and set(classic.members) == {a.member_id, b.member_id}
    assert "g" in h.replayed().groups and "g" not in h.replayed().consumer_groups
    # The classic members rebalance as in any classic group.
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    assert a.join() is None
    assert b.join().error_code == 0 and a.answered().error_code == 0


def test_no_upgrade_when_the_policy_says_no_or_the_group_is_not_a_consumer_group():
    h = Shard(consumer_migration_policy="downgrade")
    classic_group_of_two(h)
    assert Client(h, "c").heartbeat().error_code == E.GROUP_ID_NOT_FOUND
    assert "g" in h.shard.groups


def test_a_classic_member_leaving_a_consumer_group_hands_its_partitions_over():
    h = Shard()
    a, b = classic_group_of_two(h)
    c = Client(h, "c")
    c.heartbeat()
    resp = h.shard.leave(LeaveGroupRequest(group_id="g", members=[LeaveGroupRequest.Member(member_id=a.member_id)]),
                         3, 0)
    h.flush()
    assert resp.members[0].error_code == 0 and a.member_id not in h.group().members
    assert h.shard.heartbeat(HeartbeatRequest(group_id="g", generation_id=1, member_id="nobody"), 0).error_code == \
        E.UNKNOWN_MEMBER_ID
