"""Type stubs for ``kraft._native._compact`` (twin: ``kraft/log/_pure_compact.py``)."""

import numpy as np
from numpy.typing import NDArray

ENTRY_BYTES: int
SEED1: int
SEED2: int

def release_gil() -> None: ...
def key_hash(key: bytes | bytearray | memoryview) -> tuple[int, int]: ...
def scan_records(block: bytes | bytearray | memoryview, count: int, base_offset: int, base_timestamp: int
                 ) -> tuple[NDArray[np.int64], NDArray[np.uint64], NDArray[np.uint64], NDArray[np.int64],
                            NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64]]: ...
def scan_many(buffer: bytes | bytearray | memoryview, block_starts: NDArray[np.int64], block_ends: NDArray[np.int64],
              counts: NDArray[np.int64], base_offsets: NDArray[np.int64], base_timestamps: NDArray[np.int64]
              ) -> tuple[NDArray[np.int64], NDArray[np.uint64], NDArray[np.uint64], NDArray[np.int64],
                         NDArray[np.uint8], NDArray[np.int64], NDArray[np.int64]]: ...
def rebuild_records(block: bytes | bytearray | memoryview, starts: NDArray[np.int64], ends: NDArray[np.int64],
                    timestamps: NDArray[np.int64], keep: NDArray[np.int64], new_base_timestamp: int) -> bytes: ...

class OffsetMap:
    slots: int
    capacity: int
    size: int
    latest_offset: int
    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None: ...
    def clear(self) -> None: ...
    def put_many(self, h1: NDArray[np.uint64], h2: NDArray[np.uint64], offsets: NDArray[np.int64],
                 flags: NDArray[np.uint8]) -> int: ...
    def get_many(self, h1: NDArray[np.uint64], h2: NDArray[np.uint64], flags: NDArray[np.uint8]) -> NDArray[np.int64]: ...
