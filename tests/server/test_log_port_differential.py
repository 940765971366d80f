"""Differential test of the two log-port implementations: the same random sequence of port
calls (leader and follower appends, corrupt and partial fetches, truncations, high
watermark moves, flushes, snapshots, prefix deletes, snapshot installs) goes to
``InMemoryLog`` and ``MetadataLog``; after every call both must have done the same thing
(same result or same kind of error) and look the same through the port.

Known, separately reported disagreements are steered around (snapshots are taken on batch
boundaries; an installed snapshot is not installed twice) so that new ones stand out."""

from __future__ import annotations

import random

import pytest

from kraft.errors import CorruptRecordError, InvalidRecordError, KraftError
from kraft.types import OffsetAndEpoch

from log_port_helpers import batch, close_log, open_log, summary, write_snapshot


def _outcome(fn):
    try:
        return ("ok", fn())
    except (CorruptRecordError, InvalidRecordError):
        return ("rejected", None)
    except RuntimeError:
        return ("refused", None)
    except KraftError as exc:
        return (type(exc).__name__, None)


class Model:
    """What the test knows about the log, to generate calls that mean something."""

    def __init__(self):
        self.batches: list[tuple[int, int, int]] = []  # (base, next, epoch) as appended
        self.epoch = 1
        self.hw = 0
        self.start = 0

    def end(self) -> int:
        return self.batches[-1][1] if self.batches else self.start

    def boundaries(self) -> list[tuple[int, int]]:
        """(offset, epoch of the record before it) for batch ends in (start, hw]."""
        return [(nxt, ep) for _, nxt, ep in self.batches if self.start < nxt <= self.hw]


def _step(rng: random.Random, m: Model, logs: list, history: list) -> None:
    end = m.end()
    kind = rng.choice(["leader", "leader", "follower", "follower", "bad", "partial", "truncate", "hw", "hw",
                       "flush", "snapshot", "install"])
    if kind == "leader":
        if rng.random() < 0.3:
            m.epoch += rng.randint(1, 2)
        n = rng.randint(1, 4)
        data = b"".join(batch(rng.randint(1, 5), -1) for _ in range(n))
        calls = [lambda lg, d=data, e=m.epoch: lg.append_as_leader(d, e)]
    elif kind in ("follower", "partial", "bad"):
        if rng.random() < 0.3:
            m.epoch += 1
        parts, base = [], end
        for _ in range(rng.randint(1, 3)):
            size = rng.randint(1, 5)
            parts.append(batch(size, m.epoch, base=base))
            base += size
        data = b"".join(parts)
        if kind == "partial":
            data = data + batch(3, m.epoch, base=base)[: rng.randint(1, 60)]
        elif kind == "bad":
            flaw = rng.choice(["crc", "gap", "epoch"])
            if flaw == "crc":
                buf = bytearray(data)
                buf[rng.randrange(61, len(buf))] ^= 0x40
                data = bytes(buf)
            elif flaw == "gap":
                data = data + batch(1, m.epoch, base=base + 1)
            else:
                data = data + batch(1, max(0, m.epoch - 1), base=base) if m.epoch > 0 else data + b"\x00"
        calls = [lambda lg, d=data: lg.append_as_follower(d)]
    elif kind == "truncate":
        target = rng.randint(max(m.start, m.hw - 2), end + 1)  # below start: see the last test
        calls = [lambda lg, t=target: lg.truncate_to(t)]
    elif kind == "hw":
        target = rng.randint(m.hw, end + 1)
        calls = [lambda lg, t=target: lg.update_high_watermark(t)]
    elif kind == "flush":
        calls = [lambda lg, e=end: lg.flush(e)]
    elif kind == "snapshot":
        spots = [s for s in m.boundaries() if all(lg.read_snapshot(OffsetAndEpoch(*s)) is None for lg in logs)]
        if not spots:
            return
        offset, epoch = rng.choice(spots)
        delete = rng.random() < 0.6
        calls = [lambda lg, o=offset, e=epoch: write_snapshot(lg, o, e),
                 (lambda lg, o=offset, e=epoch: lg.delete_before_snapshot(OffsetAndEpoch(o, e))) if delete else None]
    else:  # install: a snapshot from the leader beyond our log, as a follower after FetchSnapshot
        m.epoch += rng.randint(0, 1)
        offset = end + rng.randint(1, 20)
        calls = [lambda lg, o=offset, e=m.epoch: write_snapshot(lg, o, e),
                 lambda lg: lg.truncate_to_latest_snapshot()]
    for call in filter(None, calls):
        outcomes = [_outcome(lambda lg=lg: call(lg)) for lg in logs]
        history.append((kind, outcomes))
        assert outcomes[0] == outcomes[1], f"different outcomes for {kind}: {history[-12:]}"
        views = [(summary(lg), lg.flushed_offset()) for lg in logs]
        assert views[0] == views[1], f"logs differ after {kind}: {history[-12:]}"
    # Re-read the model from the (agreeing) logs.
    lg = logs[0]
    m.start, m.hw = lg.start_offset(), lg.high_watermark
    m.batches = [(b[0], b[1] + 1, b[2]) for b in summary(lg)["batches"]]
    m.epoch = max(m.epoch, lg.last_fetched_epoch())


@pytest.mark.parametrize("seed", range(24))
def test_both_implementations_agree_on_random_call_sequences(tmp_path, seed):
    rng = random.Random(seed)
    logs = [open_log("memory", tmp_path), open_log("disk", tmp_path, segment_bytes=rng.choice([300, 2000, 1 << 20]))]
    try:
        m, history = Model(), []
        for _ in range(60):
            _step(rng, m, logs, history)
    finally:
        close_log(logs[1])


def _truncate_below_start_outcome(log):
    log.append_as_leader(batch(5, 1), 1)
    write_snapshot(log, 20, 1)
    assert log.truncate_to_latest_snapshot()  # start = end = 20; the high watermark is still 0
    return _outcome(lambda: log.truncate_to(10)), log.start_offset(), log.end_offset()


def test_truncating_below_the_log_start_behaves_the_same_in_both(tmp_path):
    mem, disk = open_log("memory", tmp_path), open_log("disk", tmp_path)
    try:
        assert _truncate_below_start_outcome(mem) == _truncate_below_start_outcome(disk)
    finally:
        close_log(disk)
