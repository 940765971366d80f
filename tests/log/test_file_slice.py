"""Fetch answers' records left in the segment files (``log_reads.read_answer``,
``kraft.log.file_slice``): the same bytes a copy would carry, and still those bytes after the
log deletes, closes or truncates what they came from before the answer is written."""

from __future__ import annotations

import os

import pytest
from _log_helpers import batch_for

from kraft.log.file_slice import FileSlice
from kraft.log.log_reads import ZERO_COPY_MIN_BYTES, read_answer, read_bytes

VALUE = 1000  # bytes per record: a batch of 100 is ~100 KB, over the zero-copy threshold


def _fill(log, batches: int, per_batch: int = 100, size: int = VALUE, epoch: int = 0) -> None:
    for _ in range(batches):
        log.append(batch_for(log.end_offset, per_batch, size=size), leader_epoch=epoch)
    log.flush()


def _bytes(x) -> bytes:
    return bytes(x.materialize() if isinstance(x, FileSlice) else x)


def test_a_large_read_is_a_slice_of_the_same_bytes_a_small_one_a_copy(open_log):
    log = open_log()
    _fill(log, 6)
    big = read_answer(log, 0, 1 << 20)
    assert isinstance(big, FileSlice) and big.data is None
    assert _bytes(big) == bytes(read_bytes(log, 0, 1 << 20))
    small = read_answer(log, 0, ZERO_COPY_MIN_BYTES // 2)  # under the threshold: pread, as before
    assert not isinstance(small, FileSlice)
    assert bytes(small) == bytes(read_bytes(log, 0, ZERO_COPY_MIN_BYTES // 2))
    # whole batches only, bounded by max_bytes and by upper_offset (a consumer's high watermark)
    two = read_answer(log, 0, 250_000)
    assert len(two) == len(read_bytes(log, 0, 250_000)) and len(two) < 250_000
    upto = read_answer(log, 0, 1 << 20, upper_offset=300)
    assert _bytes(upto) == bytes(read_bytes(log, 0, 1 << 20, upper_offset=300))
    # min_one: a first batch larger than max_bytes is returned whole
    one = read_answer(log, 100, 10, min_one=True)
    assert _bytes(one) == bytes(read_bytes(log, 100, 10, min_one=True)) and len(one) > 10
    assert len(read_answer(log, 100, 10, min_one=False)) == 0


def test_a_slice_keeps_its_bytes_when_the_segment_is_deleted_and_the_log_closed(open_log):
    log = open_log(segment_bytes=300_000)
    _fill(log, 8)
    s = read_answer(log, 0, 1 << 20)
    expected = bytes(read_bytes(log, 0, 1 << 20))
    first_segment = log._segments[0].path
    log.delete_below(700)  # the first segments go: unlinked, their descriptors closed
    assert not os.path.exists(first_segment)
    log.close()
    assert s.data is None  # still read from the file (through its own descriptor)
    assert _bytes(s) == expected


def test_truncation_reads_the_slices_it_would_cut_into_memory_first(open_log):
    log = open_log()
    _fill(log, 6, epoch=1)
    below = read_answer(log, 0, 150_000)  # offsets 0-99: kept by the cut below
    tail = read_answer(log, 400, 1 << 20)  # offsets 400-599: cut
    expected_tail = _bytes(read_bytes(log, 400, 1 << 20))
    assert isinstance(tail, FileSlice) and isinstance(below, FileSlice)
    log.truncate_to(450)  # a follower cutting a divergent tail
    assert tail.data is not None and bytes(tail.data) == expected_tail
    assert below.data is None  # untouched bytes stay in the file
    # other records now take the cut offsets; the answer built before still carries the old ones
    _fill(log, 3, size=VALUE + 7, epoch=2)
    assert _bytes(tail) == expected_tail
    assert _bytes(below) == bytes(read_bytes(log, 0, 150_000))


def test_slices_share_one_descriptor_per_segment_and_release_it(open_log):
    """(Looked at by the descriptor itself: a count of the process's descriptors also moves
    when an earlier test's objects are collected.)"""
    log = open_log()
    _fill(log, 4)
    path = log._segments[0].path
    slices = [read_answer(log, 0, 1 << 20) for _ in range(50)]
    assert all(isinstance(s, FileSlice) for s in slices)
    assert len({id(s.source) for s in slices}) == 1  # one duplicate per segment, shared
    fd = slices[0].source.fd
    assert fd != log._segments[0].fd and os.readlink(f"/proc/self/fd/{fd}") == path
    log.close()
    assert os.readlink(f"/proc/self/fd/{fd}") == path  # it outlives the log's own descriptors
    assert _bytes(slices[0]) == _bytes(slices[-1])
    del slices
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        target = None
    assert target != path  # and goes with the last slice


def test_a_slice_whose_file_lost_its_bytes_fails_instead_of_carrying_others(open_log, tmp_path):
    from kraft.errors import FatalLogError
    log = open_log()
    _fill(log, 4)
    s = read_answer(log, 0, 1 << 20)
    os.truncate(log._segments[0].path, 1000)  # behind the log's back (an operator, a bad disk)
    with pytest.raises(FatalLogError, match="holds 1000 of the"):
        s.materialize()
