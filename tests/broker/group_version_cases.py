"""The group APIs' cases of ``test_broker_every_advertised_version``: every advertised version of
FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
ListGroups, DescribeGroups, DeleteGroups and OffsetDelete gets a decodable answer, on the
success path and an error path, from a broker that leads a one-partition ``__consumer_offsets``."""

from __future__ import annotations

from kraft.errors import ErrorCode as E
from kraft.protocol import (DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, HeartbeatRequest,
                            ProduceRequest,
                            JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest,
                            OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest)

OFFSETS = "__consumer_offsets"
SESSION_MS = 10_000


async def join(conn, group: str, version: int, member_id: str = "", instance=None):
    J = JoinGroupRequest
    req = J(group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS, member_id=member_id,
            group_instance_id=instance, protocol_type="consumer",
            protocols=[J.Protocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x01\x00\x01t")])
    resp = await conn.ask(req, version)
    if resp.error_code == E.MEMBER_ID_REQUIRED:
        assert version >= 4 and resp.member_id
        req.member_id = resp.member_id
        resp = await conn.ask(req, version)
    return resp


async def check_group_versions(conn, port: int, topic: str, checked: set) -> None:
    for v in range(0, 7):
        if v >= 4:
            resp = await conn.ask(FindCoordinatorRequest(key_type=0, coordinator_keys=["g", ""]), v)
            [ok, bad] = resp.coordinators
            assert (ok.key, ok.error_code, ok.node_id, ok.port) == ("g", 0, 1, port), v
            assert bad.error_code == E.INVALID_REQUEST, v
        else:
            resp = await conn.ask(FindCoordinatorRequest(key="g"), v)
            assert (resp.error_code, resp.node_id, resp.port) == (0, 1, port), v
        if v >= 1:
            keys = dict(key="tx", coordinator_keys=["tx"], key_type=1)
            if v < 4:
                keys.pop("coordinator_keys")
            else:
                keys.pop("key")
            resp = await conn.ask(FindCoordinatorRequest(**keys), v)
            c = resp.coordinators[0] if v >= 4 else resp
            assert (c.error_code, c.node_id, c.port) == (0, 1, port), v  # the __transaction_state leader
        checked.add((10, v))

    members = {}
    for v in range(0, 10):
        resp = await join(conn, f"j{v}", v)
        assert (resp.error_code, resp.generation_id, resp.leader) == (0, 1, resp.member_id), v
        assert [m.member_id for m in resp.members] == [resp.member_id], v
        members[v] = resp.member_id
        bad = await join(conn, f"j{v}", v, member_id="nope")
        assert bad.error_code == E.UNKNOWN_MEMBER_ID, v
        checked.add((11, v))

    S = SyncGroupRequest
    for v in range(0, 6):
        group, mid = f"j{v}", members[v]
        resp = await conn.ask(S(group_id=group, generation_id=1, member_id=mid,
                                assignments=[S.Assignment(member_id=mid, assignment=b"a%d" % v)]), v)
        assert (resp.error_code, bytes(resp.assignment)) == (0, b"a%d" % v), v
        resp = await conn.ask(S(group_id=group, generation_id=7, member_id=mid, assignments=[]), v)
        assert resp.error_code == E.ILLEGAL_GENERATION, v
        checked.add((14, v))

    for v in range(0, 5):
        resp = await conn.ask(HeartbeatRequest(group_id="j0", generation_id=1, member_id=members[0]), v)
        assert resp.error_code == 0, v
        resp = await conn.ask(HeartbeatRequest(group_id="j0", generation_id=1, member_id="nope"), v)
        assert resp.error_code == E.UNKNOWN_MEMBER_ID, v
        checked.add((12, v))

    for v in range(0, 6):
        want = {"Stable"} if v >= 4 else set()
        resp = await conn.ask(ListGroupsRequest(states_filter=sorted(want), types_filter=["classic"] if v >= 5
                                                else []), v)
        listed = {g.group_id for g in resp.groups}
        assert resp.error_code == 0 and {"j0", "j1"} <= listed, v
        checked.add((16, v))

    for v in range(0, 6):
        resp = await conn.ask(DescribeGroupsRequest(groups=["j0", ""]), v)
        [g, bad] = resp.groups
        assert (g.error_code, g.group_state, g.protocol_data, [m.member_id for m in g.members]) == \
            (0, "Stable", "range", [members[0]]), v
        assert bad.error_code == E.INVALID_GROUP_ID, v
        checked.add((15, v))

    C = OffsetCommitRequest
    for v in range(0, 10):
        req = C(group_id=f"c{v}", generation_id_or_member_epoch=-1, member_id="", topics=[C.Topic(
            name=topic, partitions=[C.Topic.Partition(partition_index=0, committed_offset=10 * v,
                                                      committed_metadata="m")])])
        resp = await conn.ask(req, v)
        assert resp.topics[0].partitions[0].error_code == 0, v
        req.topics.append(C.Topic(name="no-such-topic", partitions=[C.Topic.Partition(partition_index=0,
                                                                                     committed_offset=1)]))
        resp = await conn.ask(req, v)
        assert [(t.name, t.partitions[0].error_code) for t in resp.topics] == \
            [(topic, 0), ("no-such-topic", E.UNKNOWN_TOPIC_OR_PARTITION)], v
        req.topics.pop()
        if v >= 1:  # a member of a stable group with a stale generation
            req = C(group_id="j0", generation_id_or_member_epoch=5, member_id=members[0], topics=req.topics)
            resp = await conn.ask(req, v)
            assert resp.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION, v
        checked.add((8, v))

    F = OffsetFetchRequest
    for v in range(0, 10):
        if v >= 8:
            resp = await conn.ask(F(groups=[F.Group(group_id="c5", topics=[F.Group.Topic(
                name=topic, partition_indexes=[0, 1])]), F.Group(group_id="c6", topics=None)]), v)
            [a, b] = resp.groups
            assert [(p.partition_index, p.committed_offset, p.metadata) for p in a.topics[0].partitions] == \
                [(0, 50, "m"), (1, -1, "")], v
            assert [(t.name, t.partitions[0].committed_offset) for t in b.topics] == [(topic, 60)], v
        else:
            resp = await conn.ask(F(group_id="c5", topics=[F.Topic(name=topic, partition_indexes=[0])]), v)
            p = resp.topics[0].partitions[0]
            assert (p.error_code, p.committed_offset, p.metadata) == (0, 50, "m"), v
            resp = await conn.ask(F(group_id="", topics=[F.Topic(name=topic, partition_indexes=[0])]), v)
            code = resp.error_code if v >= 2 else resp.topics[0].partitions[0].error_code
            assert code == E.INVALID_GROUP_ID, v
        checked.add((9, v))

    L = LeaveGroupRequest
    for v in range(0, 6):
        if v >= 3:
            resp = await conn.ask(L(group_id=f"j{v}", members=[L.Member(member_id=members[v]),
                                                              L.Member(member_id="nope")]), v)
            assert [m.error_code for m in resp.members] == [0, E.UNKNOWN_MEMBER_ID], v
        else:
            resp = await conn.ask(L(group_id=f"j{v}", member_id=members[v]), v)
            assert resp.error_code == 0, v
            resp = await conn.ask(L(group_id=f"j{v}", member_id="nope"), v)
            assert resp.error_code == E.UNKNOWN_MEMBER_ID, v
        checked.add((13, v))

    O = OffsetDeleteRequest
    resp = await conn.ask(O(group_id="c0", topics=[O.Topic(name=topic, partitions=[O.Topic.Partition(
        partition_index=0)])]), 0)
    assert (resp.error_code, resp.topics[0].partitions[0].error_code) == (0, 0)
    resp = await conn.ask(O(group_id="nope", topics=[]), 0)
    assert resp.error_code == E.GROUP_ID_NOT_FOUND
    checked.add((47, 0))

    for v in range(0, 3):
        resp = await conn.ask(DeleteGroupsRequest(groups_names=[f"c{v + 1}", "nope", "j9"]), v)
        assert [(r.group_id, r.error_code) for r in resp.results] == \
            [(f"c{v + 1}", 0), ("nope", E.GROUP_ID_NOT_FOUND), ("j9", E.NON_EMPTY_GROUP)], v
        checked.add((42, v))

    # Clients may not write the offsets topic (only the coordinator's own appends may).
    from kraft.records import build_batch
    P = ProduceRequest
    resp = await conn.ask(P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[P.Topic(
        name=OFFSETS, partition_data=[P.Topic.Partition(index=0, records=build_batch([b"x"], keys=[b"k"]))])]), 9)
    assert resp.responses[0].partition_responses[0].error_code == E.INVALID_TOPIC_EXCEPTION


async def check_consumer_group_versions(conn, topic: str, topic_id, checked: set) -> None:
    """KIP-848: ConsumerGroupHeartbeat v0-1 (join, error) and ConsumerGroupDescribe v0."""
    from kraft.protocol import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
    H = ConsumerGroupHeartbeatRequest
    for v in range(0, 2):
        join = H(group_id=f"kip848-{v}", member_id=f"m{v}", member_epoch=0, rebalance_timeout_ms=30000,
                 subscribed_topic_names=[topic] if v == 0 else [], topic_partitions=[])
        if v >= 1:
            join.subscribed_topic_regex = topic[0] + ".*"
        resp = await conn.ask(join, v)
        assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, f"m{v}", 1), (v, resp)
        assert [(t.topic_id, t.partitions) for t in resp.assignment.topic_partitions] == [(topic_id, [0])], v
        resp = await conn.ask(H(group_id=f"kip848-{v}", member_id="nobody", member_epoch=3), v)
        assert (resp.error_code, resp.assignment) == (E.UNKNOWN_MEMBER_ID, None), v
        checked.add((68, v))
    D = ConsumerGroupDescribeRequest
    resp = await conn.ask(D(group_ids=["kip848-0", "j1", "nope"], include_authorized_operations=False), 0)
    [g, classic, missing] = resp.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == (0, "Stable", 1, "uniform")
    assert [(m.member_id, m.assignment.topic_partitions[0].topic_name) for m in g.members] == [("m0", topic)]
    assert (classic.error_code, missing.error_code) == (E.GROUP_ID_NOT_FOUND, E.GROUP_ID_NOT_FOUND)
    checked.add((69, 0))
