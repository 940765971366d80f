"""The verdict of the replication checker (tools/replication_checker.py) on one history.

Pure functions over what the run recorded: the producers' acknowledged writes
(partition, offset, value, time) and indeterminate ones (an error or no answer: the write
may or may not be in the log), what a consumer read back from each partition up to its high
watermark, and each replica's records as read from its segment files. Nothing here starts
processes or touches the network, so the unit tests can feed it synthetic histories and see
every anomaly reported (tests/integration/test_replication_checker.py).

Anomalies (Jepsen's Kafka checker and TESTING.md's "client-visible histories"):
  * lost       — an acknowledged value that is not at its acknowledged offset when read back
                 (missing altogether, or moved to another offset / partition);
  * divergent  — an offset below the high watermark where two replicas hold different
                 values, or a replica that lacks an offset below the high watermark;
  * duplicates — a value present at more than one place. A producer without idempotence may
                 write one twice (librdkafka retries a request whose answer it lost), so
                 only the idempotent producers' duplicates are anomalies, and only those
                 whose copies share a (producer id, epoch): librdkafka bumps its epoch when
                 messages time out and then resends retried, possibly persisted messages
                 with new sequence numbers, which no broker can recognise (librdkafka
                 issue 4953); those are counted apart;
  * unknown    — a value no producer ever sent (corruption).
Unavailability of a partition is the longest time between two acknowledgements on it (or
from the start / to the end of the load) while the producers kept trying.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Ack:
    partition: int
    offset: int
    value: bytes
    t: float  # wall-clock seconds when the delivery report arrived


@dataclass(frozen=True)
class Indeterminate:
    partition: int
    value: bytes
    error: str


@dataclass
class Verdict:
    acked: int = 0
    lost: list = field(default_factory=list)          # (partition, offset, value, found_at | None)
    divergent: list = field(default_factory=list)     # (partition, offset, {node: value | None})
    duplicates: list = field(default_factory=list)    # (value, [(partition, offset), ...])
    idempotent_duplicates: list = field(default_factory=list)
    epoch_bump_duplicates: list = field(default_factory=list)  # idempotent, each copy in another producer epoch
    unknown: list = field(default_factory=list)       # (partition, offset, value)
    indeterminate_found: int = 0
    indeterminate_missing: int = 0
    unavailable: dict = field(default_factory=dict)   # partition -> (longest gap s, gap start s from load start)
    records_read: int = 0
    replica_records_checked: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.divergent or self.idempotent_duplicates or self.unknown)


def locate(consumed: dict[int, dict[int, bytes]]) -> dict[bytes, list[tuple[int, int]]]:
    """value -> every (partition, offset) it was read at."""
    where: dict[bytes, list] = defaultdict(list)
    for p, records in consumed.items():
        for off, v in records.items():
            where[v].append((p, off))
    return where


def find_lost(acks: Iterable[Ack], consumed: dict[int, dict[int, bytes]], where) -> list:
    """Acknowledged values not at their acknowledged (partition, offset)."""
    lost = []
    for a in acks:
        if a.offset < 0:  # acknowledged without an offset: it must be in its partition somewhere
            if not any(p == a.partition for p, _ in where.get(a.value, ())):
                lost.append((a.partition, a.offset, a.value, None))
            continue
        if consumed.get(a.partition, {}).get(a.offset) != a.value:
            found = where.get(a.value)
            lost.append((a.partition, a.offset, a.value, found[0] if found else None))
    return lost


def find_divergent(hw: dict[int, int], consumed: dict[int, dict[int, bytes]],
                   replicas: dict[int, dict[int, Iterable[tuple[int, bytes]]]]) -> tuple[list, int]:
    """Offsets below each partition's high watermark where the replicas (and the consumer's
    read, which came from one of them) disagree, or where a replica has nothing.

    ``replicas``: partition -> node -> (offset, value) pairs, e.g. a generator over segment
    files (iterated once), so only the consumer's read is held whole in memory. Returns
    (divergent as (partition, offset, {node or "read": value or None}), records compared)."""
    divergent, checked = [], 0
    for p in sorted(replicas):
        limit = hw.get(p, 0)
        reference = {off: v for off, v in consumed.get(p, {}).items() if off < limit}
        extra: dict[int, bytes] = {}  # offsets below the HW that the consumer did not return
        have: dict[int, set] = {}
        bad: dict[int, dict] = defaultdict(dict)
        for node, records in sorted(replicas[p].items()):
            mine = have[node] = set()
            for off, value in records:
                if off >= limit:
                    continue  # above the HW a replica may still hold an uncommitted tail
                checked += 1
                mine.add(off)
                expected = reference.get(off)
                if expected is None:
                    expected = extra.setdefault(off, value)
                if value != expected:
                    bad[off][node] = value
        every = set(reference) | set(extra)
        for node, mine in have.items():
            for off in every - mine:
                bad[off][node] = None
        for off in sorted(bad):
            values = dict(bad[off])
            values["read"] = reference.get(off)
            divergent.append((p, off, values))
    return divergent, checked


def longest_gaps(acks: Iterable[Ack], partitions: Iterable[int], start: float, end: float) -> dict:
    """partition -> (longest seconds without an acknowledgement, when that gap began, in
    seconds after ``start``), over the load window [start, end]."""
    times: dict[int, list] = {p: [] for p in partitions}
    for a in acks:
        if start <= a.t <= end:
            times.setdefault(a.partition, []).append(a.t)
    out = {}
    for p, ts in times.items():
        edges = [start, *sorted(ts), end]
        gap, at = max((b - a, a) for a, b in itertools.pairwise(edges))
        out[p] = (gap, at - start)
    return out


def check(acks: list, indeterminate: list, consumed: dict[int, dict[int, bytes]], hw: dict[int, int],
          replicas: dict, *, idempotent, load_window: tuple[float, float], producer_epoch=None) -> Verdict:
    """The whole verdict. ``idempotent(value) -> bool``: whether the value's producer had
    ``enable.idempotence`` on (its duplicates are anomalies). ``producer_epoch(partition,
    offset) -> (producer id, epoch)`` from the batch header, if known: idempotent duplicates
    whose copies all differ in it are the client's epoch bumps, not the broker's fault."""
    v = Verdict(acked=len(acks))
    where = locate(consumed)
    v.records_read = sum(len(r) for r in consumed.values())
    v.lost = find_lost(acks, consumed, where)
    v.divergent, v.replica_records_checked = find_divergent(hw, consumed, replicas)
    sent = {a.value for a in acks} | {i.value for i in indeterminate}
    for value, places in where.items():
        if len(places) > 1:
            places = sorted(places)
            if not idempotent(value):
                v.duplicates.append((value, places))
            elif producer_epoch is not None and _distinct(producer_epoch(p, off) for p, off in places):
                v.epoch_bump_duplicates.append((value, places))
            else:
                v.idempotent_duplicates.append((value, places))
        if value not in sent:
            v.unknown.extend((p, off, value) for p, off in places)
    for i in indeterminate:
        if i.value in where:
            v.indeterminate_found += 1
        else:
            v.indeterminate_missing += 1
    v.unavailable = longest_gaps(acks, consumed.keys() | hw.keys(), *load_window)
    return v


def _distinct(epochs) -> bool:
    seen = list(epochs)
    return None not in seen and len(set(seen)) == len(seen)


def _show(value) -> str:
    return "-" if value is None else value.decode("utf-8", "replace")


def markdown(v: Verdict, *, title: str, faults: dict, extra_rows=(), examples: int = 5) -> str:
    """The summary table, then a few examples of each anomaly."""
    worst = max(v.unavailable.items(), key=lambda kv: kv[1][0], default=(None, (0.0, 0.0)))
    lines = [f"## {title}", "", "| figure | value |", "|---|---:|",
             f"| acknowledged writes | {v.acked:,} |",
             f"| lost (acknowledged, missing or at another offset) | **{len(v.lost)}** |",
             f"| divergent offsets (replicas disagree below the HW) | **{len(v.divergent)}** |",
             f"| duplicates (idempotent producers, same producer epoch) | {len(v.idempotent_duplicates)} |",
             f"| duplicates (idempotent producers, resent after an epoch bump) | {len(v.epoch_bump_duplicates)} |",
             f"| duplicates (producers without idempotence) | {len(v.duplicates)} |",
             f"| values nobody sent | {len(v.unknown)} |",
             f"| indeterminate writes found / missing | {v.indeterminate_found:,} / {v.indeterminate_missing:,} |",
             f"| records read back / replica records compared | {v.records_read:,} / {v.replica_records_checked:,} |",
             f"| faults | {sum(faults.values())}: " + ", ".join(f"{n} {k}" for k, n in sorted(faults.items())) + " |",
             f"| longest unavailability | {worst[1][0]:.1f} s (partition {worst[0]}) |",
             *(f"| {k} | {val} |" for k, val in extra_rows), "",
             "| partition | longest without an ack | starting at |", "|---:|---:|---:|",
             *(f"| {p} | {g:.1f} s | {at:.0f} s |" for p, (g, at) in sorted(v.unavailable.items())), ""]
    for name, items, fmt in (
            ("lost", v.lost, lambda x: f"p{x[0]} @{x[1]} {_show(x[2])!r} found at {x[3]}"),
            ("divergent", v.divergent,
             lambda x: f"p{x[0]} @{x[1]} " + ", ".join(f"{n}={_show(val)!r}" for n, val in x[2].items())),
            ("idempotent duplicates", v.idempotent_duplicates, lambda x: f"{_show(x[0])!r} at {x[1]}"),
            ("unknown", v.unknown, lambda x: f"p{x[0]} @{x[1]} {_show(x[2])!r}")):
        if items:
            lines.append(f"**{name}** (first {min(examples, len(items))} of {len(items)}):")
            lines.extend(f"- {fmt(x)}" for x in items[:examples])
            lines.append("")
    lines.append("Verdict: **" + ("PASS" if v.ok else "FAIL") + "**")
    return "\n".join(lines)
