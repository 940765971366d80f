"""Helpers shared by the log storage tests (imported as ``_log_helpers``)."""

from __future__ import annotations

import os
import struct

from kraft import records
from kraft.log import SegmentedLog

NO_EXTENSIONS = bool(os.environ.get("KRAFT_NO_EXTENSIONS"))


def value_for(offset: int, size: int = 24) -> bytes:
    """A record value that names its own offset, so misplaced or stale data is detected."""
    head = struct.pack(">q", offset)
    return head + bytes((offset * 7 + i) & 0xFF for i in range(max(0, size - 8)))


def batch_for(first_offset: int, count: int, size: int = 24, timestamp: int | None = 1_700_000_000_000) -> bytes:
    """A batch whose values encode the offsets they will get when appended at ``first_offset``."""
    return records.build_batch([value_for(first_offset + i, size) for i in range(count)],
                               base_offset=first_offset, timestamp=timestamp)


def all_records(log: SegmentedLog):
    """``[(offset, value, epoch)]`` of every record from the start offset to the end."""
    out, offset = [], log.start_offset
    while offset < log.end_offset:
        data = log.read(offset, 1 << 20)
        if not data:
            break
        for batch in records.iter_batches(data, validate=True):
            for rec in batch:
                if rec.offset >= offset:
                    out.append((rec.offset, bytes(rec.value), batch.partition_leader_epoch))
            offset = batch.next_offset
    return out


def follower_batches(first, counts, epoch=1, gap=0):
    """Batches of ``counts`` records from offset ``first`` as a leader made them (offsets and
    epoch assigned), ``gap`` offsets apart; returns (bytes, next offset)."""
    from kraft import records
    out = bytearray()
    for n in counts:
        b = bytearray(batch_for(first, n))
        records.assign_offsets(b, first, epoch)
        out += b
        first += n + gap
    return out, first
