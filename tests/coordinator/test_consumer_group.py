"""KIP-848 consumer groups in one ``__consumer_offsets`` shard (Kafka's GroupMetadataManager and
CurrentAssignmentBuilder rules), driven heartbeat by heartbeat with a virtual clock: the first
assignment in the first heartbeat, revocation before assignment, epochs that fence stale and
unknown members, leave and static leave, session and rebalance timeouts, the records a shard
writes replayed by a new coordinator, offsets checks, describe/list, regex subscriptions, and
the empty-group conversions between the classic and the consumer protocol (live groups:
test_mixed_groups)."""

from __future__ import annotations

from consumer_harness import REBALANCE, SESSION, Client, Shard, names, snapshot, topic_id

from kraft.coordinator.assignors import range_assignor, uniform
from kraft.coordinator.consumer_group import ASSIGNING, EMPTY, RECONCILING, STABLE_STATE
from kraft.coordinator.consumer_records import STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS
from kraft.coordinator.group_shard import GroupConfig
from kraft.errors import ErrorCode as E
from kraft.protocol import JoinGroupRequest, OffsetCommitRequest

T = topic_id("t")


def test_a_member_joining_alone_gets_every_partition_in_its_first_heartbeat():
    """KIP-848: no join/sync round trips; the answer to epoch 0 carries epoch 1 and the assignment."""
    h = Shard()
    resp = h.heartbeat("a", 0)
    assert (resp.error_code, resp.member_id, resp.member_epoch, resp.heartbeat_interval_ms) == (0, "a", 1, 5000)
    assert names(resp) == {T: [0, 1, 2, 3, 4, 5]}
    g = h.group()
    assert (g.state, g.group_epoch, g.assignment_epoch) == (STABLE_STATE, 1, 1)


def test_partitions_are_revoked_before_they_are_assigned_to_another_member():
    """CurrentAssignmentBuilder: the new member waits (UNRELEASED_PARTITIONS) until the old owner
    acknowledges the revocation; the old owner keeps its epoch until it has revoked."""
    h = Shard()
    h.heartbeat("a", 0)
    b = h.heartbeat("b", 0)
    assert (b.member_epoch, names(b)) == (2, {})  # its target is taken: nothing yet
    assert h.group().members["b"].state == UNRELEASED_PARTITIONS
    assert h.group().state == RECONCILING
    a = h.heartbeat("a", 1, owned={"t": range(6)})
    assert (a.member_epoch, names(a)) == (1, {T: [0, 1, 2]})  # revoke 3-5 first
    assert h.group().members["a"].state == UNREVOKED_PARTITIONS
    assert names(h.heartbeat("b", 2, owned={})) is None  # still owned by a
    a = h.heartbeat("a", 1, owned={"t": [0, 1, 2]})  # the revocation is acknowledged
    assert (a.member_epoch, names(a)) == (2, None)  # the same partitions: no assignment sent
    b = h.heartbeat("b", 2, owned={})
    assert names(b) == {T: [3, 4, 5]}
    assert h.group().state == STABLE_STATE


def test_a_member_that_does_not_say_what_it_owns_is_assumed_to_own_its_partitions():
    h = Shard()
    h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    h.heartbeat("a", 1)  # the revocation request
    assert h.heartbeat("a", 1).member_epoch == 1  # no owned partitions sent: not revoked yet
    assert h.group().members["a"].state == UNREVOKED_PARTITIONS


def test_stale_future_and_unknown_epochs_are_fenced():
    h = Shard()
    h.heartbeat("a", 0)
    assert h.heartbeat("a", 2, owned={"t": range(6)}).error_code == E.FENCED_MEMBER_EPOCH  # ahead
    assert h.heartbeat("nobody", 1, owned={}).error_code == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("a", 1, owned={"t": range(6)}, group="other").error_code == E.UNKNOWN_MEMBER_ID
    h.heartbeat("b", 0)
    h.heartbeat("a", 1, owned={"t": range(6)})
    h.heartbeat("a", 1, owned={"t": [0, 1, 2]})  # now epoch 2
    assert h.group().members["a"].member_epoch == 2
    # The previous epoch is accepted if what it owns is a subset of its assignment (its answer
    # with the new epoch was lost) ...
    assert h.heartbeat("a", 1, owned={"t": [0, 1]}).error_code == E.NONE
    # ... but not while it claims partitions that are not its own any more.
    assert h.heartbeat("a", 1, owned={"t": [0, 1, 2, 3]}).error_code == E.FENCED_MEMBER_EPOCH
    assert h.heartbeat("a", 0, owned=None).error_code == E.NONE  # a fenced member rejoins with epoch 0


