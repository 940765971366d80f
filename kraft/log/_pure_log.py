"""Pure-Python twin of ``kraft._native._log``: batch location, index building and lookup,
and the leader-epoch table, with the same API and results.

Selected by ``kraft.log.hotloops`` when ``KRAFT_NO_EXTENSIONS=1`` or the extension is not
built. Works on buffers and numpy arrays only; no I/O, no knowledge of files.
"""

from __future__ import annotations

import bisect
import struct

import numpy as np

FOUND, NOT_FOUND, CORRUPT = 0, 1, 2
_LOG_OVERHEAD = 12
_MIN_LENGTH = 49
_LENGTH = struct.Struct(">i")
_BASE = struct.Struct(">q")
_LAST_DELTA = struct.Struct(">i")


def find_batch(buf, position: int, target: int):
    end = len(buf)
    while end - position >= _LOG_OVERHEAD:
        (length,) = _LENGTH.unpack_from(buf, position + 8)
        if length < _MIN_LENGTH:
            return CORRUPT, position
        if length + _LOG_OVERHEAD > end - position:
            break
        last = _BASE.unpack_from(buf, position)[0] + _LAST_DELTA.unpack_from(buf, position + 23)[0]
        if last >= target:
            return FOUND, position
        position += length + _LOG_OVERHEAD
    return NOT_FOUND, position


def whole_batches(buf, position: int, limit: int):
    n = len(buf)
    stop = n if limit > n - position else position + limit
    first_size = -1
    if n - position >= _LOG_OVERHEAD:
        (length,) = _LENGTH.unpack_from(buf, position + 8)
        first_size = -2 if length < _MIN_LENGTH else length + _LOG_OVERHEAD
    while stop - position >= _LOG_OVERHEAD:
        (length,) = _LENGTH.unpack_from(buf, position + 8)
        if length < _MIN_LENGTH or length + _LOG_OVERHEAD > stop - position:
            break
        position += length + _LOG_OVERHEAD
    return position, first_size


def floor_index(keys, n: int, target: int) -> int:
    if n <= 0:
        return -1
    return int(np.searchsorted(keys[:n], target, side="right")) - 1


def order_violation(base_offsets, last_offsets, epochs, expected_first: int, previous_epoch: int):
    expect, epoch = expected_first, previous_epoch
    for i, (base, last, e) in enumerate(zip(base_offsets.tolist(), last_offsets.tolist(), epochs.tolist())):
        if (i > 0 or expected_first >= 0) and base != expect:
            return i, 1
        if e < epoch:
            return i, 2
        epoch, expect = e, last + 1
    return -1, 0


def _first_bad(bad) -> int:
    return int(np.argmax(bad)) if bad.any() else -1


def check_offset_index(rel, pos, n: int, log_size: int) -> int:
    rel, pos = np.asarray(rel[:n], np.int64), np.asarray(pos[:n], np.int64)
    bad = (rel < 0) | (pos < 0) | (pos >= log_size)
    bad[1:] |= (rel[1:] <= rel[:-1]) | (pos[1:] <= pos[:-1])
    return _first_bad(bad)


def check_time_index(ts, rel, n: int, max_rel: int) -> int:
    ts, rel = np.asarray(ts[:n], np.int64), np.asarray(rel[:n], np.int64)
    bad = (rel < 0) | (rel > max_rel)
    bad[1:] |= (ts[1:] < ts[:-1]) | (rel[1:] < rel[:-1])
    return _first_bad(bad)


class IndexBuilder:
    """See ``kraft._native._log.IndexBuilder``."""

    def __init__(self, base_offset: int, interval: int):
        self.base_offset = base_offset
        self.interval = interval
        self.bytes_since_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.last_time_entry = -1

    def add(self, positions, last_offsets, max_timestamps, sizes, shift: int = 0):
        rel, pos, tts, trel = [], [], [], []
        for p, last, mts, size in zip(positions.tolist(), last_offsets.tolist(),
                                      max_timestamps.tolist(), sizes.tolist()):
            if mts > self.max_timestamp:
                self.max_timestamp = mts
                self.offset_of_max_timestamp = last
            if self.bytes_since_entry > self.interval:
                rel.append(last - self.base_offset)
                pos.append(p + shift)
                if self.max_timestamp > self.last_time_entry:
                    tts.append(self.max_timestamp)
                    trel.append(self.offset_of_max_timestamp - self.base_offset)
                    self.last_time_entry = self.max_timestamp
                self.bytes_since_entry = 0
            self.bytes_since_entry += size
        return (np.array(rel, np.int32), np.array(pos, np.int32),
                np.array(tts, np.int64), np.array(trel, np.int32))

    def add_one(self, position: int, last_offset: int, max_timestamp: int, size: int):
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_entry <= self.interval:
            self.bytes_since_entry += size
            return None
        ts = trel = None
        if self.max_timestamp > self.last_time_entry:
            ts = self.max_timestamp
            trel = self.offset_of_max_timestamp - self.base_offset
            self.last_time_entry = self.max_timestamp
        self.bytes_since_entry = size
        return last_offset - self.base_offset, position, ts, trel


class EpochTable:
    """See ``kraft._native._log.EpochTable``."""

    def __init__(self, entries=()):
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries:
            self.assign(epoch, start)

    def __len__(self):
        return len(self._epochs)

    def assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0 or epoch > 0x7FFFFFFF:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        e, s = self._epochs, self._starts
        if e and e[-1] == epoch and s[-1] <= start_offset:
            return False
        while e and (e[-1] >= epoch or s[-1] >= start_offset):
            e.pop()
            s.pop()
        e.append(epoch)
        s.append(start_offset)
        return True

    def assign_batches(self, epochs, base_offsets) -> bool:
        latest = self._epochs[-1] if self._epochs else -1
        changed = False
        for epoch, base in zip(epochs.tolist(), base_offsets.tolist()):
            if epoch >= 0 and epoch > latest:
                latest = epoch
                self.assign(epoch, base)
                changed = True
        return changed

    def truncate_from_end(self, end_offset: int) -> bool:
        n = bisect.bisect_left(self._starts, end_offset)
        changed = n != len(self._starts)
        del self._epochs[n:], self._starts[n:]
        return changed

    def truncate_from_start(self, start_offset: int) -> bool:
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i < 0 or (i == 0 and self._starts[0] == start_offset):
            return False
        del self._epochs[:i], self._starts[:i]
        self._starts[0] = start_offset
        return True

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()

    def end_offset_for(self, requested: int, log_end_offset: int):
        e, s = self._epochs, self._starts
        if requested < 0 or not e:
            return -1, -1
        if e[-1] == requested:
            return requested, log_end_offset
        f = bisect.bisect_right(e, requested) - 1
        if f == len(e) - 1:
            return -1, -1
        if f < 0:
            return requested, s[0]
        return e[f], s[f + 1]

    def epoch_for_offset(self, offset: int) -> int:
        i = bisect.bisect_right(self._starts, offset) - 1
        return -1 if i < 0 else self._epochs[i]

    def latest(self):
        return (self._epochs[-1], self._starts[-1]) if self._epochs else None

    def earliest(self):
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def entry(self, epoch: int):
        i = bisect.bisect_right(self._epochs, epoch) - 1
        return (self._epochs[i], self._starts[i]) if i >= 0 and self._epochs[i] == epoch else None

    def previous_epoch(self, epoch: int) -> int:
        i = bisect.bisect_right(self._epochs, epoch - 1) - 1
        return self._epochs[i] if i >= 0 else -1

    def entries(self) -> list:
        return list(zip(self._epochs, self._starts))
