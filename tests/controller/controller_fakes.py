"""A fake Raft log for controller tests: ``append`` gives offsets, ``commit`` hands whole
batches (real RecordBatch views) to the controller, ``lose_leadership`` truncates what is not
committed. Also builders for broker registrations and requests."""

from __future__ import annotations

import uuid

from kraft.controller.quorum_controller import QuorumController
from kraft.errors import NotLeaderError
from kraft.metadata import encode_record
from kraft.protocol import (BrokerHeartbeatRequest, BrokerRegistrationRequest, CreateTopicsRequest)
from kraft.raft.election import LeaderAndEpoch
from kraft.records import build_batch, iter_batches

CLUSTER = "test-cluster"


class FakeRaft:
    """``epoch``: the leader epoch stamped on the batches appended from now on."""

    def __init__(self, epoch: int = 1):
        self.batches: list[bytes] = []  # every appended batch, in offset order
        self.end = 0
        self.committed_batches = 0
        self.leader = True
        self.epoch = epoch

    def append(self, values) -> int:
        if not self.leader:
            raise NotLeaderError("not the leader", -1, -1)
        self.batches.append(build_batch(list(values), base_offset=self.end, timestamp=0,
                                        partition_leader_epoch=self.epoch))
        self.end += len(values)
        return self.end - 1

    def append_foreign(self, values) -> None:
        self.batches.append(build_batch(list(values), base_offset=self.end, timestamp=0,
                                        partition_leader_epoch=self.epoch))
        self.end += len(values)

    def commit(self, *listeners, batches: int | None = None) -> None:
        """Deliver the next ``batches`` uncommitted batches (all by default) to ``listeners``."""
        upto = len(self.batches) if batches is None else self.committed_batches + batches
        views = [b for raw in self.batches[self.committed_batches:upto] for b in iter_batches(raw)]
        self.committed_batches = upto
        for lst in listeners:
            lst.handle_commit(views)

    def truncate_uncommitted(self) -> None:
        del self.batches[self.committed_batches:]
        self.end = sum(b.next_offset - b.base_offset for raw in self.batches for b in iter_batches(raw))


class Answers:
    def __init__(self):
        self.got: dict = {}

    def __call__(self, token, response):
        assert token not in self.got, f"{token} answered twice"
        self.got[token] = response


def active_controller(raft: FakeRaft, node_id: int = 1, epoch: int = 1, **settings):
    answers = Answers()
    ctl = QuorumController(node_id, cluster_id=CLUSTER, settings=settings, append=raft.append, respond=answers)
    ctl.handle_leader_change(LeaderAndEpoch(node_id, epoch))
    return ctl, answers


def standby(node_id: int = 2):
    answers = Answers()
    return QuorumController(node_id, cluster_id=CLUSTER, append=None, respond=answers), answers


def registration(broker_id: int, rack: str | None = None, incarnation: uuid.UUID | None = None):
    R = BrokerRegistrationRequest
    return R(broker_id=broker_id, cluster_id=CLUSTER, incarnation_id=incarnation or uuid.UUID(int=1000 + broker_id),
             listeners=[R.Listener(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id, security_protocol=0)],
             features=[], rack=rack)


def heartbeat(broker_id: int, epoch: int, offset: int, *, want_fence=False, want_shut_down=False):
    return BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=offset,
                                  want_fence=want_fence, want_shut_down=want_shut_down)


def create_topics(*specs, validate_only=False):
    """specs: (name, partitions, rf) or (name, {index: [brokers]})."""
    T = CreateTopicsRequest.Topic
    topics = []
    for spec in specs:
        if isinstance(spec[1], dict):
            topics.append(T(name=spec[0], num_partitions=-1, replication_factor=-1,
                            assignments=[T.Assignment(partition_index=i, broker_ids=b) for i, b in spec[1].items()]))
        else:
            topics.append(T(name=spec[0], num_partitions=spec[1], replication_factor=spec[2]))
    return CreateTopicsRequest(topics=topics, timeout_ms=5000, validate_only=validate_only)


def cluster_of(raft: FakeRaft, ctl, n: int, now_ms: int = 0, racks=None, others=()):
    """Register ``n`` brokers (ids 1..n), commit, heartbeat them unfenced; returns their epochs."""
    epochs = {}
    for b in range(1, n + 1):
        ctl.submit(62, registration(b, racks[b - 1] if racks else None), 0, now_ms, ("reg", b))
    raft.commit(ctl, *others)
    for b in range(1, n + 1):
        epochs[b] = ctl.respond.got[("reg", b)].broker_epoch
        ctl.submit(63, heartbeat(b, epochs[b], raft.end), 0, now_ms, ("hb", b))
    raft.commit(ctl, *others)
    assert all(not ctl.image.cluster.brokers[b].fenced for b in epochs), "brokers not unfenced"
    return epochs


def encode(records) -> list[bytes]:
    return [encode_record(r) for r in records]
