"""Random runs of KIP-848 consumer groups (seeded, so a failure replays): members join, heartbeat
(saying what they own or not), lose answers, leave, crash (their sessions expire), topics grow;
writes become durable late; the coordinator moves (what was not durable is lost, the new one
replays the log). After every step: no partition is owned by two members, neither in
the coordinator's state nor in what the live clients consume (reconciliation revokes before it
assigns). At the end, with no more faults, the group settles: Stable, every partition owned by
exactly one client, balanced, and a coordinator that replays the log has the same group."""

from __future__ import annotations

import random

import pytest
from consumer_harness import SESSION, Client, Shard, snapshot

from kraft.coordinator.consumer_group import STABLE_STATE


def check_nobody_shares(h: Shard, clients) -> None:
    owners = h.owners()
    assert all(len(who) == 1 for who in owners.values()), owners
    seen: dict = {}
    for c in clients:
        for tid, ps in c.owned.items():
            for p in ps:
                assert (tid, p) not in seen, f"{(tid, p)} consumed by {seen.get((tid, p))} and {c.member_id}"
                seen[(tid, p)] = c.member_id


@pytest.mark.parametrize("seed", range(40))
def test_random_membership_never_gives_a_partition_to_two_members(seed):
    rng = random.Random(seed)
    h = Shard({"t": rng.randint(1, 12), "u": rng.randint(1, 5)})
    clients: list = []
    now, made = 0, 0
    for _ in range(250):
        now += rng.randint(1, 400)
        roll = rng.random()
        if roll < 0.12 and len(clients) < 7:
            made += 1
            topics = rng.choice([("t",), ("u",), ("t", "u")])
            instance = f"i{made}" if rng.random() < 0.3 else None
            clients.append(Client(h, f"m{made}", topics=topics, instance=instance))
            clients[-1].heartbeat(now=now)
        elif roll < 0.17 and clients:
            clients.pop(rng.randrange(len(clients))).leave(now=now)
        elif roll < 0.20 and clients:
            clients.pop(rng.randrange(len(clients)))  # crashed: its session will expire
        elif roll < 0.22:
            h.add_topic("t", h.view.by_name["t"][1] + 1)  # partitions added
        elif roll < 0.28:
            h.shard.tick(now)
            h.flush()
        elif roll < 0.30:
            h.failover(now)  # what was not durable is lost
        elif clients:
            c = rng.choice(clients)
            c.heartbeat(now=now, lose_answer=rng.random() < 0.1, flush=rng.random() < 0.8)
        if rng.random() < 0.5:
            h.flush()
        check_nobody_shares(h, clients)
    # No more faults: everyone heartbeats until the group settles.
    h.flush()
    now += SESSION + 1
    for c in clients:
        c.heartbeat(now=now)
    h.shard.tick(now)
    h.flush()
    for _ in range(8):
        for c in clients:
            c.heartbeat(now=now)
            check_nobody_shares(h, clients)
    if clients:
        g = h.group()
        assert g.state == STABLE_STATE, {m.member_id: (m.member_epoch, m.state) for m in g.members.values()}
        assert set(g.members) == {c.member_id for c in clients}
        total = sum(n for _, n in h.view.by_name.values())
        subscribed = {t for c in clients for t in c.topics}
        want = sum(h.view.by_name[t][1] for t in subscribed)
        assert sum(len(ps) for c in clients for ps in c.owned.values()) == want <= total
        for c in clients:
            assert c.owned == {t: ps for t, ps in g.members[c.member_id].assigned.items()}
        if len({tuple(c.topics) for c in clients}) == 1:
            loads = [sum(len(ps) for ps in c.owned.values()) for c in clients]
            assert max(loads) - min(loads) <= 1, loads
    assert snapshot(h.replayed()) == snapshot(h.shard)
