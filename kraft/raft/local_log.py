"""LocalLog: this replica's log as the Raft core sees it — what is appended, what is flushed,
what is committed (the high watermark the core publishes).

It owns the three offsets the core's guarantees are about: it never reports an offset as
durable before ``on_flushed`` says so, never truncates below the high watermark or with a
flush outstanding, and the high watermark it publishes never decreases. It reaches the log
only through the synchronous log port and reports through effects (``Append``, ``Flush``,
``Commit``, ``LoadSnapshot``); it knows nothing of roles or requests. No I/O of its own.
"""

from __future__ import annotations

from typing import Callable

from kraft.errors import CorruptRecordError, InvalidRecordError
from kraft.raft.effects import Append, Commit, Flush, LoadSnapshot
from kraft.types import OffsetAndEpoch
from kraft.raft.control_state import ControlState


class LocalLog:
    def __init__(self, log, control: ControlState, emit: Callable[[object], None]):
        self.log = log
        self.control = control
        self.voter_history = control.voters
        self._emit = emit
        end = log.end_offset()
        self.flushed = min(log.flushed_offset(), end)
        self._flush_requested = self.flushed
        self.high_watermark = -1
        # Follower: fetched records that failed validation, as (leader id, fetch offset,
        # reason). The core cannot log (no I/O); the driver watches the counter.
        self.corrupt_fetches = 0
        self.last_corrupt_fetch: tuple | None = None

    def position_durable(self) -> bool:
        """Is everything in the log flushed (may we claim our end offset to others)?"""
        return self.flushed >= self.log.end_offset()

    def durable_once_flushed(self) -> int | None:
        """The offset below which the log must be durable for our end offset to be claimed:
        -1 if it is already, the end offset if a requested flush will make it so, else None."""
        end = self.log.end_offset()
        if self.flushed >= end:
            return -1
        return end if self._flush_requested >= end else None

    def request_flush(self) -> None:
        end = self.log.end_offset()
        if end > self._flush_requested and end > self.flushed:
            self._flush_requested = end
            self._emit(Flush(end))

    def on_flushed(self, offset: int) -> bool:
        """The log is durable below ``offset``; True if that moved the flushed offset."""
        offset = min(offset, self.log.end_offset())
        if offset > self.flushed:
            self.flushed = offset
            return True
        return False

    def append_as_leader(self, data: bytes, epoch: int) -> tuple[int, int]:
        first, last = self.log.append_as_leader(data, epoch)
        self.control.apply_appended(data, first, last)
        self._emit(Append(first, last, epoch, True))
        return first, last

    def append_as_follower(self, records: bytes, leader_id: int, epoch: int) -> bool:
        """Append fetched records; False (log unchanged, counted) if they fail validation."""
        try:
            first, last = self.log.append_as_follower(records)
        except (CorruptRecordError, InvalidRecordError) as exc:
            self.corrupt_fetches += 1
            self.last_corrupt_fetch = (leader_id, self.log.end_offset(), str(exc))
            return False
        if first >= 0:
            # Membership records act when appended (the voter set of a Voters record holds
            # from its offset on), and are reverted if the log is truncated below them.
            self.control.apply_appended(records, first, last)
            self._emit(Append(first, last, epoch, False))
            self.request_flush()
        return True

    def set_high_watermark(self, hw: int) -> None:
        if hw > self.high_watermark:
            self.high_watermark = hw
            self.log.update_high_watermark(hw)
            self._emit(Commit(hw))

    def truncate(self, offset: int) -> None:
        if offset < self.high_watermark:
            raise AssertionError(f"truncation to {offset} below the high watermark {self.high_watermark}")
        if not self.position_durable():
            raise AssertionError("truncation with a flush outstanding")
        self.log.truncate_to(offset)
        end = self.log.end_offset()
        self.flushed = min(self.flushed, end)
        self._flush_requested = min(self._flush_requested, end)
        self.control.truncate(end)

    def snapshot_installed(self, snapshot_id: OffsetAndEpoch) -> None:
        """The log now starts (and ends) at the snapshot, which is durable once frozen; a
        snapshot is only ever taken at a committed offset."""
        end = self.log.end_offset()
        self.flushed = self._flush_requested = end
        reader = self.log.read_snapshot(snapshot_id)
        if reader is not None:
            self.control.load_snapshot(reader.read(0, reader.size_in_bytes()), snapshot_id.offset)
        self._emit(LoadSnapshot(snapshot_id))
        self.set_high_watermark(snapshot_id.offset)
