"""Type stubs for ``kraft._native._wire`` (the twin of the Python plans in ``kraft/protocol/codec.py``)."""

from typing import Any, Callable

#: schema type name ("int8" ... "records", "struct", "array") -> the interpreter's kind code.
KINDS: dict[str, int]

class Hooks:
    def __init__(self, *, protocol_error: type, encode_error: type, unsupported: Callable[..., Exception],
                 not_null: Callable[[str, str], Exception], uuid_from_wire: Callable[[bytes], Any],
                 merge_unknown: Callable[..., list], spliced_frame: type, splice_bytes: int,
                 uuid_type: type) -> None: ...

class Plan:
    def __init__(self, cls: type, owner: str, version: int, flexible: bool, hooks: Hooks) -> None: ...
    def fill(self, untagged: list[Slot], tagged: list[Slot], absent: list[Slot], null_checks: list[Slot]) -> None: ...
    def encode(self, o: Any, out: bytearray) -> None: ...
    def decode(self, buf: memoryview, pos: int) -> tuple[Any, int]: ...

class Slot:
    def __init__(self, name: str, kind: int, elem: int = ..., nullable: bool = ..., sub: Plan | None = ...,
                 elem_min: int = ..., tag: int = ..., default: Any = ..., factory: Callable[[], Any] | None = ...,
                 field: Any = ..., ignorable: bool = ..., fresh: Plan | None = ...) -> None: ...
