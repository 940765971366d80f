"""Type stubs for ``kraft._native._builder`` (see ``kraft/records/_pure_builder.py`` for the twin)."""

from collections.abc import Sequence
from typing import SupportsIndex, TypeAlias

# A nullable byte string: any bytes-like object, or None for a null key/value.
_Blob: TypeAlias = bytes | bytearray | memoryview | None
# Record headers: (key, value) pairs; a str key is UTF-8 encoded.
_Headers: TypeAlias = Sequence[tuple[str | bytes, bytes | bytearray | memoryview | None]]

def build_batch(values: Sequence[_Blob], keys: Sequence[_Blob] | None = None,
                headers: Sequence[_Headers] | None = None,
                timestamps: Sequence[SupportsIndex] | None = None, *, base_offset: int = 0,
                partition_leader_epoch: int = -1, timestamp: SupportsIndex | None = None,
                compression: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, transactional: bool = False, control: bool = False,
                log_append_time: bool = False) -> bytes: ...
def build_control_batch(control_type: int, value: _Blob, *, base_offset: int = 0,
                        partition_leader_epoch: int = -1,
                        timestamp: SupportsIndex | None = None) -> bytes: ...

class RecordBatchBuilder:
    def __init__(self, *, compression: int = 0, base_offset: int = 0,
                 partition_leader_epoch: int = -1, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
                 control: bool = False, log_append_time: bool = False,
                 max_bytes: int | None = None) -> None: ...
    def __len__(self) -> int: ...
    def size_in_bytes(self) -> int: ...
    def append(self, value: _Blob, key: _Blob = None, headers: _Headers | None = None,
               timestamp: SupportsIndex | None = None) -> int | None: ...
    def build(self) -> bytes: ...
