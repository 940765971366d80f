"""A synthetic but Kafka-shaped cluster history written as real metadata logs, for the
Spark pipeline's tests and its scale benchmark: Raft epochs opened by LeaderChange records,
brokers registering, being fenced and unfenced, topics created with partitions and configs,
leaders and ISRs changing, a topic deleted, a controlled shutdown.

The batches are encoded once with kraft's metadata serde and appended with
:class:`~kraft.log.SegmentedLog` to each node's ``__cluster_metadata-0``, so every node holds
the same bytes at the same offsets (as committed Raft logs do); ``tail_for`` adds an
uncommitted suffix to one node only. ``counts`` says how many records of each type were
written, so a reader can be checked exactly. Writes files only; no Raft, no sockets.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from dataclasses import dataclass, field

from kraft import records
from kraft.log import LogConfig, SegmentedLog
from kraft.metadata import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    encode_record,
)
from kraft.records import LeaderChangeMessage

#: Records per metadata batch (the controller batches a request's records together).
BATCH_RECORDS = 500


@dataclass
class History:
    """``batches``: ``(leader_epoch, batch bytes)`` in log order; ``counts``: records per type."""

    batches: list = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    epochs: dict = field(default_factory=dict)  # epoch -> leader
    topic_ids: dict = field(default_factory=dict)  # name -> uuid
    now_ms: int = 1_700_000_000_000
    epoch: int = 0
    leaders_changed: int = 0

    def add(self, recs: list, step_ms: int = 5) -> None:
        for i in range(0, len(recs), BATCH_RECORDS):
            chunk = recs[i:i + BATCH_RECORDS]
            self.batches.append((self.epoch, records.build_batch([encode_record(r) for r in chunk],
                                                                 timestamp=self.now_ms)))
            self.counts.update(type(r).__name__ for r in chunk)
            self.now_ms += step_ms

    def elect(self, leader: int, voters: tuple, gap_ms: int) -> None:
        self.now_ms += gap_ms
        self.epoch += 1
        self.epochs[self.epoch] = leader
        msg = LeaderChangeMessage(leader, voters, tuple(v for v in voters if v != voters[-1] or v == leader))
        self.batches.append((self.epoch, records.build_control_record_batch(msg, timestamp=self.now_ms)))
        self.counts["LeaderChange"] += 1
        self.now_ms += 5


def cluster_history(brokers: int = 3, topics: int = 3, partitions: int = 2, delete_topics: int = 1) -> History:
    """Three epochs: (1) brokers register and unfence, topics are created; (2) after an
    election, the last broker is fenced (partitions it led move, ISRs shrink), re-registers
    with a new epoch and is unfenced (ISRs expand); (3) after another election, topics are
    deleted and broker 1 starts a controlled shutdown."""
    h = History()
    voters = tuple(range(1, min(brokers, 3) + 1))
    ids = list(range(1, brokers + 1))
    rf = min(3, brokers)
    h.elect(1, voters, gap_ms=0)
    h.add([RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=1000 + b), broker_epoch=b, rack=None)
           for b in ids])
    h.add([UnfenceBrokerRecord(id=b, epoch=b) for b in ids])
    layout = {}
    for t in range(topics):
        name = f"topic-{t:05d}"
        tid = h.topic_ids[name] = uuid.UUID(int=(7 << 100) + t)
        recs = [TopicRecord(name=name, topic_id=tid)]
        for p in range(partitions):
            replicas = [ids[(t + p + k) % brokers] for k in range(rf)]
            layout[(tid, p)] = replicas
            recs.append(PartitionRecord(partition_id=p, topic_id=tid, replicas=replicas, isr=replicas,
                                        leader=replicas[0], leader_epoch=0, partition_epoch=0))
        recs.append(ConfigRecord(resource_type=2, resource_name=name, name="retention.ms", value=str(1000 * (t + 1))))
        h.add(recs)
    h.elect(2 if len(voters) > 1 else 1, voters, gap_ms=1500)
    gone = ids[-1]
    h.add([FenceBrokerRecord(id=gone, epoch=gone)])
    shrink, expand = [], []
    for (tid, p), replicas in layout.items():
        if gone not in replicas:
            continue
        isr = [b for b in replicas if b != gone]
        leader = isr[0] if replicas[0] == gone and isr else -2
        h.leaders_changed += leader != -2
        shrink.append(PartitionChangeRecord(partition_id=p, topic_id=tid, isr=isr or None, leader=leader))
        expand.append(PartitionChangeRecord(partition_id=p, topic_id=tid, isr=replicas))
    h.add(shrink)
    h.add([RegisterBrokerRecord(broker_id=gone, incarnation_id=uuid.UUID(int=2000 + gone), broker_epoch=100 + gone,
                                rack=None)], step_ms=2000)
    h.add([UnfenceBrokerRecord(id=gone, epoch=100 + gone)])
    h.add(expand)
    h.elect(3 if len(voters) > 2 else voters[0], voters, gap_ms=800)
    h.add([RemoveTopicRecord(topic_id=h.topic_ids[f"topic-{t:05d}"]) for t in range(min(delete_topics, topics))])
    h.add([BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=1, in_controlled_shutdown=1)])
    return h


def write_history(node_dir: str, history: History, *, tail: list | None = None,
                  segment_bytes: int = 8 << 20) -> str:
    """``node_dir/__cluster_metadata-0`` holding ``history`` (then ``tail``, more
    ``(epoch, batch)`` pairs only this node has); returns the metadata directory."""
    directory = os.path.join(node_dir, "__cluster_metadata-0")
    log = SegmentedLog.open(directory, LogConfig(segment_bytes=segment_bytes, background_flush=False))
    try:
        for epoch, batch in list(history.batches) + list(tail or ()):
            log.append(batch, leader_epoch=epoch)
        log.request_flush()
    finally:
        log.close()
    return directory


def tail_for(history: History, epoch: int, n: int = 2) -> list:
    """``n`` uncommitted batches of a would-be leader at ``epoch`` (one TopicRecord each)."""
    return [(epoch, records.build_batch([encode_record(TopicRecord(name=f"uncommitted-{i}",
                                                                    topic_id=uuid.UUID(int=(9 << 100) + i)))],
                                        timestamp=history.now_ms + i)) for i in range(n)]
