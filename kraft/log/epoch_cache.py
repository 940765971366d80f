"""The leader-epoch cache of a log: which leader epoch starts at which offset, kept in
memory (``EpochTable``, native lookups) and persisted as Kafka's ``leader-epoch-checkpoint``.

Lookups follow Kafka's ``LeaderEpochFileCache`` exactly (``end_offset_for_epoch``,
``epoch_for_offset``, assign / truncate rules). Persistence is decided by the owner: the
cache only counts changes (``version``) so the log can write the checkpoint off the append
path (the flusher writes it before it reports a flush) and knows when it is up to date.
Not thread-safe on its own: ``SegmentedLog`` serialises access with its lock.
"""

from __future__ import annotations

import os

import numpy as np

from kraft.log import files, hotloops
from kraft.log.checkpoint import LeaderEpochCheckpointFile
from kraft.types import OffsetAndEpoch

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Entries ``(epoch, start_offset)``, both strictly increasing.

    Invariant (kept by ``SegmentedLog``): every entry's start offset lies in
    ``[log start, log end)``, and the epoch of every batch in the log is the epoch of the
    entry covering its base offset (or below the first entry's epoch for batches written
    before any entry)."""

    def __init__(self, directory: str | None, entries=()):
        self._table = hotloops.EpochTable(entries)
        self.path = None if directory is None else os.path.join(directory, files.LEADER_EPOCH_CHECKPOINT)
        #: Bumped on every change; compared with ``written_version`` to know if the file is stale.
        self.version = 0
        self.written_version = 0
        #: The latest entry's epoch (None without entries), kept with every change: a replica
        #: fetcher reads it for every partition of its session on every request.
        self.latest_epoch = self._latest()

    def _latest(self) -> int | None:
        latest = self._table.latest()
        return None if latest is None else latest[0]

    # --- changes -----------------------------------------------------------------------------
    def _changed(self, changed: bool) -> bool:
        if changed:
            self.version += 1
        self.latest_epoch = self._latest()  # whatever the table reported: changes are rare
        return changed

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Kafka's ``assign``: a no-op if ``epoch`` is already the latest with an earlier or
        equal start; otherwise conflicting later entries are dropped first."""
        return self._changed(self._table.assign(epoch, start_offset))

    def assign_batches(self, epochs, base_offsets) -> bool:
        """Assign each batch's epoch if it is >= 0 and above the latest (numpy arrays)."""
        return self._changed(self._table.assign_batches(np.ascontiguousarray(epochs, np.int32),
                                                        np.ascontiguousarray(base_offsets, np.int64)))

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting at or after ``end_offset`` (log truncation)."""
        return self._changed(self._table.truncate_from_end(end_offset))

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop entries below ``start_offset``, moving the covering one up to it."""
        return self._changed(self._table.truncate_from_start(start_offset))

    def clear(self) -> bool:
        changed = len(self._table) > 0
        self._table.clear()
        return self._changed(changed)

    # --- lookups -----------------------------------------------------------------------------
    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> OffsetAndEpoch:
        """Kafka's ``endOffsetFor``: the largest epoch <= ``epoch`` with the start of the next
        larger epoch as offset; ``log_end_offset`` for the latest epoch; the first start if
        ``epoch`` is below every entry; ``OffsetAndEpoch(-1, -1)`` if undefined (no entries,
        a negative epoch, or one above the latest)."""
        found_epoch, found_offset = self._table.end_offset_for(epoch, log_end_offset)
        return OffsetAndEpoch(found_offset, found_epoch)

    def epoch_for_offset(self, offset: int) -> int | None:
        """Epoch of the entry covering ``offset``, None if it is below every entry."""
        epoch = self._table.epoch_for_offset(offset)
        return None if epoch < 0 else epoch

    def latest_entry(self):
        return self._table.latest()

    def earliest_entry(self):
        return self._table.earliest()

    def entry(self, epoch: int):
        return self._table.entry(epoch)

    def previous_epoch(self, epoch: int) -> int | None:
        prev = self._table.previous_epoch(epoch)
        return None if prev < 0 else prev

    def entries(self) -> list[tuple[int, int]]:
        return self._table.entries()

    def __len__(self) -> int:
        return len(self._table)

    # --- persistence ---------------------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        return self.version != self.written_version

    def write(self, entries=None) -> None:
        """Write the checkpoint (temp → fsync → rename → fsync dir): the current entries, or
        a snapshot taken earlier under the owner's lock. The owner records which
        ``version`` is on disk in ``written_version``."""
        if self.path is not None:
            LeaderEpochCheckpointFile(self.path).write(self.entries() if entries is None else entries)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries()})"