def test_a_fenced_member_that_rejoins_releases_what_it_owned():
    h = Shard()
    h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    assert h.heartbeat("a", 0).member_epoch == 2  # rejoined: starts over at the current epoch
    assert not any(len(v) > 1 for v in h.owners().values())
    b = h.heartbeat("b", 2, owned={})
    assert len(names(b)[T]) == 3


def test_a_member_leaving_gives_its_partitions_to_the_others():
    h = Shard()
    a, b = Client(h, "a"), Client(h, "b")
    for _ in range(4):
        a.heartbeat()
        b.heartbeat()
    assert (len(a.owned[T]), len(b.owned[T])) == (3, 3)
    epoch = h.group().group_epoch
    assert b.leave().member_epoch == -1
    assert h.group().group_epoch == epoch + 1 and "b" not in h.group().members
    a.heartbeat()
    assert a.owned == {T: set(range(6))}


def test_a_static_member_leaving_for_a_while_keeps_its_partitions_and_comes_back_without_a_rebalance():
    h = Shard()
    a, b = Client(h, "a", instance="i-a"), Client(h, "b", instance="i-b")
    for _ in range(4):
        a.heartbeat()
        b.heartbeat()
    mine, epoch = set(b.owned[T]), h.group().group_epoch
    assert h.heartbeat("b", b.epoch, instance="i-b").error_code == 0  # still in
    resp = h.heartbeat("b", -2, instance="i-b")
    assert resp.member_epoch == -2 and h.group().members["b"].assigned == {T: mine}
    a.heartbeat()
    assert len(a.owned[T]) == 3  # nobody takes its partitions meanwhile
    # The same instance with a new member id (a restarted process) while b is away: it takes b's place.
    again = Client(h, "b2", instance="i-b")
    resp = again.heartbeat()
    assert (resp.error_code, again.owned) == (0, {T: mine})
    assert h.group().group_epoch == epoch and "b" not in h.group().members
    # A second process with an instance id in use is refused.
    assert h.heartbeat("b3", 0, instance="i-b").error_code == E.UNRELEASED_INSTANCE_ID


def test_session_expiry_and_rebalance_timeout_fence_the_member():
    h = Shard()
    h.heartbeat("a", 0, now=0)
    h.heartbeat("b", 0, now=1000)
    h.shard.tick(SESSION - 1)
    assert set(h.group().members) == {"a", "b"}
    h.heartbeat("b", 2, owned={}, now=SESSION - 1)
    h.shard.tick(SESSION)  # a missed its session
    h.flush()
    assert set(h.group().members) == {"b"}
    # b must revoke for c; it never does: its rebalance timeout fences it.
    b = h.heartbeat("b", h.group().members["b"].member_epoch, owned=None, now=SESSION)
    b = h.heartbeat("b", b.member_epoch, owned={"t": range(6)}, now=SESSION)
    h.heartbeat("c", 0, now=SESSION + 1)
    h.heartbeat("b", b.member_epoch, owned={"t": range(6)}, now=SESSION + 2)
    assert h.group().members["b"].state == UNREVOKED_PARTITIONS
    h.heartbeat("b", b.member_epoch, owned=None, now=SESSION + 10)  # heartbeats, but does not revoke
    h.shard.tick(SESSION + 2 + REBALANCE)
    h.flush()
    assert set(h.group().members) == {"c"}


def test_a_new_coordinator_replaying_the_records_has_the_same_group():
    """Coordinator failover: the records are the whole state; a member goes on with its epoch."""
    h = Shard()
    a, b, c = Client(h, "a"), Client(h, "b"), Client(h, "c", instance="i-c")
    for _ in range(3):
        for x in (a, b, c):
            x.heartbeat()
    h.heartbeat("b", b.epoch, owned=None)  # mid-reconciliation states are replayed too
    other = h.replayed()
    assert snapshot(other) == snapshot(h.shard)
    assert other.consumer_groups["g"].partition_epochs == h.group().partition_epochs
    assert other.consumer_groups["g"].static_members == {"i-c": "c"}
    h.shard = other
    before = dict(a.owned)
    assert a.heartbeat().error_code == 0 and a.owned == before


