"""The verdict of ``tools/eos_checker.py``: what the input producer had acknowledged, what the
transactional copiers say they did (each transaction attempt and its outcome), and what
read_committed readers read from the output topic, checked for the anomalies Jepsen looks for
in transactions:

- **lost** inputs: an acknowledged input record with no copy in the committed output though
  the group's final committed offset is past it; *not reached* if the group never got that far
  (the copiers stuck: a liveness failure of the run, reported apart);
- **duplicates**: one input record (partition, offset) copied more than once into the committed
  output (two committed attempts, or one attempt's record written twice);
- **out of order**: within an output partition (the copy of the input partition of the same
  number) the input offsets must rise, and a copy must sit in its input's partition;
- **aborted reads**: a read_committed reader (the one reading during the run or the final one)
  read a record of an attempt the copier saw aborted (``abort_transaction`` returned): a copy
  is named by its attempt, so a later committed copy of the same input is not mistaken for it;
- **lost committed writes**: an attempt whose ``commit_transaction`` returned has fewer records
  in the final output than the copier produced in it;
- **offsets going backwards**: a transactional offset commit acknowledged after another one on
  the same partition was acknowledged (it started later) yet names a lower offset, or the
  group's final committed offset below an acknowledged one.

An attempt whose outcome the copier never learned (killed mid-commit, an abort that failed)
may have gone either way: its records may be read, and the duplicate and loss checks decide.

Pure functions over the parsed histories, so tests can feed them made-up ones."""

from __future__ import annotations

from dataclasses import dataclass, field

COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"


@dataclass(frozen=True)
class Copy:
    """One output record as a reader saw it: where it sits, the attempt that wrote it, and the
    input record it copies."""
    partition: int
    offset: int
    attempt: str
    in_partition: int
    in_offset: int
    value: bytes  # the input's value


@dataclass
class Attempt:
    """One transaction of one copier process: ``produced`` records, ``offsets`` (input partition
    -> next offset) sent to the transaction, and what the copier learned of its end."""
    name: str
    copier: str = ""
    produced: int = 0
    offsets: dict = field(default_factory=dict)
    outcome: str = UNKNOWN
    started: float = 0.0  # when commit_transaction was called
    acked: float = 0.0  # when it returned


def encode(attempt: str, in_partition: int, in_offset: int, value: bytes) -> bytes:
    return f"{attempt}|{in_partition}|{in_offset}|".encode() + value


def decode(partition: int, offset: int, raw: bytes) -> Copy:
    attempt, p, o, value = raw.split(b"|", 3)
    return Copy(partition, offset, attempt.decode(), int(p), int(o), value)


@dataclass
class EosVerdict:
    acked: int = 0
    final_reads: int = 0
    live_reads: int = 0
    attempts: dict = field(default_factory=dict)  # outcome -> count
    lost: list = field(default_factory=list)
    not_reached: list = field(default_factory=list)
    duplicates: list = field(default_factory=list)
    out_of_order: list = field(default_factory=list)
    aborted_reads: list = field(default_factory=list)
    lost_committed: list = field(default_factory=list)
    backwards: list = field(default_factory=list)

    ANOMALIES = ("lost", "not_reached", "duplicates", "out_of_order", "aborted_reads", "lost_committed", "backwards")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, k) for k in self.ANOMALIES)

    def summary(self) -> dict:
        return {"acked": self.acked, "final_reads": self.final_reads, "live_reads": self.live_reads,
                "attempts": self.attempts, "anomalies": {k: len(getattr(self, k)) for k in self.ANOMALIES}}


