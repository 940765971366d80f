"""Result containers shared by both codec implementations.

:class:`DecodedBatch` holds a whole batch as numpy arrays (no Python object per record);
:class:`BatchScan` is what a segment scan reports. The native module is handed these
classes at import (it may not import kraft modules itself), so both implementations return
the very same types. Containers only: no parsing here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class DecodedBatch:
    """Records of one batch as parallel arrays.

    ``data`` is the records block (decompressed if needed); ``key_positions`` /
    ``value_positions`` index into it, a length of -1 means null. ``header_positions``
    point at each record's header count, so headers are parsed only when asked for.
    """

    __slots__ = (
        "data",
        "offsets",
        "timestamps",
        "key_positions",
        "key_lengths",
        "value_positions",
        "value_lengths",
        "header_positions",
        "_header_parser",
    )

    def __init__(self, data, offsets, timestamps, key_positions, key_lengths,
                 value_positions, value_lengths, header_positions, header_parser=None):
        self.data = data
        self.offsets = offsets
        self.timestamps = timestamps
        self.key_positions = key_positions
        self.key_lengths = key_lengths
        self.value_positions = value_positions
        self.value_lengths = value_lengths
        self.header_positions = header_positions
        self._header_parser = header_parser

    def __len__(self) -> int:
        return len(self.offsets)

    def _slice(self, pos: int, n: int):
        return None if n < 0 else bytes(self.data[pos : pos + n])

    def key(self, i: int) -> bytes | None:
        return self._slice(int(self.key_positions[i]), int(self.key_lengths[i]))

    def value(self, i: int) -> bytes | None:
        return self._slice(int(self.value_positions[i]), int(self.value_lengths[i]))

    def values(self) -> list:
        data, pos, lens = self.data, self.value_positions.tolist(), self.value_lengths.tolist()
        return [None if n < 0 else bytes(data[p : p + n]) for p, n in zip(pos, lens)]

    def headers(self, i: int) -> tuple:
        """Headers of record ``i`` as ``((key: str, value: bytes | None), ...)``."""
        return self._header_parser(self.data, int(self.header_positions[i]))


@dataclass(frozen=True)
class BatchScan:
    """Batches found by a scan of a buffer, as parallel arrays, plus why the scan stopped.

    ``valid_end`` is the position just after the last valid batch. ``error`` is None when
    the scan consumed the whole buffer; ``"partial"`` when it ended in an incomplete batch
    (a torn write); otherwise a description of the invalid batch at ``valid_end``.
    """

    positions: np.ndarray
    base_offsets: np.ndarray
    last_offsets: np.ndarray
    partition_leader_epochs: np.ndarray
    max_timestamps: np.ndarray
    sizes: np.ndarray
    valid_end: int
    error: str | None

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def complete(self) -> bool:
        return self.error is None

    # The scalars an append reads (the native scan keeps its rows in C and answers these
    # without building the arrays).
    @property
    def first_offset(self) -> int:
        return int(self.base_offsets[0]) if len(self) else -1

    @property
    def last_offset(self) -> int:
        return int(self.last_offsets[-1]) if len(self) else -1

    @property
    def last_position(self) -> int:
        return int(self.positions[-1]) if len(self) else -1

    @property
    def max_timestamp(self) -> int:
        return int(self.max_timestamps.max()) if len(self) else -1

    @property
    def max_size(self) -> int:
        return int(self.sizes.max()) if len(self) else 0

    @property
    def max_epoch(self) -> int:
        return int(self.partition_leader_epochs.max()) if len(self) else -1

    def is_ordered(self, expected_first: int, previous_epoch: int) -> bool:
        """No batch breaks strict log order: offsets run on from ``expected_first`` (-1:
        from the first batch) without gaps, and leader epochs never decrease from
        ``previous_epoch``. kraft.log.recovery.order_violation says where and why."""
        expect, epoch = expected_first, previous_epoch
        for i, (base, last, e) in enumerate(zip(self.base_offsets.tolist(), self.last_offsets.tolist(),
                                                self.partition_leader_epochs.tolist())):
            if (i > 0 or expected_first >= 0) and base != expect:
                return False
            if e < epoch:
                return False
            epoch, expect = e, last + 1
        return True


def empty_scan_arrays(n: int):
    """Allocate the six arrays of a BatchScan for ``n`` batches."""
    return (
        np.empty(n, np.int64),
        np.empty(n, np.int64),
        np.empty(n, np.int64),
        np.empty(n, np.int32),
        np.empty(n, np.int64),
        np.empty(n, np.int64),
    )
