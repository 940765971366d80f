"""Formatting a node's storage, as ``kafka-storage.sh format`` does, and Kafka-style uuids.

``format_storage`` writes ``meta.properties`` (version 1, cluster.id, node.id, a fresh
directory.id) into every log directory and the metadata log directory. It checks them all
before writing any: a directory formatted for another cluster or node, or already formatted
without ``ignore_formatted``, refuses the whole operation and nothing is written. Used by
the ``kraft storage`` command and by the local multi-process cluster; no sockets, no asyncio.
"""

from __future__ import annotations

import base64
import os
import re
import uuid

from kraft.config import NodeConfig
from kraft.errors import KraftError
from kraft.log.state_files import META_PROPERTIES_FILE, MetaProperties


def random_uuid() -> str:
    """Kafka's Uuid.randomUuid().toString(): URL-safe base64 of 16 bytes, no padding, never
    starting with '-' (Kafka re-draws those so the id is usable on command lines)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def valid_cluster_id(text: str) -> bool:
    """Kafka's Uuid.fromString: 22 characters of the URL-safe base64 alphabet, 16 bytes."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}", text or ""):
        return False
    return len(base64.urlsafe_b64decode(text + "==")) == 16


def format_storage(cfg: NodeConfig, cluster_id: str, *, ignore_formatted: bool = False) -> list[str]:
    """Format every directory; returns the directories written. Raises KraftError."""
    if not valid_cluster_id(cluster_id):
        raise KraftError(f"cluster id {cluster_id!r} is not a Kafka uuid (use `kraft storage random-uuid`)")
    dirs = list(dict.fromkeys([cfg.metadata_log_dir, *cfg.log_dirs]))
    # Check every directory before writing any, so a refusal leaves nothing half-formatted.
    todo = []
    for d in dirs:
        path = os.path.join(d, META_PROPERTIES_FILE)
        existing = MetaProperties.read(path) if os.path.exists(path) else None
        if existing is None:
            todo.append((d, path))
            continue
        if not ignore_formatted:
            raise KraftError(f"log directory {d} is already formatted (use --ignore-formatted to skip it)")
        if existing.cluster_id != cluster_id or existing.node_id != cfg.node_id:
            raise KraftError(f"log directory {d} is formatted for cluster {existing.cluster_id}, "
                             f"node {existing.node_id}")
    for d, path in todo:
        os.makedirs(d, exist_ok=True)
        MetaProperties(cluster_id, cfg.node_id, random_uuid()).write(path)
    return [d for d, _ in todo]
