"""A shard with KIP-848 consumer groups under test: heartbeats in, records out (kept in log order,
made durable on ``flush``), and ``Client``, a well-behaved consumer-protocol member as librdkafka
is one (it adopts each assignment it is given, reports what it owns, rejoins with epoch 0 when
fenced)."""

from __future__ import annotations

import uuid

from kraft.coordinator.consumer_group import TopicsView
from kraft.coordinator.consumer_handlers import group_records
from kraft.coordinator.group_records import decode_record
from kraft.coordinator.group_shard import GroupConfig, GroupShard
from kraft.errors import ErrorCode as E
from kraft.protocol import ConsumerGroupHeartbeatRequest as Q

SESSION = 45_000
REBALANCE = 30_000


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


class Shard:
    def __init__(self, topics=None, **config):
        self.view = TopicsView({n: (topic_id(n), c) for n, c in (topics or {"t": 6}).items()})
        self.shard = GroupShard(0, GroupConfig(**config), topics=self.view)
        self.log = []  # every record made durable, in log order, as (key bytes, value bytes)
        self.pending = []

    def add_topic(self, name, partitions):
        self.view.by_name[name] = (topic_id(name), partitions)

    def collect(self):
        self.pending.extend(self.shard.take_appends())

    def flush(self):
        self.collect()
        while self.pending:
            a = self.pending.pop(0)
            self.log.extend((r.key, r.value) for r in a.records)
            if a.on_durable:
                a.on_durable()
            self.collect()

    def fail(self, code=E.NOT_ENOUGH_REPLICAS):
        self.collect()
        for a in self.pending:
            if a.on_failed:
                a.on_failed(code)
        self.pending.clear()

    def heartbeat(self, member_id, epoch, *, owned=None, topics=None, regex=None, instance=None, assignor=None,
                  now=0, group="g", version=1, rebalance_timeout=REBALANCE, flush=True, full=False,
                  may_describe=None):
        """The response; ``owned``: {topic name: partitions} the member says it owns (None: not sent)."""
        box = []
        tp = None
        if owned is not None:
            tp = [Q.TopicPartitions(topic_id=topic_id(t), partitions=sorted(ps)) for t, ps in owned.items()]
        if epoch == 0:
            tp = tp or []
        req = Q(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance,
                rebalance_timeout_ms=rebalance_timeout if epoch == 0 or full else -1,
                subscribed_topic_names=topics if topics is not None else (["t"] if epoch == 0 and not regex else None),
                subscribed_topic_regex=regex, server_assignor=assignor, topic_partitions=tp)
        self.shard.consumer_heartbeat(req, version, now, "client", "/127.0.0.1", box.append, may_describe)
        if flush:
            self.flush()
        else:
            self.collect()
        return box[0] if box else None

    def group(self, group="g"):
        return self.shard.consumer_groups[group]

    def owners(self, group="g") -> dict:
        """(topic id, partition) -> [members owning it], from the coordinator's state."""
        out: dict = {}
        if group not in self.shard.consumer_groups:
            return out
        for m in self.group(group).members.values():
            for tp in m.owned():
                out.setdefault(tp, []).append(m.member_id)
        return out

    def failover(self, now=0):
        """The coordinator moves: writes not yet durable are lost (their answers are errors) and
        the new coordinator replays the log."""
        self.fail(E.NOT_LEADER_OR_FOLLOWER)
        self.shard.unload()
        self.shard = self.replayed(now)

    def replayed(self, now=0) -> GroupShard:
        """A new coordinator that loaded this shard's log (a failover)."""
        other = GroupShard(0, self.shard.config, topics=self.view)
        for key, value in self.log:
            other.apply(decode_record(key, value), now)
        return other


def names(resp) -> dict | None:
    """The response's assignment as {topic id: sorted partitions} (None: no assignment sent)."""
    if resp.assignment is None:
        return None
    return {t.topic_id: sorted(t.partitions) for t in resp.assignment.topic_partitions}


def snapshot(shard: GroupShard) -> dict:
    """Every consumer group of ``shard`` as its records (what a replay must give back)."""
    return {gid: [(k.to_dict(), v.to_dict()) for k, v in group_records(g)] for gid, g in shard.consumer_groups.items()}


class Client:
    """A consumer-protocol member that behaves: it owns exactly the last assignment it was given
    and reports it; fenced or unknown, it drops everything and rejoins with epoch 0."""

    def __init__(self, harness: Shard, member_id: str, topics=("t",), instance=None):
        self.h, self.member_id, self.topics, self.instance = harness, member_id, list(topics), instance
        self.epoch = 0
        self.owned: dict = {}  # topic id -> set of partitions
        self.full = False  # after a lost answer (a timeout to the client) the next heartbeat says everything

    def heartbeat(self, now=0, lose_answer=False, flush=True):
        owned = None
        if self.epoch > 0:
            owned = {}
            by_id = {topic_id(n): n for n in self.h.view.names()}
            for tid, ps in self.owned.items():
                owned[by_id[tid]] = ps
        resp = self.h.heartbeat(self.member_id, self.epoch, owned=owned,
                                topics=self.topics if self.epoch == 0 or self.full else None, instance=self.instance,
                                now=now, flush=flush, full=self.full)
        self.full = resp is None or lose_answer
        if self.full:
            return resp
        if resp.error_code in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.epoch, self.owned = 0, {}
        elif resp.error_code != E.NONE:
            self.full = True  # e.g. NOT_COORDINATOR: the same again, in full, to the new coordinator
        elif resp.error_code == E.NONE:
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                self.owned = {t.topic_id: set(t.partitions) for t in resp.assignment.topic_partitions if t.partitions}
        return resp

    def leave(self, now=0):
        resp = self.h.heartbeat(self.member_id, -1, instance=self.instance, now=now)
        self.epoch, self.owned = 0, {}
        return resp
