"""Kafka's names inside a ``log.dirs`` entry: ``<topic>-<N>`` partition directories, their
``partition.metadata`` file (``version: 0`` / ``topic_id: <base64>``, Kafka's
PartitionMetadataFile), and the ``<topic>-<N>.<uuid>-delete`` / ``-stray`` names a directory
takes before it is removed (Kafka's ``logDeleteDirName``). Names and small files only: no
decisions about which logs exist.
"""

from __future__ import annotations

import re
import uuid

from kraft.errors import StateFileError
from kraft.log import files
from kraft.protocol import uuid_from_base64, uuid_to_base64

PARTITION_METADATA_FILE = "partition.metadata"
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"
FUTURE_SUFFIX = "-future"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
#: Kafka's clean-shutdown marker in each log dir: written last by a clean shutdown, removed
#: once the next start has opened every log (so a crash after that start recovers fully).
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
#: A directory name may have at most 255 bytes; Kafka shortens the topic in renamed names.
_MAX_NAME = 255
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a live partition directory name; None for renamed ones
    (``.<uuid>-delete``, ``-stray``, ``-future``) and anything else."""
    if "." in name and name.rsplit(".", 1)[-1].endswith((DELETE_SUFFIX, STRAY_SUFFIX, FUTURE_SUFFIX)):
        return None
    m = _PARTITION_DIR.match(name)
    if m is None:
        return None
    return m.group(1), int(m.group(2))


def renamed_dir_name(topic: str, partition: int, suffix: str) -> str:
    """``<topic>-<N>.<uuid without dashes><suffix>``, the topic cut so the name fits."""
    tail = f"-{partition}.{uuid.uuid4().hex}{suffix}"
    return topic[: _MAX_NAME - len(tail)] + tail


def is_deleted_dir(name: str) -> bool:
    return name.endswith(DELETE_SUFFIX) and "." in name


def write_partition_metadata(path: str, topic_id: uuid.UUID) -> None:
    files.atomic_write(path, f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}\n".encode())


def read_partition_metadata(path: str) -> uuid.UUID | None:
    """The topic id in ``partition.metadata``, None if the file does not exist."""
    text = files.read_text(path, "partition metadata")
    if text is None:
        return None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != "0":
        raise StateFileError(f"unsupported version {fields.get('version')!r} in {path}")
    try:
        return uuid_from_base64(fields.get("topic_id", ""))
    except ValueError as exc:
        raise StateFileError(f"malformed topic_id in {path}: {exc}") from exc
