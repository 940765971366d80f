"""The server-side assignors of KIP-848 consumer groups: ``uniform`` (Kafka's default) and ``range``.

An assignor is a pure function: the members' subscriptions ({member id: set of topic names}),
the subscribed topics' metadata ({topic name: (topic id, partition count)}) and the current
target assignment ({member id: {topic id: set of partitions}}) give the new target assignment
in the same shape, with every member present. Deterministic (sorted orders, no randomness), so
a coordinator that took over computes what the old one would have.

``uniform``: every partition of a subscribed topic goes to one member subscribed to it; members
end up within one partition of each other where their subscriptions allow; partitions stay
where they were unless balance requires a move (sticky), so a rebalance revokes as little as
possible. ``range``: for each topic, its subscribers sorted by member id get contiguous ranges,
the first ``n % m`` one partition more (Kafka's classic range rule, applied per topic).
"""

from __future__ import annotations

UNIFORM, RANGE = "uniform", "range"


def _subscribed_ids(subs: dict, topics: dict) -> dict:
    """{member id: set of topic ids it subscribes to that exist}."""
    return {m: {topics[t][0] for t in names if t in topics} for m, names in subs.items()}


def uniform(subs: dict, topics: dict, current: dict) -> dict:
    members = sorted(subs)
    wants = _subscribed_ids(subs, topics)
    sizes = {tid: n for tid, n in topics.values()}
    eligible: dict = {}  # (topic id, partition) -> members that may own it
    for m in members:
        for tid in wants[m]:
            for p in range(sizes[tid]):
                eligible.setdefault((tid, p), []).append(m)
    owned = {m: set() for m in members}
    owner: dict = {}
    # 1. Sticky: a member keeps what it had, if it still subscribes and the partition exists.
    for m in members:
        for tid, parts in current.get(m, {}).items():
            for p in parts:
                tp = (tid, p)
                if tp in eligible and m in eligible[tp] and tp not in owner:
                    owner[tp] = m
                    owned[m].add(tp)
    # 2. Partitions without an owner go to the least loaded member that may take them (the
    #    partitions with the fewest candidates first, so they are not crowded out).
    free = sorted((tp for tp in eligible if tp not in owner), key=lambda tp: (len(eligible[tp]), tp[0].bytes, tp[1]))
    for tp in free:
        m = min(eligible[tp], key=lambda c: (len(owned[c]), c))
        owner[tp] = m
        owned[m].add(tp)
    # 3. Balance: move a partition from a member to an eligible one holding at least two
    #    fewer, until no such move exists (each move lowers the sum of squared loads, so it ends).
    moved = True
    while moved:
        moved = False
        for a in sorted(members, key=lambda c: (-len(owned[c]), c)):
            for tp in sorted(owned[a], key=lambda tp: (tp[0].bytes, tp[1]), reverse=True):
                takers = [b for b in eligible[tp] if len(owned[b]) < len(owned[a]) - 1]
                if takers:
                    b = min(takers, key=lambda c: (len(owned[c]), c))
                    owned[a].discard(tp)
                    owned[b].add(tp)
                    moved = True
                    break
            if moved:
                break
    return {m: _by_topic(owned[m]) for m in members}


def range_assignor(subs: dict, topics: dict, current: dict) -> dict:
    out: dict = {m: {} for m in subs}
    for name, (tid, n) in sorted(topics.items()):
        takers = sorted(m for m, names in subs.items() if name in names)
        if not takers:
            continue
        quota, extra = divmod(n, len(takers))
        start = 0
        for i, m in enumerate(takers):
            count = quota + (1 if i < extra else 0)
            if count:
                out[m][tid] = set(range(start, start + count))
            start += count
    return out


def _by_topic(pairs) -> dict:
    out: dict = {}
    for tid, p in pairs:
        out.setdefault(tid, set()).add(p)
    return out


ASSIGNORS = {UNIFORM: uniform, RANGE: range_assignor}
