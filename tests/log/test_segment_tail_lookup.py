"""LogSegment remembers where its latest batches are, so fetches and the state machine find
the tail without reading the file. The memo must give the same position as the index and
scan for every offset, through small and large appends, gaps and truncation."""

from __future__ import annotations

import random

import pytest
from _log_helpers import batch_for, follower_batches

from kraft.log import LogSegment
from kraft.log.segment import RECENT_BATCHES


def reference_positions(seg: LogSegment, offsets):
    """What a segment without the memo answers: a fresh object over the same file."""
    scan = seg.scan()
    fresh = LogSegment(seg.directory, seg.base_offset, seg.fd, seg.size, seg.index.interval)
    fresh.index.rebuild(scan.positions, scan.last_offsets, scan.max_timestamps, scan.sizes)
    fresh.next_offset = seg.next_offset
    return [fresh.translate(o) for o in offsets]


@pytest.mark.parametrize("seed", range(12))
def test_memo_agrees_with_the_index_for_every_offset(open_log, seed):
    rng = random.Random(seed)
    log = open_log(strict_order=False, segment_bytes=1 << 30)
    nxt = 0
    for _ in range(40):
        step = rng.random()
        if step < 0.5:  # small appends: remembered
            data, nxt = follower_batches(nxt, [rng.randint(1, 4) for _ in range(rng.randint(1, 8))],
                                         gap=rng.choice((0, 0, 3)))
        elif step < 0.65:  # a follower catching up: more batches than the memo holds
            data, nxt = follower_batches(nxt, [1] * rng.randint(RECENT_BATCHES - 20, RECENT_BATCHES + 30))
        elif step < 0.8 and log.end_offset > 0:
            log.truncate_to(rng.randint(0, log.end_offset))
            nxt = log.end_offset
            continue
        else:
            data, nxt = follower_batches(nxt, [rng.randint(1, 3)])
        log.append(data, assign_offsets=False)
        nxt = log.end_offset
        seg = log.segments[-1]
        offsets = list(range(seg.base_offset, seg.next_offset + 2))
        assert [seg.translate(o) for o in offsets] == reference_positions(seg, offsets)


def test_the_tail_is_found_without_reading_the_file(open_log, monkeypatch):
    log = open_log()
    for i in range(RECENT_BATCHES + 10):
        log.append(batch_for(i, 1), leader_epoch=1)
    seg = log.segments[-1]
    reads = []
    monkeypatch.setattr(seg, "pread", lambda n, p: reads.append(p) or LogSegment.pread(seg, n, p))
    tail = range(seg.next_offset - RECENT_BATCHES + 1, seg.next_offset)
    positions = [seg.translate(o) for o in tail]
    assert reads == []
    assert positions == reference_positions(seg, tail)
    seg.translate(0)  # older than the memo: index and a read
    assert reads
