"""Leader-epoch cache: both EpochTable implementations against a naive model written from
Kafka's ``LeaderEpochFileCache`` (a sorted map walked linearly), and the checkpoint file."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.errors import StateFileError
from kraft.log import LeaderEpochCache, LeaderEpochCheckpointFile
from kraft.log import _pure_log as pure
from kraft.log import hotloops
from kraft.types import OffsetAndEpoch

try:
    IMPLS = [pure, hotloops.implementation("native")]
except ImportError:  # pragma: no cover
    IMPLS = [pure]


class NaiveEpochCache:
    """Kafka's rules, written as plainly as possible over a dict ``epoch -> start``."""

    def __init__(self):
        self.epochs: dict[int, int] = {}

    def items(self):
        return sorted(self.epochs.items())

    def assign(self, epoch, start):
        items = self.items()
        if items and items[-1][0] == epoch and items[-1][1] <= start:
            return False
        for e, s in reversed(items):  # maybeTruncateNonMonotonicEntries
            if e >= epoch or s >= start:
                del self.epochs[e]
            else:
                break
        self.epochs[epoch] = start
        return True

    def truncate_from_end(self, end):
        items = self.items()
        if not items or items[-1][1] < end:
            return False
        for e, s in items:
            if s >= end:
                del self.epochs[e]
        return True

    def truncate_from_start(self, start):
        removed = [(e, s) for e, s in self.items() if s <= start]
        if not removed:
            return False
        for e, _ in removed:
            del self.epochs[e]
        last_epoch = removed[-1][0]
        self.epochs[last_epoch] = start
        return removed != [(last_epoch, start)]

    def end_offset_for(self, requested, leo):
        items = self.items()
        if requested < 0 or not items:
            return -1, -1
        if items[-1][0] == requested:
            return requested, leo
        higher = [(e, s) for e, s in items if e > requested]
        if not higher:
            return -1, -1
        floor = [(e, s) for e, s in items if e <= requested]
        if not floor:
            return requested, higher[0][1]
        return floor[-1][0], higher[0][1]

    def epoch_for_offset(self, offset):
        previous = -1
        for e, s in self.items():
            if s == offset:
                return e
            if s > offset:
                return previous
            previous = e
        return previous


ops = st.lists(st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
    st.tuples(st.just("end"), st.integers(0, 70)),
    st.tuples(st.just("start"), st.integers(0, 70)),
    st.tuples(st.just("batches"), st.lists(st.tuples(st.integers(-1, 12), st.integers(0, 60)), max_size=6)),
), max_size=40)


@settings(max_examples=300, deadline=None)
@given(ops, st.lists(st.integers(-2, 14), min_size=1, max_size=8), st.lists(st.integers(0, 80), min_size=1, max_size=8))
def test_epoch_table_matches_naive_model(operations, epochs_asked, offsets_asked):
    for impl in IMPLS:
        model, table = NaiveEpochCache(), impl.EpochTable()
        for op in operations:
            if op[0] == "assign":
                assert table.assign(op[1], op[2]) == model.assign(op[1], op[2])
            elif op[0] == "end":
                table.truncate_from_end(op[1])
                model.truncate_from_end(op[1])
            elif op[0] == "start":
                table.truncate_from_start(op[1])
                model.truncate_from_start(op[1])
            else:
                import numpy as np

                ep = np.array([b[0] for b in op[1]], np.int32)
                base = np.array(sorted(b[1] for b in op[1]), np.int64)
                table.assign_batches(ep, base)
                latest = model.items()[-1][0] if model.epochs else -1
                for e, s in zip(ep.tolist(), base.tolist()):
                    if e >= 0 and e > latest:
                        model.assign(e, s)
                        latest = e
            assert table.entries() == model.items()
        leo = (model.items()[-1][1] + 5) if model.epochs else 0
        for e in epochs_asked:
            assert table.end_offset_for(e, leo) == model.end_offset_for(e, leo), e
        for o in offsets_asked:
            assert table.epoch_for_offset(o) == model.epoch_for_offset(o), o


