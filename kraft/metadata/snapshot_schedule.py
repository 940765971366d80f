"""When a node takes a metadata snapshot: Kafka's two triggers, staggered so no two voters write
one at the same time (seed 004). Pure and sans-I/O: the caller passes the time, the committed
bytes since its last snapshot, and what it knows of other voters; the answer says whether to
start now and, if not, when to ask again (a timer deadline).

Triggers (Kafka's ``SnapshotGenerator``): ``metadata.log.max.record.bytes.between.snapshots``
committed bytes since the last snapshot, or ``metadata.log.max.snapshot.interval.ms`` since the
last one with at least one new record (0 turns the time trigger off).

Staggering, by turns: time is cut into turns of ``turn_ms``; turn ``k`` belongs to the voter at
index ``k mod n`` in the sorted voter ids. A voter with a due snapshot starts only in its own
turn, so two voters never *start* within the same turn, and a voter waits at most ``n`` turns.
Turns need no messages, only clocks that agree to well within a turn. A turn long enough to
write a snapshot (a million partitions take ~1-2 s here; default 10 s) means the previous
voter has normally finished too; when the caller does know that another voter is still writing
(``others_writing``), the voter skips its turn. Nothing waits forever: once the bytes since the
last snapshot reach ``overdue_factor`` x the limit, the voter starts at once, because an
unbounded log is worse than two snapshots at once. Observers (brokers) do not take turns.
This module must not read clocks, files or the network.
"""

from __future__ import annotations

from typing import NamedTuple

DEFAULT_MAX_BYTES = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
DEFAULT_MAX_INTERVAL_MS = 3_600_000  # metadata.log.max.snapshot.interval.ms
DEFAULT_TURN_MS = 10_000
_BYTES_KEY = "metadata.log.max.record.bytes.between.snapshots"
_INTERVAL_KEY = "metadata.log.max.snapshot.interval.ms"


class ScheduleConfig(NamedTuple):
    max_bytes: int = DEFAULT_MAX_BYTES
    max_interval_ms: int = DEFAULT_MAX_INTERVAL_MS
    turn_ms: int = DEFAULT_TURN_MS
    overdue_factor: float = 2.0

    @classmethod
    def from_config(cls, config, **overrides) -> "ScheduleConfig":
        """From Kafka's property names: a ``NodeConfig`` (its ``int(key)``) or a plain mapping."""
        if hasattr(config, "int"):
            get = config.int
        else:
            defaults = {_BYTES_KEY: DEFAULT_MAX_BYTES, _INTERVAL_KEY: DEFAULT_MAX_INTERVAL_MS}
            get = lambda key: int(config.get(key, defaults[key]))  # noqa: E731
        return cls(max_bytes=get(_BYTES_KEY), max_interval_ms=get(_INTERVAL_KEY), **overrides)


class ScheduleState(NamedTuple):
    """What the node knows of its own snapshots."""

    bytes_since_snapshot: int  # committed record bytes after the last snapshot (or load)
    last_snapshot_ms: int  # when the last snapshot started (or when the node started)
    writing: bool = False  # this node's own snapshot is still being written


class Decision(NamedTuple):
    start: bool
    reason: str
    retry_at_ms: int | None  # when to ask again if not starting (None: after the next commit)


def voter_index(voter_ids, local_id: int) -> int | None:
    """The node's place in the turn order, None for an observer."""
    ids = sorted(voter_ids)
    return ids.index(local_id) if local_id in ids else None


def _turn_start(now_ms: int, index: int, count: int, turn_ms: int) -> int:
    """Start of the first turn of voter ``index`` that contains or follows ``now_ms``."""
    turn = now_ms // turn_ms
    wait = (index - turn) % count
    return now_ms if wait == 0 else (turn + wait) * turn_ms


def decide(config: ScheduleConfig, state: ScheduleState, now_ms: int, *, index: int | None = None,
           voters: int = 1, others_writing: bool = False) -> Decision:
    """Whether to start a snapshot now. ``index``/``voters``: this voter's place among the
    voters (``voter_index``); None for an observer, which never waits for a turn."""
    if state.writing:
        return Decision(False, "writing", None)
    if state.bytes_since_snapshot <= 0:
        return Decision(False, "no new records", None)
    by_bytes = state.bytes_since_snapshot >= config.max_bytes
    due_at = state.last_snapshot_ms + config.max_interval_ms if config.max_interval_ms > 0 else None
    by_time = due_at is not None and now_ms >= due_at
    if not (by_bytes or by_time):
        return Decision(False, "not due", due_at)
    reason = "bytes" if by_bytes else "time"
    if state.bytes_since_snapshot >= config.overdue_factor * config.max_bytes:
        return Decision(True, f"{reason}, overdue", None)
    if index is None or voters <= 1:
        return Decision(True, reason, None)
    turn_ms = max(1, config.turn_ms)
    turn_start = _turn_start(now_ms, index, voters, turn_ms)
    if turn_start > now_ms:
        return Decision(False, f"{reason}, waiting for its turn", turn_start)
    if others_writing:
        next_turn = _turn_start(now_ms - now_ms % turn_ms + turn_ms, index, voters, turn_ms)
        return Decision(False, f"{reason}, another voter is writing", next_turn)
    return Decision(True, reason, None)
