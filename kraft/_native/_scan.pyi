"""Type stubs for ``kraft._native._scan`` (see ``scan_batches`` in ``kraft/records/_pure_reader.py``)."""

from typing import Any

# Returns what kraft.records handed configure() as batch_scan: a BatchScan.
def scan_batches(buffer: bytes | bytearray | memoryview, position: int = 0) -> Any: ...
def assign_offsets(buffer: bytearray | memoryview, base_offset: int,
                   partition_leader_epoch: int) -> int: ...
# (outcome 0 ok / 1 corrupt / 2 invalid record / 3 too large, records, any compressed,
#  end of the last whole batch, message or None); see kraft/records/_pure_check.py.
def check_writer_batches(buffer: bytes | bytearray | memoryview, max_batch_bytes: int, max_batch_records: int,
                         allow_control: bool, allow_null_values: bool) -> tuple[int, int, bool, int, str | None]: ...
