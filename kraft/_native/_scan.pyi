"""Type stubs for ``kraft._native._scan`` (see ``scan_batches`` in ``kraft/records/_pure_reader.py``)."""

import numpy as np
from numpy.typing import NDArray

class Scan:
    """kraft.records.BatchScan's interface; the arrays are built on first use."""
    valid_end: int
    error: str | None
    complete: bool
    positions: NDArray[np.int64]
    base_offsets: NDArray[np.int64]
    last_offsets: NDArray[np.int64]
    partition_leader_epochs: NDArray[np.int32]
    max_timestamps: NDArray[np.int64]
    sizes: NDArray[np.int64]
    first_offset: int
    last_offset: int
    last_position: int
    max_timestamp: int
    max_size: int
    max_epoch: int
    def __len__(self) -> int: ...
    def is_ordered(self, expected_first: int, previous_epoch: int) -> bool: ...

def scan_batches(buffer: bytes | bytearray | memoryview, position: int = 0) -> Scan: ...
def assign_offsets(buffer: bytearray | memoryview, base_offset: int,
                   partition_leader_epoch: int) -> int: ...
# (outcome 0 ok / 1 corrupt / 2 invalid record / 3 too large / 4 no key / 5 timestamp out of range,
#  records, any compressed, end of the last whole batch, message or None); see
#  kraft/records/_pure_check.py.
def check_writer_batches(buffer: bytes | bytearray | memoryview, max_batch_bytes: int, max_batch_records: int,
                         allow_control: bool, allow_null_values: bool, require_keys: bool = ...,
                         min_timestamp: int = ..., max_timestamp: int = ...) -> tuple[int, int, bool, int, str | None]: ...