def test_a_failed_write_is_written_again_whole_with_the_next_one():
    h = Shard()
    a = Client(h, "a")
    a.heartbeat()
    resp = h.heartbeat("b", 0, flush=False)
    h.fail()
    assert resp is None  # answered when the write fails: the error comes through the callback
    h.heartbeat("b", 0)
    assert snapshot(h.replayed()) == snapshot(h.shard)


def test_offset_commits_and_fetches_of_a_consumer_group_check_the_member_epoch():
    h = Shard()
    h.heartbeat("a", 0)
    C = OffsetCommitRequest

    def commit(member, epoch, version=9):
        box = []
        h.shard.commit(C(group_id="g", generation_id_or_member_epoch=epoch, member_id=member, topics=[C.Topic(
            name="t", partitions=[C.Topic.Partition(partition_index=0, committed_offset=5)])]), version, 0, box.append)
        h.flush()
        return box[0].topics[0].partitions[0].error_code
    assert commit("a", 1) == E.NONE
    assert commit("a", 0) == E.STALE_MEMBER_EPOCH
    assert commit("x", 1) == E.UNKNOWN_MEMBER_ID
    assert commit("a", 1, version=8) == E.UNSUPPORTED_VERSION
    assert commit("", -1) == E.UNKNOWN_MEMBER_ID  # an admin commit while members are there
    assert h.shard.fetch_offsets("g", [("t", [0])], "a", 1)[1] == [("t", [(0, h.shard.offsets["g"][("t", 0)])])]
    assert h.shard.fetch_offsets("g", [("t", [0])], "a", 7)[0] == E.STALE_MEMBER_EPOCH
    assert h.shard.fetch_offsets("g", [("t", [0])], None, -1)[0] == E.NONE
    h.heartbeat("a", -1)
    assert commit("", -1) == E.NONE  # empty: an admin may commit


