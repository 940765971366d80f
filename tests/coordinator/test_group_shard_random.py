"""Seeded random schedules of classic-group clients against one GroupShard on a virtual clock
(joins, syncs, heartbeats, leaves, crashes, slow and failed appends), checking after every step
what must always hold, and at the end that the group settles: every answer is given exactly
once, generations never go back, a Stable group's members hold the assignment its leader gave
for the current generation and together own every partition once, and when every client is
gone the group ends Empty. A failing seed replays exactly (``SEED=n``)."""

from __future__ import annotations

import os
import random

import pytest

from kraft.coordinator.classic_group import EMPTY, STABLE
from kraft.coordinator.group_shard import GroupConfig, GroupShard
from kraft.errors import ErrorCode as E
from kraft.protocol import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest

SESSION, PARTITIONS = 3000, 6
SEEDS = [int(os.environ["SEED"])] if "SEED" in os.environ else range(200)


class Client:
    def __init__(self, name, instance=None):
        self.name, self.member_id, self.generation = name, "", -1
        self.instance = instance  # group.instance.id of a static member (KIP-345)
        self.waiting = False  # a JoinGroup or SyncGroup of ours is unanswered
        self.stable = False
        self.alive = True
        self.assignment = None


def run(seed: int) -> None:
    rng = random.Random(seed)
    shard = GroupShard(0, GroupConfig(initial_rebalance_delay_ms=rng.choice([0, 200]), min_session_timeout_ms=0))
    pending, answered, now = [], set(), 0
    clients = [Client(f"c{i}", f"i{i}" if rng.random() < 0.4 else None) for i in range(rng.randint(1, 4))]
    last_generation = 0
    given = {}  # generation -> {member: assignment} from its leader

    def once(tag, fn):
        def respond(resp):
            assert tag not in answered, f"answered twice: {tag}"
            answered.add(tag)
            fn(resp)
        return respond

    def on_join(c, resp):
        c.waiting = False
        if resp.error_code == E.MEMBER_ID_REQUIRED:
            c.member_id = resp.member_id
            return
        if resp.error_code == E.FENCED_INSTANCE_ID:
            c.alive = False  # replaced by a newer incarnation of the same instance
            return
        if resp.error_code != E.NONE:
            c.member_id = "" if resp.error_code == E.UNKNOWN_MEMBER_ID else c.member_id
            return
        c.member_id, c.generation, c.stable = resp.member_id, resp.generation_id, False
        assignments = []
        if resp.members:  # the leader assigns round-robin
            ids = sorted(m.member_id for m in resp.members)
            plan = {m: bytes(p for p in range(PARTITIONS) if p % len(ids) == i) for i, m in enumerate(ids)}
            # a static member's assignment follows its instance id across restarts (KIP-345)
            key = {m.member_id: m.group_instance_id or m.member_id for m in resp.members}
            given[resp.generation_id] = {key[m]: a for m, a in plan.items()}
            assignments = [SyncGroupRequest.Assignment(member_id=m, assignment=a) for m, a in plan.items()]
        c.waiting = True
        req = SyncGroupRequest(group_id="g", generation_id=c.generation, member_id=c.member_id,
                               group_instance_id=c.instance, assignments=assignments)
        shard.sync(req, 3, now, once(("sync", c.name, now, rng.random()), lambda r: on_sync(c, r)))

    def on_sync(c, resp):
        c.waiting = False
        if resp.error_code == E.NONE:
            c.stable, c.assignment = True, bytes(resp.assignment)
        elif resp.error_code == E.UNKNOWN_MEMBER_ID:
            c.member_id = ""
        elif resp.error_code == E.FENCED_INSTANCE_ID:
            c.alive = False

    def join(c):
        c.waiting, c.stable = True, False
        J = JoinGroupRequest
        req = J(group_id="g", session_timeout_ms=SESSION, rebalance_timeout_ms=SESSION, member_id=c.member_id,
                group_instance_id=c.instance, protocol_type="consumer",
                protocols=[J.Protocol(name="range", metadata=b"")])
        shard.join(req, 5, now, c.name, "/h", once(("join", c.name, now, rng.random()), lambda r: on_join(c, r)))

    def check():
        nonlocal last_generation
        g = shard.groups.get("g")
        if g is None:
            return
        assert g.generation >= last_generation
        last_generation = g.generation
        assert g.leader is None or g.leader in g.members
        if g.state == STABLE:
            plan = given[g.generation]
            keys = {m: mm.instance_id or m for m, mm in g.members.items()}
            assert {m: mm.assignment for m, mm in g.members.items()} == \
                {m: plan.get(keys[m], b"") for m in g.members}

    for _ in range(rng.randint(50, 300)):
        pending.extend(shard.take_appends())
        r = rng.random()
        live = [c for c in clients if c.alive]
        if r < 0.3 and pending:  # appends become durable, in order (or the first one fails)
            a = pending.pop(0)
            if rng.random() < 0.05 and a.on_failed:
                a.on_failed(E.NOT_ENOUGH_REPLICAS)
            elif a.on_durable:
                a.on_durable()
        elif r < 0.5:
            now += rng.randint(1, 800)
            shard.tick(now)
        elif r < 0.8 and live:
            c = rng.choice(live)
            if c.waiting:
                continue
            if not c.member_id or not c.stable:
                join(c)
            else:
                code = shard.heartbeat(HeartbeatRequest(group_id="g", generation_id=c.generation,
                                                        member_id=c.member_id, group_instance_id=c.instance),
                                       now).error_code
                if code == E.FENCED_INSTANCE_ID:
                    c.alive = False
                elif code == E.UNKNOWN_MEMBER_ID:
                    c.member_id, c.stable = "", False
                elif code != E.NONE:
                    c.stable = False
        elif r < 0.85 and live:
            c = rng.choice(live)
            c.alive = False
            if rng.random() < 0.5 and c.member_id:
                shard.leave(LeaveGroupRequest(group_id="g", members=[LeaveGroupRequest.Member(
                    member_id=c.member_id)]), 3, now)
        elif r < 0.9 and len(clients) < 6:
            clients.append(Client(f"c{len(clients)}"))
        elif r < 0.95 and [c for c in live if c.instance]:
            # A static member restarts: the old incarnation stops, a new one joins with no member id.
            old = rng.choice([c for c in live if c.instance])
            old.alive = False
            clients.append(Client(f"c{len(clients)}", old.instance))
        check()
    # Quiet period: no faults, every live client keeps going; the group settles.
    for _ in range(400):
        pending.extend(shard.take_appends())
        while pending:
            a = pending.pop(0)
            if a.on_durable:
                a.on_durable()
            pending.extend(shard.take_appends())
        for c in clients:
            if c.alive and not c.waiting:
                if not c.member_id or not c.stable:
                    join(c)
                else:
                    code = shard.heartbeat(HeartbeatRequest(group_id="g", generation_id=c.generation,
                                                            member_id=c.member_id, group_instance_id=c.instance),
                                           now).error_code
                    if code == E.FENCED_INSTANCE_ID:
                        c.alive = False
                    elif code != E.NONE:
                        c.stable = False
                        if code == E.UNKNOWN_MEMBER_ID:
                            c.member_id = ""
        now += 100
        shard.tick(now)
        check()
    live = [c for c in clients if c.alive]
    g = shard.groups.get("g")
    if live:
        assert g is not None and g.state == STABLE, (seed, g and g.state)
        assert {c.member_id for c in live} == set(g.members)
        owned = sorted(p for c in live for p in c.assignment)
        assert owned == list(range(PARTITIONS)), (seed, owned)
    # Everyone goes; after the sessions the group is Empty and nothing is left unanswered.
    for c in clients:
        c.alive = False
    now += 10 * SESSION
    shard.tick(now)
    pending.extend(shard.take_appends())
    for a in pending:
        if a.on_durable:
            a.on_durable()
    g = shard.groups.get("g")
    assert g is None or (g.state == EMPTY and not g.members)
    assert not any(c.waiting for c in clients), seed


@pytest.mark.parametrize("seed", SEEDS)
def test_random_schedules_settle_and_keep_the_invariants(seed):
    run(seed)
