"""Type stubs for ``kraft._native._metadata`` (see ``kraft/metadata/batch_codec.py`` for the twin)."""

from collections.abc import Callable
from typing import Any

def configure(uuid_factory: Callable[[bytes], Any], migrating_dir: Any, cache_limit: int) -> None: ...
# One item per value: (3, topic_id, partition_id, fields) | (api_key, version, fields) | None.
def decode_values(values: list[bytes | None], intern: dict, dir_cache: dict) -> list[tuple | None]: ...
# Ids of the partitions (id -> registration) ``broker`` leads or is in the ISR (with_elr: or ELR) of;
# which=1 only those it leads, which=2 only those it does not.
def partitions_touching(partitions: dict, broker: int, with_elr: bool, which: int = 0) -> list: ...