def test_describe_and_list_consumer_groups():
    h = Shard()
    h.heartbeat("a", 0, instance="i-a")
    d = h.shard.consumer_describe("g")
    assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == \
        (0, "Stable", 1, 1, "uniform")
    [m] = d.members
    assert (m.member_id, m.instance_id, m.member_epoch, m.subscribed_topic_names) == ("a", "i-a", 1, ["t"])
    assert [(t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [("t", [0, 1, 2, 3, 4, 5])]
    assert h.shard.consumer_describe("nope").error_code == E.GROUP_ID_NOT_FOUND
    assert [(g.group_id, g.group_type, g.group_state) for g in h.shard.list_groups([], ["Consumer"])] == \
        [("g", "consumer", "Stable")]
    assert h.shard.list_groups([], ["classic"]) == []
    assert h.shard.list_groups(["empty"], []) == []
    assert h.shard.describe("g").group_state == "Dead"  # Kafka's DescribeGroups v0-5: classic groups only


def test_group_states_follow_the_epochs():
    h = Shard()
    h.heartbeat("a", 0)
    h.heartbeat("b", 0)
    assert h.group().state == RECONCILING
    h.heartbeat("b", -1)
    assert h.group().state == ASSIGNING  # the epoch moved; no heartbeat has computed the target yet
    h.heartbeat("a", -1)
    assert h.group().state == EMPTY


def test_regex_subscriptions_follow_new_topics_and_bad_regexes_are_refused():
    h = Shard({"orders-1": 2, "payments": 1})
    resp = h.heartbeat("a", 0, topics=[], regex="orders-.*")
    assert names(resp) == {topic_id("orders-1"): [0, 1]}
    h.add_topic("orders-2", 1)
    resp = h.heartbeat("a", 1, owned={"orders-1": [0, 1]})  # a topic the regex matches appears
    assert resp.member_epoch == 2 and names(resp) == {topic_id("orders-1"): [0, 1], topic_id("orders-2"): [0]}
    for bad in ("(", "a(?=b)", r"(a)\1", "a++"):
        assert h.heartbeat("b", 0, topics=[], regex=bad).error_code == E.INVALID_REGULAR_EXPRESSION, bad


def test_a_regex_subscription_gets_only_the_topics_its_principal_may_describe():
    """Kafka 4's filterTopicDescribeAuthorizedTopics: ``orders-us`` matches but is not
    DESCRIBE-able by the member's principal, so it is never assigned; rights granted later
    apply at the next heartbeat. A new coordinator does not know a member's rights until it
    heartbeats: with an authorizer on, its regex matches nothing meanwhile (no leak)."""
    h = Shard({"orders-eu": 2, "orders-us": 1, "payments": 1}, regex_needs_describe=True)
    rights = {"orders-eu"}
    resp = h.heartbeat("a", 0, topics=[], regex="orders-.*", may_describe=lambda t: t in rights)
    assert names(resp) == {topic_id("orders-eu"): [0, 1]}
    rights.add("orders-us")  # an ACL added: the next heartbeat sees it
    resp = h.heartbeat("a", 1, owned={"orders-eu": [0, 1]}, may_describe=lambda t: t in rights)
    assert resp.member_epoch == 2 and names(resp) == {topic_id("orders-eu"): [0, 1], topic_id("orders-us"): [0]}
    h.failover()
    member = h.group().members["a"]
    assert member.may_describe is None and h.shard._member_topics(member) == set()
    resp = h.heartbeat("a", 2, owned={"orders-eu": [0, 1], "orders-us": [0]}, may_describe=lambda t: t in rights)
    assert resp.error_code == 0 and h.shard._member_topics(h.group().members["a"]) == {"orders-eu", "orders-us"}
    # Without an authorizer, no filter: a member's regex matches every topic, also after a move.
    h2 = Shard({"orders-eu": 1, "orders-us": 1})
    h2.heartbeat("a", 0, topics=[], regex="orders-.*")
    h2.failover()
    assert h2.shard._member_topics(h2.group().members["a"]) == {"orders-eu", "orders-us"}


def test_invalid_heartbeats_get_invalid_request():
    h = Shard()
    assert h.heartbeat("", 0).error_code == E.INVALID_REQUEST
    assert h.heartbeat("a", 0, topics=[]).error_code == E.INVALID_REQUEST
    assert h.heartbeat("a", 0, rebalance_timeout=-1).error_code == E.INVALID_REQUEST
    assert h.heartbeat("a", -3).error_code == E.INVALID_REQUEST
    assert h.heartbeat("a", -2).error_code == E.INVALID_REQUEST  # a static leave needs the instance id
    assert h.heartbeat("a", 0, assignor="sticky").error_code == E.UNSUPPORTED_ASSIGNOR
    assert h.heartbeat("a", 0, group="").error_code == E.INVALID_GROUP_ID
    assert "g" not in h.shard.consumer_groups


def test_empty_groups_change_protocol():
    h = Shard()
    C = OffsetCommitRequest
    h.shard.commit(C(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[C.Topic(
        name="t", partitions=[C.Topic.Partition(partition_index=0, committed_offset=5)])]), 9, 0, lambda r: None)
    h.flush()
    assert "g" in h.shard.groups  # an admin's commit made a (simple) classic group
    assert h.heartbeat("a", 0).error_code == 0  # which becomes a consumer group, offsets kept
    assert "g" not in h.shard.groups and h.shard.offsets["g"][("t", 0)].offset == 5
    J = JoinGroupRequest
    box = []
    join = J(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="", protocol_type="consumer",
             protocols=[J.Protocol(name="range", metadata=b"")])
    h.shard.join(join, 5, 0, "c", "/h", box.append)
    assert box[0].error_code == E.INCONSISTENT_GROUP_PROTOCOL  # no consumer subscription in it (test_mixed_groups)
    h.heartbeat("a", -1)
    box.clear()
    h.shard.join(join, 5, 0, "c", "/h", box.append)
    h.flush()
    assert box[0].error_code == E.MEMBER_ID_REQUIRED and "g" not in h.shard.consumer_groups
    assert h.shard.groups["g"] is not None
    assert "g" not in h.replayed().consumer_groups


def test_deleting_a_consumer_group():
    h = Shard()
    h.heartbeat("a", 0)
    got = []
    h.shard.delete_groups(["g"], got.append)
    assert got == [{"g": E.NON_EMPTY_GROUP}]
    h.heartbeat("a", -1)
    h.shard.delete_groups(["g"], got.append)
    h.flush()
    assert got[-1] == {"g": E.NONE} and "g" not in h.shard.consumer_groups
    assert h.replayed().consumer_groups == {}


def test_the_uniform_assignor_balances_and_keeps_partitions_where_they_were():
    a, b = topic_id("a"), topic_id("b")
    topics = {"a": (a, 4), "b": (b, 3)}
    first = uniform({"m1": {"a", "b"}, "m2": {"a", "b"}}, topics, {})
    assert sorted(sum(len(ps) for ps in x.values()) for x in first.values()) == [3, 4]
    third = uniform({"m1": {"a", "b"}, "m2": {"a", "b"}, "m3": {"a", "b"}}, topics, first)
    for m in ("m1", "m2"):  # m3's partitions all come from the others; nothing else moves
        for tid, ps in third[m].items():
            assert ps <= first[m].get(tid, set())
    assert sorted(sum(len(ps) for ps in x.values()) for x in third.values()) == [2, 2, 3]
    # Heterogeneous: only m2 may take b; m1 gets all of a.
    mixed = uniform({"m1": {"a"}, "m2": {"b"}}, topics, {})
    assert mixed == {"m1": {a: {0, 1, 2, 3}}, "m2": {b: {0, 1, 2}}}


def test_the_range_assignor_gives_contiguous_ranges_per_topic():
    a = topic_id("a")
    got = range_assignor({"m2": {"a"}, "m1": {"a"}, "m3": {"a"}}, {"a": (a, 7)}, {})
    assert got == {"m1": {a: {0, 1, 2}}, "m2": {a: {3, 4}}, "m3": {a: {5, 6}}}
    h = Shard()
    assert names(h.heartbeat("a", 0, assignor="range")) == {T: [0, 1, 2, 3, 4, 5]}
    assert h.shard.consumer_describe("g").assignor_name == "range"


def test_member_state_values_are_kafkas():
    assert (STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS) == (0, 1, 2)


def test_members_heartbeat_faster_while_their_group_rebalances():
    """kraft's rebalance heartbeat interval: owners hear of revocations and waiting members come
    back for released partitions sooner; a static member away does not keep the group fast."""
    h = Shard()
    assert h.heartbeat("a", 0, instance="i-a").heartbeat_interval_ms == 5000  # alone: Stable at once
    assert h.heartbeat("b", 0).heartbeat_interval_ms == 100  # a must revoke, b waits
    a = h.heartbeat("a", 1, instance="i-a", owned={"t": range(6)})
    a = h.heartbeat("a", 1, instance="i-a", owned={"t": names(a)[T]})
    assert h.heartbeat("b", 2, owned={}).heartbeat_interval_ms == 5000  # Stable again
    h.heartbeat("a", -2, instance="i-a")
    assert h.heartbeat("b", 2, owned={"t": [3, 4, 5]}).heartbeat_interval_ms == 5000


def test_the_rebalance_heartbeat_interval_grows_with_the_group():
    """10 ms per member above the 100 ms floor (a big group rebalancing must not flood its
    coordinator), never above the configured interval."""
    h = Shard()
    for i in range(30):
        got = h.heartbeat(f"m{i}", 0).heartbeat_interval_ms
    assert got == 300  # 30 members rebalancing
    for i in range(30, 600):
        got = h.heartbeat(f"m{i}", 0).heartbeat_interval_ms
    assert got == 5000


def test_a_groups_own_configs_set_its_members_session_and_heartbeat_interval():
    """GROUP config resources (Kafka 4): consumer.session.timeout.ms / consumer.heartbeat.interval.ms
    of one group apply to its members at their next heartbeat; other groups keep the broker's."""
    overrides = {}
    h = Shard(group_overrides=lambda group_id: overrides.get(group_id, {}))
    assert h.heartbeat("a", 0, now=0).heartbeat_interval_ms == 5000
    overrides["g"] = {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "7000"}
    assert h.heartbeat("a", 1, now=1000).heartbeat_interval_ms == 7000
    h.shard.tick(1000 + SESSION)  # past the broker's 45 s, within the group's 50 s
    h.flush()
    assert set(h.group().members) == {"a"}
    h.shard.tick(1000 + 50_000)
    h.flush()
    assert set(h.group().members) == set()
    assert GroupConfig().consumer_timeouts("g") == (45_000, 5000)
