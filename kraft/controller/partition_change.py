"""The one place that computes ``PartitionChangeRecord``s (Kafka's ``PartitionChangeBuilder``).

Rules, as Kafka's builder without ELR (KIP-966 is off): a leader is elected from the target ISR,
keeping the current leader while it is still acceptable, otherwise the first acceptable ISR
member in replica order; with ``unclean`` and no ISR member alive, the first acceptable
replica leads and the ISR becomes just it (leader recovery state RECOVERING: data may be lost).
The ISR is never shrunk to empty: the last member stays and the partition goes leaderless (-1).
Leader epochs bump only with a new leader, partition epochs with every change (the record's
replay, ``PartitionRegistration.merge``, does both). No change -> no record.

``elect_away`` is the bulk form used when brokers are fenced, shut down or unregistered: every
partition of the image that one of them leads or sits in the ISR of gets one record.
This module reads images; it must not decide when brokers are fenced.
"""

from __future__ import annotations

from kraft.metadata.partition import NO_LEADER, RECOVERING
from kraft.metadata.records import PartitionChangeRecord

ONLINE, PREFERRED, UNCLEAN = "online", "preferred", "unclean"


def elect(part, acceptable, target_isr: tuple, election: str = ONLINE) -> tuple[int, bool]:
    """(leader, unclean) for ``part`` with ``target_isr``; ``acceptable(broker)`` says whether a
    broker may lead (registered, unfenced, not shutting down)."""
    replicas = part.replicas

    def valid(r):
        return r in target_isr and acceptable(r)

    if election == PREFERRED and replicas and valid(replicas[0]):
        return replicas[0], False
    if part.leader != NO_LEADER and valid(part.leader):
        return part.leader, False
    for r in replicas:
        if valid(r):
            return r, False
    if election == UNCLEAN:
        for r in replicas:
            if acceptable(r):
                return r, True
    return NO_LEADER, False


def change_record(topic_id, partition_id: int, part, acceptable, *, target_isr=None,
                  election: str = ONLINE) -> PartitionChangeRecord | None:
    """The record moving ``part`` to ``target_isr`` (default: its ISR) with a leader elected
    by ``election``; None when nothing would change."""
    isr = part.isr if target_isr is None else tuple(target_isr)
    if not isr:
        isr = part.isr  # never empty: the last member stays (Kafka without ELR)
    leader, unclean = elect(part, acceptable, isr, election)
    record = None
    if leader != part.leader:
        record = PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id, leader=leader)
        if unclean:
            record.isr = (leader,)
            if part.leader_recovery_state != RECOVERING:
                record.leader_recovery_state = RECOVERING
    if isr != part.isr and (record is None or record.isr is None):
        if record is None:
            record = PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id)
        record.isr = tuple(isr)
    return record


def elect_away(image, brokers: set, acceptable, *, unclean: bool = False) -> list:
    """Change records taking every broker in ``brokers`` out of the ISR of each partition and
    moving leadership off them. ``acceptable`` must already reject every broker in ``brokers``.
    The outcome depends only on a partition's (replicas, ISR, leader, recovery state), which
    repeat across thousands of partitions, so each shape is decided once."""
    out = []
    election = UNCLEAN if unclean else ONLINE
    append = out.append
    decided: dict = {}
    only = next(iter(brokers)) if len(brokers) == 1 else None
    for topic in image.topics.by_id.values():
        tid = topic.id
        for pid, part in topic.partitions.items():
            isr = part.isr
            if only is not None:
                if part.leader != only and only not in isr:
                    continue
            elif part.leader not in brokers and not any(b in isr for b in brokers):
                continue
            shape = (part.replicas, isr, part.leader, part.leader_recovery_state)
            change = decided.get(shape, False)
            if change is False:
                target = tuple(r for r in isr if r not in brokers)
                rec = change_record(tid, pid, part, acceptable, target_isr=target, election=election)
                change = decided[shape] = None if rec is None else (rec.leader, rec.isr, rec.leader_recovery_state)
                if rec is not None:
                    append(rec)
                continue
            if change is not None:
                append(PartitionChangeRecord(partition_id=pid, topic_id=tid, leader=change[0], isr=change[1],
                                             leader_recovery_state=change[2]))
    return out


def elect_leaderless(image, acceptable, *, unclean: bool = False) -> list:
    """Change records giving a leader to every leaderless partition that can have one now
    (after a broker is unfenced)."""
    out = []
    election = UNCLEAN if unclean else ONLINE
    for topic in image.topics.by_id.values():
        for pid, part in topic.partitions.items():
            if part.leader == NO_LEADER:
                rec = change_record(topic.id, pid, part, acceptable, election=election)
                if rec is not None:
                    out.append(rec)
    return out
