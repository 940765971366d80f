"""Replica placement for new partitions: rack-aware and balanced across usable brokers.

The idea of Kafka's ``StripedReplicaPlacer``, written our own way: brokers are ordered by
striping racks (one broker of each rack in turn), leaders go round-robin over that order from
a start position, and each partition's followers are the next brokers after its leader whose
racks the partition does not use yet (then any remaining broker), skipping further ahead as
the partition index wraps so that followers rotate too. Every broker thus leads about the same
number of partitions and holds about the same number of replicas, and replicas spread over
racks whenever there are as many racks as replicas. Pure and deterministic: the start comes
from the caller. This module must not read images or write records.
"""

from __future__ import annotations

from kraft.errors import ErrorCode, KraftError


class PlacementError(KraftError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


def striped_order(brokers) -> list[tuple[int, str | None]]:
    """``brokers`` as (id, rack) pairs, ordered rack by rack in turn; brokers without a rack
    form one group of their own."""
    racks: dict = {}
    for bid, rack in sorted(brokers, key=lambda b: b[0]):
        racks.setdefault(rack, []).append((bid, rack))
    groups = [racks[r] for r in sorted(racks, key=lambda r: (r is None, r or ""))]
    out = []
    for i in range(max((len(g) for g in groups), default=0)):
        for g in groups:
            if i < len(g):
                out.append(g[i])
    return out


def place(brokers, num_partitions: int, replication_factor: int, start: int = 0) -> list[tuple[int, ...]]:
    """Replica lists (leader first) for ``num_partitions`` new partitions. ``brokers`` is a
    list of (id, rack) of the usable brokers. PlacementError if there are too few."""
    if replication_factor <= 0:
        raise PlacementError("replication factor must be larger than 0")
    order = striped_order(brokers)
    n = len(order)
    if n == 0:
        raise PlacementError("unable to replicate the partition: no usable brokers are registered")
    if replication_factor > n:
        raise PlacementError(f"unable to replicate the partition {replication_factor} time(s): the target "
                             f"replication factor of {replication_factor} cannot be reached because only "
                             f"{n} broker(s) are registered")
    key = (tuple(order), replication_factor)
    cycle = _CYCLES.get(key)
    if cycle is None:
        cycle = _cycle(order, replication_factor)
        if len(_CYCLES) >= _CYCLES_LIMIT:
            _CYCLES.clear()
        _CYCLES[key] = cycle
    length = len(cycle)
    at = start % length
    out = cycle[at:at + num_partitions]
    while len(out) < num_partitions:  # (shared tuples: callers must not mutate)
        out += cycle[:num_partitions - len(out)]
    return out


# The placement of partition k repeats with period n * (n - 1) over n brokers: each (usable
# brokers, replication factor) is computed once, then a topic takes a slice of it (a million
# partitions placed cost a slice per topic, not a search per partition).
_CYCLES: dict = {}
_CYCLES_LIMIT = 1 << 10


def _cycle(order, replication_factor: int) -> list[tuple[int, ...]]:
    ids = [b for b, _ in order]
    racks_of = [r for _, r in order]
    n = len(order)
    n_racks = len(set(racks_of))
    made: dict[tuple[int, int], tuple] = {}
    out = []
    for k in range(n * max(n - 1, 1)):
        key = (k % n, (k // n) % max(n - 1, 1))
        replicas = made.get(key)
        if replicas is None:
            replicas = made[key] = tuple(_replicas(ids, racks_of, n_racks, key[0], key[1], replication_factor))
        out.append(replicas)
    return out


def _replicas(ids, racks_of, n_racks, first, shift, rf) -> list[int]:
    n = len(ids)
    chosen = [first]
    used_racks = {racks_of[first]}
    candidates = [(first + 1 + shift + j) % n for j in range(n)]
    candidates = [c for c in candidates if c != first]
    for c in candidates:  # first pass: new racks only
        if len(chosen) == rf:
            break
        if racks_of[c] not in used_racks or len(used_racks) >= n_racks:
            chosen.append(c)
            used_racks.add(racks_of[c])
    for c in candidates:  # then anything not chosen yet
        if len(chosen) == rf:
            break
        if c not in chosen:
            chosen.append(c)
    return [ids[i] for i in chosen]
