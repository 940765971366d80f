"""The producer-state table of every local partition, loaded on first use (latest snapshot +
log replay, ``producer_snapshots.load_producer_state``) and kept beside the ``PartitionLog``
it belongs to: a recreated partition (new ``PartitionLog`` object) gets a fresh table. Also
writes the ``.snapshot`` files (on shutdown and whenever the server layer asks, e.g. after a
segment roll) and keeps at most ``KEEP_SNAPSHOTS`` of them per partition; indexes aborted
transactions (``.txnindex``) as their markers are appended, and gives the last stable offset. Loop thread only;
file I/O only through ``producer_snapshots``.
"""

from __future__ import annotations

from kraft.broker.producer_snapshots import (delete_snapshots, index_aborted, load_producer_state,
                                             snapshot_offsets, write_snapshot)
from kraft.broker.producer_state import ProducerStateTable, producer_batches
from kraft.log import txn_index

KEEP_SNAPSHOTS = 2


class ProducerStates:
    def __init__(self):
        self._tables: dict[tuple[str, int], tuple[object, ProducerStateTable]] = {}

    def table(self, plog) -> ProducerStateTable:
        key = (plog.topic, plog.partition)
        held = self._tables.get(key)
        if held is not None and held[0] is plog and held[1].end_offset <= plog.log.end_offset:
            return held[1]
        table = load_producer_state(plog.log)
        self._tables[key] = (plog, table)
        return table

    def on_appended(self, plog, data) -> None:
        """Record appended batches (leader or follower append; offsets final in ``data``)."""
        table = self.table(plog)
        if table.end_offset >= plog.log.end_offset:
            return  # loaded after this append: already replayed from the log
        end = plog.log.end_offset  # a follower append may have dropped a partial last batch
        index_aborted(plog.log, table.apply([h for h in producer_batches(data) if h.last_offset < end], end))

    def last_stable_offset(self, plog) -> int:
        """Kafka's LSO of ``plog``: its high watermark, or the first offset of its oldest open
        transaction if that is lower."""
        return self.table(plog).last_stable_offset(plog.high_watermark)

    def aborted_transactions(self, plog, fetch_offset: int, upper_offset: int) -> list:
        """The aborted transactions (``txn_index.AbortedTxn``) overlapping
        ``[fetch_offset, upper_offset)``, for a read_committed fetch."""
        directory = plog.log.directory
        bases = txn_index.base_offsets(directory)
        if not bases:
            return []
        return txn_index.collect(directory, bases, fetch_offset, upper_offset)

    def on_truncated(self, plog) -> None:
        """The log lost its tail: the table is rebuilt from snapshots and log on next use, and
        the aborted transactions whose markers went are dropped from the index now."""
        self._tables.pop((plog.topic, plog.partition), None)
        txn_index.truncate_from(plog.log.directory, plog.log.end_offset)

    def forget(self, topic: str, partition: int) -> None:
        self._tables.pop((topic, partition), None)

    def write_snapshots(self, plogs=None) -> int:
        """A snapshot at the current end of each loaded partition whose table moved since its
        last one; older snapshots beyond ``KEEP_SNAPSHOTS`` and below the log start go.
        Returns how many were written."""
        n = 0
        for key, (plog, table) in list(self._tables.items()):
            if plogs is not None and plog not in plogs:
                continue
            if plog.log.closed or table.end_offset != plog.log.end_offset:
                continue
            directory = plog.log.directory
            existing = snapshot_offsets(directory)
            if not existing or existing[-1] != table.end_offset:
                write_snapshot(directory, table)
                n += 1
                existing = snapshot_offsets(directory)
            if len(existing) > KEEP_SNAPSHOTS:
                delete_snapshots(directory, below=existing[-KEEP_SNAPSHOTS])
            delete_snapshots(directory, below=plog.log.start_offset)
        return n
