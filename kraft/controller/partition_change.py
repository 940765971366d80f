"""The one place that computes ``PartitionChangeRecord``s (Kafka's ``PartitionChangeBuilder``).

``build`` moves one partition towards targets (ISR, replicas, adding/removing replicas, leader
recovery state) in Kafka's order: complete a reassignment whose new replicas all joined the
ISR; track eligible leader replicas (ELR, KIP-966) when enabled; elect a leader; bump the
leader epoch when replicas leave; write only the fields that change. No change -> None.

Election: a leader comes from the target ISR (or, with an empty ISR, from the ELR), keeping the
current leader while it is still valid, otherwise the first valid replica in target-replica
order; PREFERRED tries the first replica first; UNCLEAN, when nothing valid is left, takes the
first acceptable replica and resets the ISR to it (leader recovery state RECOVERING: data may be
lost). Without ELR the ISR is never shrunk to empty: the last member stays and the partition goes
leaderless (-1). With ELR (``elr_min_isr`` > 0), members leaving an ISR smaller than min ISR
stay eligible (ELR) and may lead cleanly when they come back; the ISR may become empty.
Leader epochs bump with a new leader (or replicas leaving), partition epochs with every change
(the record's replay, ``PartitionRegistration.merge``, does both).

``elect_away`` and ``elect_leaderless`` are the bulk forms used when brokers are fenced, shut
down, unregistered or unfenced. This module reads registrations; it must not decide when
brokers are fenced or which requests are valid.
"""

from __future__ import annotations

from kraft.controller.record_cache import ChangeRecordRun
from kraft.metadata.batch_codec import partitions_touching
from kraft.metadata.partition import MIGRATING_DIR, NO_LEADER, NO_LEADER_CHANGE, RECOVERING, UNASSIGNED_DIR
from kraft.metadata.records import PartitionChangeRecord

ONLINE, PREFERRED, UNCLEAN = "online", "preferred", "unclean"


def elect(part, acceptable, target_isr: tuple, election: str = ONLINE, *, replicas: tuple | None = None,
          target_elr: tuple = ()) -> tuple[int, bool]:
    """(leader, unclean) for ``part`` with ``target_isr``; ``acceptable(broker)`` says whether a
    broker may lead (registered, unfenced, not shutting down)."""
    if replicas is None:
        replicas = part.replicas

    def valid(r):
        return (r in target_isr or (not target_isr and r in target_elr)) and acceptable(r)

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


# --- reassignment arithmetic (Kafka's PartitionReassignmentReplicas / ...Revert) -------------


def reassignment_targets(current: tuple, target) -> tuple[tuple, tuple, tuple]:
    """(replicas, removing, adding) that start moving ``current`` to ``target``: the target
    replicas first, then the ones leaving, which serve until the new ones caught up."""
    removing = tuple(sorted(set(current) - set(target)))
    adding = tuple(sorted(set(target) - set(current)))
    return tuple(target) + removing, removing, adding


def completed_reassignment(replicas: tuple, isr: tuple, removing: tuple, adding: tuple):
    """(replicas, isr) once a reassignment in progress can finish with ``isr``, else None: every
    remaining replica must be in the ISR, and someone not leaving must be."""
    if not removing and not adding:
        return None
    if removing:
        isr = tuple(r for r in isr if r not in removing)
        replicas = tuple(r for r in replicas if r not in removing)
        if not isr or not replicas:
            return None
    if not all(r in isr for r in replicas):
        return None
    return replicas, isr


def reverted_reassignment(part) -> tuple[tuple, tuple, bool]:
    """(replicas, isr, unclean) of ``part`` with its reassignment cancelled: the replicas being
    added go, the ones being removed stay. ``unclean``: only added replicas were in the ISR, so
    the first original replica must lead without being in sync."""
    adding = set(part.adding_replicas)
    replicas = tuple(r for r in part.replicas if r not in adding)
    isr = tuple(r for r in part.isr if r not in adding)
    if not isr:
        return replicas, replicas[:1], True
    return replicas, isr, False


def in_reassignment(part) -> bool:
    return bool(part.adding_replicas or part.removing_replicas)


# --- the builder ------------------------------------------------------------------------------


