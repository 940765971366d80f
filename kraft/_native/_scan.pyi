"""Type stubs for ``kraft._native._scan`` (see ``scan_batches`` in ``kraft/records/_pure_reader.py``)."""

from typing import Any

# Returns what kraft.records handed configure() as batch_scan: a BatchScan.
def scan_batches(buffer: bytes | bytearray | memoryview, position: int = 0) -> Any: ...
def assign_offsets(buffer: bytearray | memoryview, base_offset: int,
                   partition_leader_epoch: int) -> int: ...