def test_kafka_end_offset_examples():
    """Cases from Kafka's LeaderEpochFileCacheTest, on epochs 2@6, 4@11, 6@15 (LEO 20)."""
    cache = LeaderEpochCache(None, [(2, 6), (4, 11), (6, 15)])
    assert cache.end_offset_for_epoch(6, 20) == OffsetAndEpoch(20, 6)  # latest epoch → log end offset
    assert cache.end_offset_for_epoch(4, 20) == OffsetAndEpoch(15, 4)
    assert cache.end_offset_for_epoch(5, 20) == OffsetAndEpoch(15, 4)  # unknown epoch → largest below
    assert cache.end_offset_for_epoch(1, 20) == OffsetAndEpoch(6, 1)  # below every epoch → first start
    assert cache.end_offset_for_epoch(7, 20) == OffsetAndEpoch(-1, -1)  # above the latest → undefined
    assert cache.end_offset_for_epoch(-1, 20) == OffsetAndEpoch(-1, -1)
    assert cache.epoch_for_offset(5) is None
    assert cache.epoch_for_offset(11) == 4
    assert cache.epoch_for_offset(14) == 4
    assert cache.epoch_for_offset(100) == 6


def test_truncate_from_start_keeps_covering_epoch_at_new_start():
    cache = LeaderEpochCache(None, [(2, 6), (4, 11), (6, 15)])
    cache.truncate_from_start(12)
    assert cache.entries() == [(4, 12), (6, 15)]
    cache.truncate_from_end(15)
    assert cache.entries() == [(4, 12)]


def test_assign_rejects_negative_values():
    cache = LeaderEpochCache(None)
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(1, -5)


def test_checkpoint_file_is_kafkas_text_format(tmp_path):
    cache = LeaderEpochCache(str(tmp_path), [(0, 0), (3, 100), (7, 2500)])
    cache.write()
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n3 100\n7 2500\n"
    assert LeaderEpochCheckpointFile(str(tmp_path / "leader-epoch-checkpoint")).read() == cache.entries()
    assert not os.path.exists(tmp_path / "leader-epoch-checkpoint.tmp")


@pytest.mark.parametrize("text, complaint", [
    ("1\n0\n", "version"),
    ("0\n2\n0 0\n", "expected 2 entries"),
    ("0\nx\n", "malformed"),
    ("0\n1\n0 0 0\n", "malformed"),
    ("0\n1\n0 zero\n", "malformed"),
    ("0\n2\n3 10\n2 20\n", "not increasing"),
    ("0\n1\n-1 10\n", "out of range"),
])
def test_malformed_checkpoint_names_the_file(tmp_path, text, complaint):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(StateFileError) as info:
        LeaderEpochCheckpointFile(str(path)).read()
    assert str(path) in str(info.value) and complaint in str(info.value)


def test_empty_checkpoint_file_has_no_entries(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("")  # Kafka creates the file before its first write
    assert LeaderEpochCheckpointFile(str(path)).read() == []


@settings(max_examples=200, deadline=None)
@given(ops)
def test_the_cached_latest_epoch_follows_every_change(operations):
    # LeaderEpochCache keeps latest_epoch as a field (a fetcher reads it per partition per
    # request): after any sequence of changes it must be the table's latest entry's epoch.
    import numpy as np

    cache = LeaderEpochCache(None, [(1, 0), (3, 10)])
    assert cache.latest_epoch == 3
    for op in operations:
        if op[0] == "assign":
            cache.assign(op[1], op[2])
        elif op[0] == "end":
            cache.truncate_from_end(op[1])
        elif op[0] == "start":
            cache.truncate_from_start(op[1])
        else:
            cache.assign_batches(np.array([b[0] for b in op[1]], np.int32),
                                 np.array(sorted(b[1] for b in op[1]), np.int64))
        latest = cache.latest_entry()
        assert cache.latest_epoch == (None if latest is None else latest[0])
    cache.clear()
    assert cache.latest_epoch is None
