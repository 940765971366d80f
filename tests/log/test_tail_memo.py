"""The memo of a segment's latest appends: reads of the tail are served from memory and
must equal what the file holds, for every position and size, through appends of every
size, truncation, rolls and the memo's bounds; and the file is read only for what the memo
does not hold."""

from __future__ import annotations

import random

import pytest
from _log_helpers import batch_for, follower_batches

from kraft.log import LogSegment
from kraft.log.tail_memo import MEMO_APPENDS, MEMO_BYTES, TailMemo


# --- the memo alone ---------------------------------------------------------------------------
def test_one_whole_append_is_returned_as_it_is():
    m = TailMemo()
    a, b = b"a" * 10, b"b" * 20
    m.append(100, a)
    m.append(110, b)
    assert m.read(110, 20) is b  # no copy
    assert m.read(100, 10) is a
    assert m.read(105, 10) == b"a" * 5 + b"b" * 5  # across appends
    assert m.read(100, 1000) == a + b  # fewer at the end
    assert m.read(99, 5) is None and m.read(130, 5) is None


def test_a_gap_starts_over_and_clear_forgets():
    m = TailMemo()
    m.append(0, b"x" * 8)
    m.append(100, b"y" * 8)  # not contiguous: the file was truncated or rolled in between
    assert m.read(0, 8) is None and m.read(100, 8) == b"y" * 8
    m.clear()
    assert m.read(100, 8) is None


def test_bounded_by_appends_and_by_bytes():
    m = TailMemo()
    for i in range(MEMO_APPENDS + 5):
        m.append(i * 4, b"%04d" % i)
    assert m.read(0, 4) is None  # the oldest went
    newest = (MEMO_APPENDS + 4) * 4
    assert m.read(newest, 4) == b"%04d" % (MEMO_APPENDS + 4)
    oldest_kept = 5 * 4
    assert m.read(oldest_kept, 4) == b"0005" and m.read(oldest_kept - 4, 4) is None
    big = TailMemo()
    big.append(0, b"a" * (MEMO_BYTES // 2))
    big.append(MEMO_BYTES // 2, b"b" * (MEMO_BYTES // 2 + 1))
    assert big.read(0, 1) is None and big.read(MEMO_BYTES // 2, 1) == b"b"
    big.append(MEMO_BYTES + 1, b"c" * (MEMO_BYTES + 1))  # larger than the bound: not kept
    assert big.read(MEMO_BYTES + 1, 1) is None


def test_a_buffer_changed_after_its_append_does_not_change_the_memo():
    m = TailMemo()
    buf = bytearray(b"abcd")
    m.append(0, buf)
    buf[0] = ord("z")
    assert m.read(0, 4) == b"abcd"


def test_read_only_views_are_kept_and_writable_views_copied():
    """Read-only views are handed over for good (the log's patched buffers, decoded frames):
    kept uncopied; a writable view may still change under the memo: copied."""
    m = TailMemo()
    owner = bytearray(b"abcdefgh")
    kept = memoryview(owner).toreadonly()
    m.append(0, kept)
    got = m.read(0, 8)
    assert got is kept and m.read(2, 3) == b"cde" and m.read(2, 3).obj is owner
    writable = bytearray(b"12345678")
    m.append(8, memoryview(writable))
    writable[0] = ord("z")
    assert m.read(8, 8) == b"12345678"


def test_the_leader_path_keeps_its_patched_buffer_uncopied(open_log):
    """The leader hands the log one bytearray per drain; the log patches offsets and epoch
    into it and the memo serves reads of it without another copy."""
    log = open_log(segment_bytes=1 << 30)
    data = bytearray(batch_for(0, 3) + batch_for(0, 2))  # base offsets are rewritten
    log.append(data, assign_offsets=True, leader_epoch=4)
    got = log.read(0, 1 << 20)
    assert isinstance(got, memoryview) and got.readonly and got.obj is data
    assert bytes(got) == _file_read(log.segments[-1], 0, 1 << 20)
    log.append(batch_for(0, 1), assign_offsets=True, leader_epoch=4)  # bytes: copied, then kept
    assert log.read(5, 1 << 20) == _file_read(log.segments[-1], log.segments[-1].translate(5), 1 << 20)


# --- a segment using it -----------------------------------------------------------------------
def _file_read(seg: LogSegment, position: int, max_bytes: int) -> bytes:
    """What a segment without the memo answers: a fresh object over the same file."""
    fresh = LogSegment(seg.directory, seg.base_offset, seg.fd, seg.size, seg.index.interval)
    return fresh.read(position, max_bytes)


@pytest.mark.parametrize("seed", range(8))
def test_tail_reads_equal_the_file_through_appends_and_truncation(open_log, seed):
    rng = random.Random(seed)
    log = open_log(strict_order=False, segment_bytes=1 << 30)
    nxt = 0
    for _ in range(60):
        if rng.random() < 0.15 and log.end_offset > 0:
            log.truncate_to(rng.randint(0, log.end_offset))
            nxt = log.end_offset
            continue
        data, nxt = follower_batches(nxt, [rng.randint(1, 4) for _ in range(rng.randint(1, 6))])
        log.append(bytes(data) if rng.random() < 0.5 else data, assign_offsets=False)
        seg = log.segments[-1]
        positions = sorted({seg.translate(o) for o in range(seg.base_offset, seg.next_offset)} - {None})
        for pos in positions[-12:]:
            for max_bytes in (1, 60, 200, 1000, 1 << 20):
                got = seg.read(pos, max_bytes)
                assert got == _file_read(seg, pos, max_bytes)
                assert seg.read_checked(pos, max_bytes) == got


def test_reading_what_was_just_appended_does_not_touch_the_file(open_log, monkeypatch):
    log = open_log(strict_order=False, segment_bytes=1 << 30)
    first, nxt = follower_batches(0, [1])
    log.append(first, assign_offsets=False)
    data, _ = follower_batches(nxt, [3, 2])  # what followers fetch and the state machine applies next
    log.append(data, assign_offsets=False)
    seg = log.segments[-1]

    def no_pread(*a):
        raise AssertionError("the tail was read from the file")
    monkeypatch.setattr(seg, "pread", no_pread)
    assert log.read(1, 1 << 20) == bytes(data)
    assert log.read(4, 1 << 20) == bytes(data[len(batch_for(1, 3)):])
    monkeypatch.undo()
    log.truncate_to(4)  # the memo goes with the cut bytes: reads use the file again
    calls = []
    real = seg.pread
    monkeypatch.setattr(seg, "pread", lambda n, p: calls.append(p) or real(n, p))
    assert log.read(1, 1 << 20) == bytes(data[:len(batch_for(1, 3))])
    assert calls


def test_a_rolled_segment_keeps_no_memo(open_log):
    log = open_log(strict_order=False, segment_bytes=1 << 30)
    data, nxt = follower_batches(0, [2])
    log.append(data, assign_offsets=False)
    old = log.segments[-1]
    log.roll()
    assert old._memo.read(0, 10) is None  # synced at the roll: memory only for the active tail
    assert log.read(0, 1 << 20) == bytes(data)
