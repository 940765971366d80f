"""One compaction pass over one log (Kafka's ``Cleaner.doClean``): build the dedupe map of the
dirty section, rewrite the log below its end into ``.cleaned`` files keeping the latest record
per key, and swap them in crash-safely (``segment_swap``).

Kafka's rules, kept here: never the active segment or anything at or above ``upper`` (the caller
passes min(high watermark, first segment younger than ``min.compaction.lag.ms``, active
segment's base)); records keep their offsets and batches keep BaseOffset, LastOffsetDelta,
the producer id, epoch and base sequence; a batch whose records all go is dropped, except the
last batch of a producer, which stays as an empty batch (its sequence numbers are still needed);
a tombstone is kept until the delete horizon of its batch (KIP-534: set to now +
``delete.retention.ms`` the first time the batch is cleaned, stored in BaseTimestamp with
attribute bit 6); records of aborted transactions are removed; control batches are kept.
Records without a key are removed (Kafka counts them as invalid in a compacted log).

Runs on a cleaner thread; the only step on the log's owner thread is the in-memory swap.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from dataclasses import dataclass, field

import numpy as np

from kraft import records
from kraft.log import compact_codec as codec
from kraft.log import files
from kraft.log.segment_swap import install_cleaned
from kraft.records import compression
from kraft.records import format as F
from kraft.records._pure_varint import decode_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte v2 header
#: Records per slice of the array work on a segment's records (each slice is well under a
#: millisecond of numpy work holding the GIL; a 1 GiB segment is ~10 M records).
CHUNK = 1 << 16
#: Batches handled in Python between two explicit GIL releases. A thread that wants the GIL
#: otherwise waits out the switch interval (5 ms) each time it asks for it, and the event loop
#: asks after every system call: a tick with three of them stalled 15 ms beside a cleaner.
YIELD_EVERY = 32


def _yield_gil() -> None:
    codec.release_gil()
_I16 = struct.Struct(">h")


class CleanAborted(Exception):
    """The log changed under the pass (truncated, trimmed, closed): nothing was swapped."""


@dataclass
class CleanStats:
    """What one pass read and wrote (Kafka's CleanerStats)."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_records: int = 0
    map_bytes_read: int = 0
    groups: int = 0
    seconds: float = 0.0
    end_offset: int = 0  # the first offset not cleaned: the next pass's first dirty offset
    passes_needed: bool = False  # the map filled before the dirty section ended


@dataclass
class _Header:
    base: int
    length: int
    epoch: int
    attributes: int
    last_delta: int
    base_ts: int
    max_ts: int
    pid: int
    pepoch: int
    seq: int
    count: int

    @classmethod
    def parse(cls, view, pos):
        (base, length, epoch, _magic, _crc, attributes, last_delta, base_ts, max_ts, pid, pepoch, seq,
         count) = _HEADER.unpack_from(view, pos)
        return cls(base, length, epoch, attributes, last_delta, base_ts, max_ts, pid, pepoch, seq, count)

    @property
    def last(self) -> int:
        return self.base + self.last_delta

    @property
    def control(self) -> bool:
        return bool(self.attributes & F.CONTROL_MASK)

    @property
    def transactional(self) -> bool:
        return bool(self.attributes & F.TRANSACTIONAL_MASK)

    @property
    def horizon(self) -> int | None:
        return self.base_ts if self.attributes & F.DELETE_HORIZON_MASK else None


#: Bytes of a segment a pass scans at a time (whole batches; one larger batch alone). The
#: pass's memory beyond the dedupe map is one window's batch fields and per-record arrays
#: (~56 bytes a record), whatever the segments' size: scanned whole, a 1 GiB segment of small
#: records held about half a GB of arrays. Kafka's cleaner reads through its fixed
#: ``log.cleaner.io.buffer.size`` buffers the same way.
WINDOW_BYTES = 1 << 20
_I32 = struct.Struct(">i")


def _field(buf, pos, offset: int, dtype: str):
    """The big-endian header field at ``offset`` of every batch starting at ``pos``, as int64."""
    width = np.dtype(dtype).itemsize
    return buf[pos[:, None] + np.arange(offset, offset + width)].view(dtype).ravel().astype(np.int64)


class _Window:
    """A run of whole batches of one segment: their header fields as arrays, and once
    ``scan`` ran, every record of its plain batches (no codec, not control) in ``rec``."""

    def __init__(self, view, buf, scan):
        self.view = view
        self.pos = np.asarray(scan.positions, np.int64)
        self.sizes = np.asarray(scan.sizes, np.int64)
        self.base = np.asarray(scan.base_offsets, np.int64)
        self.last = np.asarray(scan.last_offsets, np.int64)
        self.attributes = _field(buf, self.pos, 21, ">i2")
        self.base_ts = _field(buf, self.pos, 27, ">i8")
        self.pid = _field(buf, self.pos, 43, ">i8")
        self.count = _field(buf, self.pos, 57, ">i4")
        self.plain = (self.attributes & (F.CONTROL_MASK | F.COMPRESSION_MASK)) == 0
        self.rec: tuple = ()
        self.simple: list = []  # per batch: (lo, hi) of its records in ``rec``, or None
        self.sel = self.sel_hi = None

    def __len__(self) -> int:
        return len(self.pos)

    def headers(self) -> list:
        """(position, _Header) of each batch, in order."""
        out = []
        for k, p in enumerate(self.pos.tolist()):
            out.append((p, _Header.parse(self.view, p)))
            if k % YIELD_EVERY == 0:
                _yield_gil()
        return out

    def scan(self) -> None:
        n = len(self.pos)
        sel = np.flatnonzero(self.plain)
        counts = self.count[sel]
        self.rec = codec.scan_many(self.view, np.ascontiguousarray(self.pos[sel] + F.RECORDS),
                                   np.ascontiguousarray(self.pos[sel] + self.sizes[sel]),
                                   np.ascontiguousarray(counts), np.ascontiguousarray(self.base[sel]),
                                   np.ascontiguousarray(self.base_ts[sel]))
        bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        lo, hi = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        lo[sel], hi[sel] = bounds[:-1], bounds[1:]
        self.simple = [None if a < 0 else (a, b) for a, b in zip(lo.tolist(), hi.tolist())]
        _yield_gil()
        self.sel, self.sel_hi = sel, np.ascontiguousarray(bounds[1:])

    def batch_of(self, a: int, b: int):
        """The batch index of each of the records ``a:b`` of ``rec``."""
        return self.sel[np.searchsorted(self.sel_hi, np.arange(a, b), side="right")]


@dataclass
class _Segment:
    """A closed segment as the pass sees it: an own read-only map of the file, read a window
    at a time."""

    base: int
    path: str
    size: int
    live: object  # the LogSegment, to check it is still the log's at swap time
    next_base: int | None = None  # the next segment's base offset: every offset here is below it
    view: memoryview = None

    def open(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            self.view = memoryview(mmap.mmap(fd, self.size, prot=mmap.PROT_READ)) if self.size else memoryview(b"")
        finally:
            os.close(fd)

    def windows(self):
        """The segment's batches, ``WINDOW_BYTES`` at a time, each batch checked (CRC,
        framing, increasing offsets) as it is read; CleanAborted if the file is not whole."""
        buf = np.frombuffer(self.view, np.uint8)
        pos, prev_last = 0, None
        while pos < self.size:
            end = min(self.size, pos + WINDOW_BYTES)
            scan = records.scan_batches(self.view[:end], pos)
            if scan.valid_end == pos and end < self.size and self.size - pos >= F.LOG_OVERHEAD:
                # one batch larger than the window: read it alone
                end = min(self.size, pos + F.LOG_OVERHEAD + max(0, _I32.unpack_from(self.view, pos + 8)[0]))
                scan = records.scan_batches(self.view[:end], pos)
            torn = scan.error is not None and not (scan.error == "partial" and end < self.size)
            if torn or scan.valid_end == pos or (prev_last is not None and int(scan.base_offsets[0]) <= prev_last):
                raise CleanAborted(f"{self.path}: {scan.error or 'changed while read'}")
            prev_last = int(scan.last_offsets[-1])
            yield _Window(self.view, buf, scan)
            pos = scan.valid_end


def _records_block(view, pos: int, h: _Header):
    body = view[pos + F.RECORDS:pos + F.LOG_OVERHEAD + h.length]
    c = h.attributes & F.COMPRESSION_MASK
    return compression.decompress(c, bytes(body)) if c else body


def _scan(view, pos, h: _Header):
    return codec.scan_records(_records_block(view, pos, h), h.count, h.base, h.base_ts)


class _Transactions:
    """Aborted and undecided transactional batches, from the control markers in the range
    (Kafka reads its transaction index; the markers are the same facts), and the last batch
    of each producer (kept, possibly empty, for its sequence numbers): one pass over the
    batch headers."""

    def __init__(self, segments):
        self.aborted: set[int] = set()
        self.last_of_producer: dict[int, int] = {}
        open_batches: dict[int, list] = {}
        for seg in segments:
            for w in seg.windows():
                has_pid = w.pid >= 0
                if has_pid.any():
                    pids, bases = w.pid[has_pid][::-1], w.base[has_pid][::-1]
                    unique, first = np.unique(pids, return_index=True)  # the last batch of each
                    self.last_of_producer.update(zip(unique.tolist(), bases[first].tolist()))
                for k in np.flatnonzero(w.attributes & F.TRANSACTIONAL_MASK).tolist():
                    pos = int(w.pos[k])
                    h = _Header.parse(w.view, pos)
                    if not h.control:
                        open_batches.setdefault(h.pid, []).append(h.base)
                        continue
                    kind = _control_type(_records_block(w.view, pos, h))
                    done = open_batches.pop(h.pid, [])
                    if kind == F.ControlType.ABORT:
                        self.aborted.update(done)
                _yield_gil()
        self.undecided = {b for batches in open_batches.values() for b in batches}


def _control_type(block) -> int:
    scan = codec.scan_records(block, 1, 0, 0)
    start, end = int(scan[5][0]), int(scan[6][0])
    rec = bytes(block[start:end])
    # length varint, attributes, timestamp delta, offset delta, key length, then the key:
    # int16 version, int16 type
    _, p = decode_varint(rec, 0)
    _, p = decode_varint(rec, p + 1)
    _, p = decode_varint(rec, p)
    klen, p = decode_varint(rec, p)
    return _I16.unpack_from(rec, p + 2)[0] if klen >= 4 else -1


def build_offset_map(segments, first_dirty: int, upper: int, offset_map, txns: _Transactions, stats: CleanStats) -> int:
    """Put the keys of ``[first_dirty, upper)`` into ``offset_map``; returns the end of what fit
    (``upper``, or the offset after the last record put when the map filled). Any subset of
    the keys is safe: a record is only ever dropped for a later record of its key."""
    offset_map.clear()
    skipped = txns.aborted | txns.undecided
    skipped_bases = np.fromiter(skipped, np.int64, len(skipped)) if skipped else None
    for seg in segments:
        if seg.base >= upper or (seg.next_base is not None and seg.next_base <= first_dirty):
            continue
        for w in seg.windows():
            if w.last[-1] < first_dirty:
                continue
            if w.base[0] >= upper:
                break
            w.scan()
            bad = None
            if skipped_bases is not None:
                bad = ((w.attributes & F.TRANSACTIONAL_MASK) != 0) & np.isin(w.base, skipped_bases)
            if _put_window(w, first_dirty, upper, bad, offset_map, stats):
                return offset_map.latest_offset + 1
        stats.map_bytes_read += seg.size
    return upper


def _put_window(w: _Window, first_dirty: int, upper: int, bad, offset_map, stats) -> bool:
    """The window's keys into the map: the plain batches' in slices, then the compressed
    batches one by one. True when the map filled."""
    offsets, h1, h2, _ts, flags, _s, _e = w.rec
    for a in range(0, len(offsets), CHUNK):
        b = min(len(offsets), a + CHUNK)
        o = offsets[a:b]
        mask = (o >= first_dirty) & (o < upper)
        if bad is not None:
            mask &= ~bad[w.batch_of(a, b)]
        if mask.all():
            full = _put(offset_map, h1[a:b], h2[a:b], o, flags[a:b], first_dirty, stats)
        else:
            full = _put(offset_map, h1[a:b][mask], h2[a:b][mask], o[mask], flags[a:b][mask], first_dirty, stats)
        if full:
            return True
        _yield_gil()
    compressed = ~w.plain & ((w.attributes & F.CONTROL_MASK) == 0) & (w.last >= first_dirty) & (w.base < upper)
    if bad is not None:
        compressed &= ~bad
    for k in np.flatnonzero(compressed).tolist():
        pos = int(w.pos[k])
        offsets, h1, h2, _ts, flags, _s, _e = _scan(w.view, pos, _Header.parse(w.view, pos))
        mask = (offsets >= first_dirty) & (offsets < upper)
        if _put(offset_map, h1[mask], h2[mask], offsets[mask], flags[mask], first_dirty, stats):
            return True
    return False


def _put(offset_map, h1, h2, offsets, flags, first_dirty, stats) -> bool:
    """Put records into the map; True when it filled before the last of them."""
    done = offset_map.put_many(np.ascontiguousarray(h1), np.ascontiguousarray(h2), np.ascontiguousarray(offsets),
                               np.ascontiguousarray(flags))
    stats.map_records += done
    if done < len(offsets):
        if offset_map.latest_offset < first_dirty:
            raise ValueError("the dedupe buffer holds no key at all: raise log.cleaner.dedupe.buffer.size")
        stats.passes_needed = True
        return True
    return False


def filter_batch(view, pos: int, h: _Header, offset_map, now_ms: int, delete_retention_ms: int,
                 keep_empty: bool, discard_all: bool, stats: CleanStats):
    """The bytes that replace one batch in the cleaned segment (b"" when it goes)."""
    size = h.length + F.LOG_OVERHEAD
    original = view[pos:pos + size]
    if h.control:
        return original
    block = _records_block(view, pos, h)
    offsets, h1, h2, ts, flags, starts, ends = codec.scan_records(block, h.count, h.base, h.base_ts)
    stats.records_read += h.count
    if discard_all:
        keep = np.zeros(h.count, bool)
    else:
        latest = offset_map.get_many(h1, h2, flags)
        horizon = h.horizon
        retain_deletes = horizon is None or now_ms < horizon
        keep = ((flags & 1) == 1) & (offsets >= latest)
        if not retain_deletes:
            keep &= (flags & 2) == 2
    kept = np.flatnonzero(keep)
    stats.records_kept += len(kept)
    tombstones = bool(((flags[kept] & 2) == 0).any()) if len(kept) else False
    set_horizon = tombstones and h.horizon is None
    if len(kept) == h.count and not set_horizon:
        return original  # Kafka's writeOriginalBatch
    if not len(kept):
        return _empty_batch(h) if keep_empty else b""
    return _rebuilt(block, h, kept, ts, starts, ends, now_ms, delete_retention_ms, set_horizon)


def _finish(h: _Header, attributes: int, base_ts: int, max_ts: int, count: int, body: bytes) -> bytes:
    out = bytearray(F.RECORDS + len(body))
    _HEADER.pack_into(out, 0, h.base, len(out) - F.LOG_OVERHEAD, h.epoch, F.MAGIC_V2, 0, attributes, h.last_delta,
                      base_ts, max_ts, h.pid, h.pepoch, h.seq, count)
    out[F.RECORDS:] = body
    struct.pack_into(">I", out, F.CRC, records.crc32c(memoryview(out)[F.CRC_START:]))
    return bytes(out)


def _empty_batch(h: _Header) -> bytes:
    # Kafka's DefaultRecordBatch.writeEmptyHeader: no codec, both timestamps the max timestamp
    attributes = h.attributes & (F.TIMESTAMP_TYPE_MASK | F.TRANSACTIONAL_MASK | F.CONTROL_MASK)
    return _finish(h, attributes, h.max_ts, h.max_ts, 0, b"")


def group_segments(segments, end: int, max_bytes: int) -> list[list]:
    """Consecutive segments below ``end`` in groups whose sizes add up to at most ``max_bytes``
    and whose offsets fit an int32 above the group's base (Kafka's groupSegmentsBySize)."""
    below = [s for s in segments if s.base < end]
    groups, current, total = [], [], 0
    for i, seg in enumerate(below):
        upper = segments[i + 1].base if i + 1 < len(segments) else seg.base
        if current and (total + seg.size > max_bytes or upper - current[0].base > (1 << 31) - 1):
            groups.append(current)
            current, total = [], 0
        current.append(seg)
        total += seg.size
    if current:
        groups.append(current)
    return groups


class Throttle:
    """``log.cleaner.io.max.bytes.per.second``: sleep so the pass stays under the rate."""

    def __init__(self, bytes_per_second: float):
        self.rate = bytes_per_second
        self.start = time.monotonic()
        self.done = 0

    def account(self, n: int) -> None:
        if self.rate <= 0 or self.rate >= 1e300:
            return
        self.done += n
        ahead = self.done / self.rate - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(ahead)


def clean_log(log, first_dirty: int, upper: int, offset_map, *, now_ms: int, delete_retention_ms: int,
              segment_bytes: int, run_on_owner=None, throttle: Throttle | None = None,
              stop=None) -> CleanStats:
    """Clean ``log`` (a ``SegmentedLog``) below ``upper``; returns what was done, with
    ``end_offset`` the new first dirty offset. Raises CleanAborted if the log changed under
    it (nothing swapped, the ``.cleaned`` files removed)."""
    began = time.perf_counter()
    stats = CleanStats()
    live, upper = log.cleanable_segments(upper)
    segments = [_Segment(s.base_offset, s.path, s.size, s) for s in live]
    if not segments:
        stats.end_offset = first_dirty
        return stats
    for i, seg in enumerate(segments):
        seg.next_base = segments[i + 1].base if i + 1 < len(segments) else None
        seg.open()
    txns = _Transactions(segments)
    end = build_offset_map(segments, first_dirty, upper, offset_map, txns, stats)
    last_of_producer = txns.last_of_producer
    for group in group_segments(segments, end, segment_bytes):
        if stop is not None and stop.is_set():
            raise CleanAborted("the cleaner is stopping")
        cleaned_path = files.segment_name(group[0].base, files.LOG_SUFFIX) + ".cleaned"
        cleaned_path = os.path.join(log.directory, cleaned_path)
        fd = os.open(cleaned_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_group(fd, cleaned_path, group, offset_map, now_ms, delete_retention_ms, txns, last_of_producer,
                         stats, throttle)
        except BaseException:
            _unlink(cleaned_path)
            raise
        finally:
            os.close(fd)
        install_cleaned(log, cleaned_path, group[0].base, [s.live for s in group], run_on_owner)
        stats.groups += 1
    stats.end_offset = max(first_dirty, end)
    stats.seconds = time.perf_counter() - began
    return stats


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _write_group(fd, cleaned_path, group, offset_map, now_ms, delete_retention_ms, txns, last_of_producer, stats,
                 throttle) -> None:
    """Write the group's kept batches to the ``.cleaned`` file ``fd`` and fdatasync it."""
    out, written, file_pos = [], 0, 0
    for seg in group:
        for kept in _segment_output(seg, offset_map, now_ms, delete_retention_ms, txns, last_of_producer, stats):
            if len(kept):
                out.append(kept)
                written += len(kept)
            if written >= 1 << 20:
                files.write_all(fd, b"".join(out), file_pos, cleaned_path)
                file_pos += written
                out, written = [], 0
        stats.bytes_read += seg.size
        if throttle is not None:
            throttle.account(seg.size)
    if out:
        files.write_all(fd, b"".join(out), file_pos, cleaned_path)
        file_pos += written
    files.fdatasync(fd, cleaned_path)
    stats.bytes_written += file_pos


def _segment_output(seg, offset_map, now_ms, delete_retention_ms, txns, last_of_producer, stats):
    """The bytes replacing each batch of ``seg``, in order, a window at a time."""
    for w in seg.windows():
        yield from _window_output(w, offset_map, now_ms, delete_retention_ms, txns, last_of_producer, stats)


def _window_output(w: _Window, offset_map, now_ms, delete_retention_ms, txns, last_of_producer, stats):
    """The plain batches are decided together (one map lookup per slice of records);
    compressed and control ones one by one."""
    w.scan()
    batches = w.headers()
    offsets, h1, h2, ts, flags, starts, ends = w.rec
    n = len(batches)
    expired = aborted = None
    if (w.attributes & F.DELETE_HORIZON_MASK).any():
        expired = np.array([h.horizon is not None and now_ms >= h.horizon for _, h in batches], bool)
    if txns.aborted:
        aborted = np.array([h.transactional and h.base in txns.aborted for _, h in batches], bool)
    keep = np.empty(len(offsets), bool)
    kept_n, tomb_n = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for a in range(0, len(offsets), CHUNK):  # in slices: the event loop gets the GIL between them
        b = min(len(offsets), a + CHUNK)
        f = flags[a:b]
        k = ((f & 1) == 1) & (offsets[a:b] >= offset_map.get_many(h1[a:b], h2[a:b], f))
        by_batch = w.batch_of(a, b)
        if expired is not None:
            k &= ((f & 2) == 2) | ~expired[by_batch]
        if aborted is not None:
            k &= ~aborted[by_batch]
        keep[a:b] = k
        kept_n += np.bincount(by_batch, weights=k, minlength=n).astype(np.int64)
        tomb_n += np.bincount(by_batch, weights=k & ((f & 2) == 0), minlength=n).astype(np.int64)
        _yield_gil()
    kept_n, tomb_n = kept_n.tolist(), tomb_n.tolist()
    stats.records_read += len(offsets)
    stats.records_kept += sum(kept_n)
    simple = w.simple
    view = w.view
    for k, (pos, h) in enumerate(batches):
        if k % YIELD_EVERY == 0:
            _yield_gil()
        bounds = simple[k]
        if bounds is None:
            discard = h.transactional and h.base in txns.aborted
            yield filter_batch(view, pos, h, offset_map, now_ms, delete_retention_ms,
                               h.pid >= 0 and last_of_producer.get(h.pid) == h.base, discard, stats)
            continue
        set_horizon = tomb_n[k] > 0 and not h.attributes & F.DELETE_HORIZON_MASK
        if kept_n[k] == h.count and not set_horizon:
            yield view[pos:pos + h.length + F.LOG_OVERHEAD]
        elif kept_n[k] == 0:
            yield _empty_batch(h) if h.pid >= 0 and last_of_producer.get(h.pid) == h.base else b""
        else:
            lo, hi = bounds
            kept = np.flatnonzero(keep[lo:hi]) + lo
            yield _rebuilt(view, h, kept, ts, starts, ends, now_ms, delete_retention_ms, set_horizon)


def _rebuilt(block, h: _Header, kept, ts, starts, ends, now_ms, delete_retention_ms, set_horizon) -> bytes:
    """Batch ``h`` holding only the records ``kept`` (indexes into the scan of ``block``),
    with Kafka's header rules (see ``filter_batch``)."""
    attributes = h.attributes
    log_append_time = bool(attributes & F.TIMESTAMP_TYPE_MASK)
    if set_horizon:
        attributes |= F.DELETE_HORIZON_MASK
        base_ts = now_ms + delete_retention_ms
    elif h.horizon is not None or log_append_time:
        base_ts = h.base_ts
    else:
        base_ts = int(ts[kept[0]])
    max_ts = h.max_ts if log_append_time else int(ts[kept].max())
    body = codec.rebuild_records(block, starts, ends, ts, np.ascontiguousarray(kept, np.int64), base_ts)
    c = attributes & F.COMPRESSION_MASK
    if c:
        body = compression.compress(c, body)
    return _finish(h, attributes, base_ts, max_ts, len(kept), body)
