"""The broker's ``log.dirs`` as KIP-858 sees them: each directory's ``directory.id`` (from its
meta.properties) and whether it is online, plus the partitions a failed directory held.

Kafka's LogDirFailureChannel in one small object: an I/O error on a directory (an append, a
flush, a checkpoint write, opening it at start) makes it offline for good, until the broker
restarts; its partitions are then neither served nor re-created elsewhere on this broker (the
controller moves them, told through the heartbeat's ``OfflineLogDirs``). Bookkeeping only: the
caller (``PartitionLogs``) closes the logs; nothing here touches a file except reading
meta.properties once.
"""

from __future__ import annotations

import logging
import os
import uuid

from kraft.errors import StateFileError
from kraft.log.state_files import META_PROPERTIES_FILE, MetaProperties
from kraft.protocol import uuid_from_base64

log = logging.getLogger("kraft.broker.logs")


class DuplicateLogError(StateFileError):
    """One partition in two log directories: the broker does not start (as Kafka's LogManager)."""


def read_directory_id(log_dir: str) -> uuid.UUID | None:
    """The ``directory.id`` in ``log_dir``'s meta.properties; None if unformatted or unreadable
    (a directory that cannot be read is reported offline by the caller, not here)."""
    try:
        meta = MetaProperties.read(os.path.join(log_dir, META_PROPERTIES_FILE))
    except Exception:  # noqa: BLE001 - any failure to read means "no id known"
        return None
    if meta is None or not meta.directory_id:
        return None
    try:
        return uuid_from_base64(meta.directory_id)
    except ValueError:
        return None


class LogDirStates:
    """Invariant: every path in ``offline`` is one of ``paths``; ``offline_partitions`` maps
    each partition that was in a failed directory to that directory."""

    def __init__(self, paths, ids: dict | None = None):
        self.paths = list(paths)
        #: path -> directory.id (paths without one are missing: unformatted test dirs)
        self.ids: dict[str, uuid.UUID] = dict(ids) if ids is not None else {}
        self._by_id = {v: k for k, v in self.ids.items()}
        #: path -> why it went offline
        self.offline: dict[str, str] = {}
        #: (topic, partition) -> the failed path that held it
        self.offline_partitions: dict[tuple[str, int], str] = {}

    @classmethod
    def read(cls, paths) -> "LogDirStates":
        ids = {}
        for p in paths:
            d = read_directory_id(p)
            if d is not None:
                ids[p] = d
        return cls(paths, ids)

    def id_of(self, path: str) -> uuid.UUID | None:
        return self.ids.get(path)

    def path_of(self, directory_id) -> str | None:
        return self._by_id.get(directory_id)

    def online(self) -> list[str]:
        return [p for p in self.paths if p not in self.offline]

    def is_online(self, path: str) -> bool:
        return path not in self.offline

    def offline_ids(self) -> list[uuid.UUID]:
        """What the heartbeat reports as ``OfflineLogDirs``."""
        return [self.ids[p] for p in self.paths if p in self.offline and p in self.ids]

    def is_offline_partition(self, tp) -> bool:
        return tp in self.offline_partitions

    def mark_offline(self, path: str, reason: str, partitions=()) -> bool:
        """Record ``path`` as failed with the partitions it held; False if it already was."""
        if path in self.offline:
            return False
        self.offline[path] = reason
        for tp in partitions:
            self.offline_partitions[tp] = path
        log.error("log directory %s is offline (%s): %d partitions in it stop being served", path, reason,
                  len(partitions))
        return True
