"""The verdict of ``tools/group_checker.py``: what producers had acknowledged, what a group of
consumers read and committed, and what a watcher saw committed, checked for

- **unconsumed**: an acknowledged record no consumer ever read (at-least-once broken), split
  into *skipped* (the group's final committed offset is past it: the group moved on without it)
  and *not reached* (the group never caught up to it: a liveness failure of the run);
- **order**: within one consumer's uninterrupted ownership of a partition, offsets read must
  rise one by one (a repeat or a step back is out of order; a jump is a *gap*: records skipped
  by that owner);
- **commits going backwards**: a commit acknowledged after another one on the same partition
  was acknowledged (it started later) yet names a lower offset: a zombie's commit accepted, or
  a commit lost across a coordinator move;
- **lost commits**: the watcher's OffsetFetch, started after a commit was acknowledged, returned
  a lower offset: an acknowledged commit not kept.

Pure functions over the parsed histories, so tests can feed them made-up ones."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Read:
    consumer: str
    partition: int
    offset: int
    value: bytes
    t: float
    assignment: int  # the consumer's ownership period of this partition (rises on every assign)


@dataclass(frozen=True)
class Commit:
    consumer: str
    partition: int
    offset: int
    started: float
    acked: float


@dataclass(frozen=True)
class Observed:
    """The watcher's OffsetFetch: ``offsets`` (partition -> committed) as of a call started at ``started``."""
    started: float
    offsets: dict


@dataclass
class GroupVerdict:
    acked: int = 0
    reads: int = 0
    duplicates: int = 0  # records read more than once (at-least-once allows it; counted)
    skipped: list = field(default_factory=list)
    not_reached: list = field(default_factory=list)
    out_of_order: list = field(default_factory=list)
    gaps: list = field(default_factory=list)
    backwards: list = field(default_factory=list)
    lost_commits: list = field(default_factory=list)
    commits: int = 0
    observations: int = 0
    assignments: int = 0

    @property
    def ok(self) -> bool:
        return not (self.skipped or self.not_reached or self.out_of_order or self.gaps or self.backwards
                    or self.lost_commits)


def verdict(acks, reads, commits, observed, final_committed: dict) -> GroupVerdict:
    """``acks``: (partition, offset or -1, value); ``final_committed``: partition -> offset."""
    v = GroupVerdict(acked=len(acks), reads=len(reads), commits=len(commits), observations=len(observed))
    seen_values: dict[bytes, int] = {}
    for r in reads:
        seen_values[r.value] = seen_values.get(r.value, 0) + 1
    v.duplicates = sum(n - 1 for n in seen_values.values() if n > 1)
    for partition, offset, value in acks:
        if value in seen_values:
            continue
        end = final_committed.get(partition, -1)
        where = f"{value.decode(errors='replace')} at {partition}:{offset}"
        (v.skipped if 0 <= offset < end else v.not_reached).append(where)
    _order(reads, v)
    _commits(commits, observed, v)
    return v


def _order(reads, v: GroupVerdict) -> None:
    last: dict[tuple, int] = {}  # (consumer, partition, assignment) -> last offset read
    for r in reads:  # in each consumer's own order (the file's)
        key = (r.consumer, r.partition, r.assignment)
        prev = last.get(key)
        if prev is None:
            v.assignments += 1
        elif r.offset <= prev:
            v.out_of_order.append(f"{r.consumer} read {r.partition}:{r.offset} after {r.partition}:{prev}")
        elif r.offset != prev + 1:
            v.gaps.append(f"{r.consumer} read {r.partition}:{r.offset} right after {r.partition}:{prev}")
        last[key] = r.offset


def _commits(commits, observed, v: GroupVerdict) -> None:
    by_partition: dict[int, list] = {}
    for c in commits:
        by_partition.setdefault(c.partition, []).append(c)
    for p, cs in by_partition.items():
        cs.sort(key=lambda c: c.acked)
        best = None  # the highest offset among commits acknowledged so far, as of each start
        done = sorted(cs, key=lambda c: c.acked)
        i = 0
        for c in sorted(cs, key=lambda c: c.started):
            while i < len(done) and done[i].acked < c.started:
                if best is None or done[i].offset > best.offset:
                    best = done[i]
                i += 1
            if best is not None and c.offset < best.offset:
                v.backwards.append(f"partition {p}: {c.consumer} committed {c.offset} (started {c.started:.3f}) after "
                                   f"{best.consumer}'s {best.offset} was acknowledged ({best.acked:.3f})")
    for obs in observed:
        for p, offset in obs.offsets.items():
            before = [c for c in by_partition.get(p, ()) if c.acked < obs.started]
            if before:
                top = max(before, key=lambda c: c.offset)
                if offset < top.offset:
                    v.lost_commits.append(f"partition {p}: committed offset read as {offset} at {obs.started:.3f}, "
                                          f"after {top.consumer}'s commit of {top.offset} was acknowledged "
                                          f"({top.acked:.3f})")


def markdown(v: GroupVerdict, *, title: str, faults: dict, extra_rows=()) -> str:
    rows = [("acknowledged records", v.acked), ("records read (all consumers)", v.reads),
            ("read more than once (allowed)", v.duplicates), ("ownership periods (consumer x partition)", v.assignments),
            ("commits acknowledged", v.commits), ("watcher reads of the committed offsets", v.observations),
            ("**skipped** (acked, never read, committed past)", len(v.skipped)),
            ("**not reached** (acked, never read, group behind)", len(v.not_reached)),
            ("**out of order** within an ownership", len(v.out_of_order)),
            ("**gaps** within an ownership", len(v.gaps)),
            ("**commits going backwards**", len(v.backwards)),
            ("**acknowledged commits lost**", len(v.lost_commits)),
            ("faults", ", ".join(f"{k} {n}" for k, n in sorted(faults.items())) or "none")]
    rows += list(extra_rows)
    lines = [f"## {title}", "", f"Verdict: **{'PASS' if v.ok else 'FAIL'}**", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {val} |" for k, val in rows]
    for name in ("skipped", "not_reached", "out_of_order", "gaps", "backwards", "lost_commits"):
        found = getattr(v, name)
        if found:
            lines += ["", f"{name} (first 5 of {len(found)}):"] + [f"- {x}" for x in found[:5]]
    return "\n".join(lines) + "\n"