def build(topic_id, partition_id: int, part, acceptable, *, target_isr=None, target_replicas=None,
          target_removing=None, target_adding=None, target_recovery=None, election: str = ONLINE,
          elr_min_isr: int = 0, unclean_shutdown=()) -> PartitionChangeRecord | None:
    """The record moving ``part`` to the targets (None: unchanged), or None when nothing would
    change. ``elr_min_isr`` > 0 enables eligible leader replicas with that min ISR;
    ``unclean_shutdown`` brokers lost their unflushed data, so they leave the ELR."""
    isr = part.isr if target_isr is None else tuple(target_isr)
    replicas = part.replicas if target_replicas is None else tuple(target_replicas)
    removing = part.removing_replicas if target_removing is None else tuple(target_removing)
    adding = part.adding_replicas if target_adding is None else tuple(target_adding)
    recovery = part.leader_recovery_state if target_recovery is None else target_recovery

    done = completed_reassignment(replicas, isr, removing, adding)
    if done is not None:
        replicas, isr = done
        removing = adding = ()

    elr, last_known = part.elr, part.last_known_elr
    if elr_min_isr > 0:
        if len(isr) >= elr_min_isr:
            elr = last_known = ()
        else:
            # Members leaving an ISR that is below min ISR acknowledged every committed write: they
            # stay eligible to lead cleanly.
            candidates = set(elr) | set(part.isr)
            elr = tuple(sorted(r for r in candidates if r not in isr and r not in unclean_shutdown))
            last_known = tuple(sorted(r for r in last_known if r not in isr and r not in elr))

    record = PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id)
    leader, unclean = elect(part, acceptable, isr, election, replicas=replicas, target_elr=elr)
    if leader != part.leader:
        if leader in elr:  # elected from the ELR: it alone is in sync now
            isr = (leader,)
            elr = tuple(r for r in elr if r != leader)
            if len(isr) >= elr_min_isr:
                # At min ISR (min.insync.replicas 1) its HW moves on alone: the others miss
                # what it commits next, so they are eligible no more.
                elr = last_known = ()
        record.leader = leader
        if unclean:
            record.isr = (leader,)
            if part.leader_recovery_state != RECOVERING:
                record.leader_recovery_state = RECOVERING
    if record.leader == NO_LEADER_CHANGE and not all(r in replicas for r in part.replicas):
        record.leader = part.leader  # replicas leave: the leader epoch must bump (fences them)

    if record.isr is not None or elr_min_isr <= 0:
        elr = last_known = ()
    if elr != part.elr:
        record.eligible_leader_replicas = elr
    if last_known != part.last_known_elr:
        record.last_known_elr = last_known

    if record.isr is None and (isr or elr_min_isr > 0) and isr != part.isr:
        record.isr = isr

    if replicas != part.replicas:
        record.replicas = replicas
        record.directories = _directories(part, replicas)
    if removing != part.removing_replicas:
        record.removing_replicas = removing
    if adding != part.adding_replicas:
        record.adding_replicas = adding
    if recovery != part.leader_recovery_state and record.leader_recovery_state == -1:
        record.leader_recovery_state = recovery
    return None if _is_noop(record) else record


def _directories(part, replicas: tuple):
    """Directories for new replicas: None (unchanged) while every directory is MIGRATING (the
    replay then sizes them); else each kept replica keeps its directory, a new one has none yet."""
    if all(d == MIGRATING_DIR for d in part.directories):
        return None
    where = dict(zip(part.replicas, part.directories))
    return tuple(where.get(r, UNASSIGNED_DIR) for r in replicas)


def _is_noop(r) -> bool:
    return (r.leader == NO_LEADER_CHANGE and r.isr is None and r.replicas is None and r.removing_replicas is None
            and r.adding_replicas is None and r.leader_recovery_state == -1 and r.directories is None
            and r.eligible_leader_replicas is None and r.last_known_elr is None)


_FIELDS = ("isr", "leader", "replicas", "removing_replicas", "adding_replicas", "leader_recovery_state",
           "directories", "eligible_leader_replicas", "last_known_elr")


def _changed_fields(r) -> dict:
    defaults = {"leader": NO_LEADER_CHANGE, "leader_recovery_state": -1}
    return {f: getattr(r, f) for f in _FIELDS if getattr(r, f) != defaults.get(f)}