def verdict(acks, attempts: dict, live_reads, final_reads, final_committed: dict | None = None,
            final_at: float = float("inf")) -> EosVerdict:
    """``acks``: (partition, offset, value) of the input; ``attempts``: name -> Attempt;
    ``live_reads``/``final_reads``: Copy lists in each reader's order; ``final_committed``:
    the group's committed offsets (input partition -> offset) read at ``final_at``."""
    v = EosVerdict(acked=len(acks), final_reads=len(final_reads), live_reads=len(live_reads))
    for a in attempts.values():
        v.attempts[a.outcome] = v.attempts.get(a.outcome, 0) + 1
    copies: dict[tuple, list] = {}
    values = set()
    for c in final_reads:
        copies.setdefault((c.in_partition, c.in_offset), []).append(c)
        values.add(c.value)
    for (p, o), cs in sorted(copies.items()):
        if len(cs) > 1:
            v.duplicates.append(f"input {p}:{o} copied {len(cs)} times: " +
                                ", ".join(f"{c.partition}:{c.offset} by {c.attempt}" for c in cs))
    for p, o, value in acks:
        if value not in values:
            behind = final_committed is not None and p in final_committed and final_committed[p] <= o
            (v.not_reached if behind else v.lost).append(f"{value.decode(errors='replace')} at input {p}:{o}")
    _order(final_reads, v)
    for who, reads in (("live", live_reads), ("final", final_reads)):
        for c in reads:
            a = attempts.get(c.attempt)
            if a is not None and a.outcome == ABORTED:
                v.aborted_reads.append(f"{who} reader read {c.partition}:{c.offset} (input {c.in_partition}:"
                                       f"{c.in_offset}) of aborted attempt {c.attempt}")
    written: dict[str, int] = {}
    for c in final_reads:
        written[c.attempt] = written.get(c.attempt, 0) + 1
    for a in attempts.values():
        if a.outcome == COMMITTED and written.get(a.name, 0) < a.produced:
            v.lost_committed.append(f"attempt {a.name} committed {a.produced} records; "
                                    f"{written.get(a.name, 0)} in the output")
    _offsets(attempts, final_committed or {}, final_at, v)
    return v


def _order(final_reads, v: EosVerdict) -> None:
    last: dict[int, Copy] = {}
    for c in sorted(final_reads, key=lambda c: (c.partition, c.offset)):
        if c.in_partition != c.partition:
            v.out_of_order.append(f"output {c.partition}:{c.offset} copies input partition {c.in_partition}")
        prev = last.get(c.partition)
        if prev is not None and c.in_offset <= prev.in_offset:
            v.out_of_order.append(f"output {c.partition}:{c.offset} copies input offset {c.in_offset} after "
                                  f"{prev.partition}:{prev.offset} copied {prev.in_offset}")
        last[c.partition] = c


def _offsets(attempts: dict, final_committed: dict, final_at: float, v: EosVerdict) -> None:
    by_partition: dict[int, list] = {}
    for a in attempts.values():
        if a.outcome == COMMITTED:
            for p, offset in a.offsets.items():
                by_partition.setdefault(p, []).append((a, offset))
    for p, cs in by_partition.items():
        done = sorted(cs, key=lambda x: x[0].acked)
        best, i = None, 0  # the highest offset among commits acknowledged before each start
        for a, offset in sorted(cs, key=lambda x: x[0].started):
            while i < len(done) and done[i][0].acked < a.started:
                if best is None or done[i][1] > best[1]:
                    best = done[i]
                i += 1
            if best is not None and offset < best[1]:
                v.backwards.append(f"partition {p}: {a.name} committed offset {offset} (started {a.started:.3f}) "
                                   f"after {best[0].name}'s {best[1]} was acknowledged ({best[0].acked:.3f})")
        top = max((x for x in cs if x[0].acked < final_at), key=lambda x: x[1], default=None)
        if top is not None and p in final_committed and final_committed[p] < top[1]:
            v.backwards.append(f"partition {p}: final committed offset {final_committed[p]} below "
                               f"{top[0].name}'s acknowledged {top[1]}")


def markdown(v: EosVerdict, *, title: str, faults: dict, extra_rows=()) -> str:
    rows = [("acknowledged input records", v.acked), ("output records read at the end", v.final_reads),
            ("output records read during the run", v.live_reads),
            ("transaction attempts", ", ".join(f"{k} {n}" for k, n in sorted(v.attempts.items())) or "none"),
            ("**lost** (acked input, no committed copy)", len(v.lost)),
            ("**not reached** (acked input, the group never got there)", len(v.not_reached)),
            ("**duplicates** (input copied twice)", len(v.duplicates)),
            ("**out of order** (per input partition)", len(v.out_of_order)),
            ("**aborted reads**", len(v.aborted_reads)),
            ("**lost committed writes**", len(v.lost_committed)),
            ("**offsets going backwards**", len(v.backwards)),
            ("faults", ", ".join(f"{k} {n}" for k, n in sorted(faults.items())) or "none")]
    rows += list(extra_rows)
    lines = [f"## {title}", "", f"Verdict: **{'PASS' if v.ok else 'FAIL'}**", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {val} |" for k, val in rows]
    for name in v.ANOMALIES:
        found = getattr(v, name)
        if found:
            lines += ["", f"{name} (first 5 of {len(found)}):"] + [f"- {x}" for x in found[:5]]
    return "\n".join(lines) + "\n"
