"""The producer-state table of every local partition, loaded on first use (latest snapshot +
log replay, ``producer_snapshots.load_producer_state``) and kept beside the ``PartitionLog``
it belongs to: a recreated partition (new ``PartitionLog`` object) gets a fresh table. Also
writes the ``.snapshot`` files (on shutdown and whenever the server layer asks, e.g. after a
segment roll) and keeps at most ``KEEP_SNAPSHOTS`` of them per partition; indexes aborted
transactions (``.txnindex``) as their markers are appended, and gives the last stable offset. Loop thread only;
file I/O only through ``producer_snapshots``.
"""

from __future__ import annotations

import bisect

from kraft.broker.producer_snapshots import (delete_snapshots, index_aborted, load_producer_state,
                                             snapshot_offsets, write_snapshot)
from kraft.broker.producer_state import ProducerStateTable, producer_batches
from kraft.log import txn_index

KEEP_SNAPSHOTS = 2


class ProducerStates:
    def __init__(self):
        self._tables: dict[tuple[str, int], tuple[object, ProducerStateTable]] = {}
        #: (topic, partition) -> (PartitionLog, every aborted transaction of its index files,
        #: by marker offset): a read_committed fetch must not list and read files each time.
        #: Dropped when the files change here (an abort indexed, a load, a truncation);
        #: entries of segments the log layer deleted or merged stay valid (an entry below
        #: the log start matches no fetch; a merge keeps the same entries).
        self._aborted: dict[tuple[str, int], tuple[object, list]] = {}

    def table(self, plog) -> ProducerStateTable:
        key = (plog.topic, plog.partition)
        held = self._tables.get(key)
        if held is not None and held[0] is plog and held[1].end_offset <= plog.log.end_offset:
            return held[1]
        table = load_producer_state(plog.log)
        self._tables[key] = (plog, table)
        self._aborted.pop(key, None)  # the load rebuilt the index past its snapshot
        return table

    def on_appended(self, plog, data) -> None:
        """Record appended batches (leader or follower append; offsets final in ``data``)."""
        table = self.table(plog)
        if table.end_offset >= plog.log.end_offset:
            return  # loaded after this append: already replayed from the log
        end = plog.log.end_offset  # a follower append may have dropped a partial last batch
        completed = table.apply([h for h in producer_batches(data) if h.last_offset < end], end)
        if any(c.aborted for c in completed):
            index_aborted(plog.log, completed)
            self._aborted.pop((plog.topic, plog.partition), None)

    def last_stable_offset(self, plog) -> int:
        """Kafka's LSO of ``plog``: its high watermark, or the first offset of its oldest open
        transaction if that is lower."""
        return self.table(plog).last_stable_offset(plog.high_watermark)

    def aborted_transactions(self, plog, fetch_offset: int, upper_offset: int) -> list:
        """The aborted transactions (``txn_index.AbortedTxn``) overlapping
        ``[fetch_offset, upper_offset)``, for a read_committed fetch."""
        key = (plog.topic, plog.partition)
        held = self._aborted.get(key)
        if held is None or held[0] is not plog:
            directory = plog.log.directory
            entries = [e for b in txn_index.base_offsets(directory) for e in txn_index.read(directory, b)]
            entries.sort(key=lambda e: e.last_offset)
            held = self._aborted[key] = (plog, entries)
        entries = held[1]
        # Kafka's collectAbortedTransactions: marker at or after the fetch offset, first
        # offset below the upper bound.
        i = bisect.bisect_left(entries, fetch_offset, key=lambda e: e.last_offset)
        return [e for e in entries[i:] if e.first_offset < upper_offset]

    def on_truncated(self, plog) -> None:
        """The log lost its tail: the table is rebuilt from snapshots and log on next use, and
        the aborted transactions whose markers went are dropped from the index now."""
        self._tables.pop((plog.topic, plog.partition), None)
        self._aborted.pop((plog.topic, plog.partition), None)
        txn_index.truncate_from(plog.log.directory, plog.log.end_offset)

    def forget(self, topic: str, partition: int) -> None:
        self._tables.pop((topic, partition), None)
        self._aborted.pop((topic, partition), None)

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
