"""Type stubs for ``kraft._native._columns`` (twin: ``kraft/records/_pure_columns.py``)."""

from typing import Any, TypeAlias

_Bytes: TypeAlias = bytes | bytearray | memoryview

# Returns 18 numpy arrays (see kraft.records.log_columns for their order and meaning).
def log_columns(buffer: _Bytes, positions: Any, first_offset: int, end_offset: int) -> tuple[Any, ...]: ...