def change_record(topic_id, partition_id: int, part, acceptable, *, target_isr=None,
                  election: str = ONLINE, elr_min_isr: int = 0) -> PartitionChangeRecord | None:
    """The record moving ``part`` to ``target_isr`` (default: its ISR) with a leader elected
    by ``election``; None when nothing would change."""
    return build(topic_id, partition_id, part, acceptable, target_isr=target_isr, election=election,
                 elr_min_isr=elr_min_isr)


def _election(unclean, topic_name: str) -> str:
    """``unclean``: a bool for every topic, or ``topic_name -> bool`` (topic configs win)."""
    allowed = unclean(topic_name) if callable(unclean) else unclean
    return UNCLEAN if allowed else ONLINE


def elect_away(image, brokers: set, acceptable, *, unclean=False, min_isr=None,
               unclean_shutdown: bool = False, topics=None, decided: dict | None = None, which: int = 0,
               runs: bool = False) -> list:
    """Change records taking every broker in ``brokers`` out of the ISR of each partition and
    moving leadership off them. ``acceptable`` must already reject every broker in ``brokers``.
    ``unclean``: bool or ``topic_name -> bool``; ``min_isr(topic_name) -> int`` enables ELR (0: off for that topic); ``unclean_shutdown``:
    they restarted without a clean shutdown, so they leave every ELR too (Kafka's
    ``handleBrokerUncleanShutdown``). The outcome depends only on a partition's registration
    shape, which repeats across thousands of partitions, so each shape is decided once.
    ``topics``: only these (TopicImages of ``image``; default all); ``decided``: the shapes
    decided so far, shared by the calls of one unit made a step at a time; ``which`` (one broker
    only): 1 the partitions it leads, 2 the others it is in sync for, 0 both; ``runs``: a topic's
    records as one ``ChangeRecordRun`` (no record object per partition)."""
    out = []
    append = out.append
    if decided is None:
        decided = {}
    only = next(iter(brokers)) if len(brokers) == 1 else None
    lost = frozenset(brokers) if unclean_shutdown else ()
    for topic in image.topics.by_id.values() if topics is None else topics:
        tid = topic.id
        elr_min = min_isr(topic.name) if min_isr is not None else 0
        election = _election(unclean, topic.name)
        parts = topic.partitions
        entries = [] if runs else None
        # One broker (a fence, a shutdown): only the partitions it touches, found in C.
        touched = (parts.items() if only is None else
                   [(pid, parts[pid]) for pid in partitions_touching(parts, only, bool(lost), which)])
        for pid, part in touched:
            isr = part.isr
            if only is None and (part.leader not in brokers and not any(b in isr for b in brokers)
                                 and not (lost and any(b in part.elr for b in brokers))):
                continue
            # Registrations are shared (``partition.intern_registration``): equal shapes are
            # mostly one object, so the shape is its identity (hashing its directories would run
            # uuid's Python hash); an equal registration that is another object only misses.
            shape = (id(part), elr_min, election)
            hit = decided.get(shape)
            if hit is None or hit[0] is not part:
                target = tuple(r for r in isr if r not in brokers)
                rec = build(tid, pid, part, acceptable, target_isr=target, election=election, elr_min_isr=elr_min,
                            unclean_shutdown=lost)
                hit = decided[shape] = (part, None if rec is None else _changed_fields(rec), rec)
                if rec is not None:
                    if entries is not None:
                        entries.append((pid, rec))
                    else:
                        append(rec)
                continue
            if hit[1] is not None:
                if entries is not None:
                    entries.append((pid, hit[2]))
                else:
                    append(PartitionChangeRecord(partition_id=pid, topic_id=tid, **hit[1]))
        if entries:
            append(ChangeRecordRun(tid, entries))
    return out


def elect_leaderless(image, acceptable, *, unclean=False, min_isr=None) -> list:
    """Change records giving a leader to every leaderless partition that can have one now
    (after a broker is unfenced)."""
    out = []
    for topic in image.topics.by_id.values():
        elr_min = min_isr(topic.name) if min_isr is not None else 0
        election = _election(unclean, topic.name)
        for pid, part in topic.partitions.items():
            if part.leader == NO_LEADER:
                rec = build(topic.id, pid, part, acceptable, election=election, elr_min_isr=elr_min)
                if rec is not None:
                    out.append(rec)
    return out
