"""Formatting a node's storage, as ``kafka-storage.sh format`` does, and Kafka-style uuids.

``format_storage`` writes ``meta.properties`` (version 1, cluster.id, node.id, a fresh
directory.id) into every log directory and the metadata log directory, and
``bootstrap.checkpoint`` (the finalized feature levels, ``metadata.version`` first) into the
metadata log directory. It holds every directory's ``.lock`` while it works, so it cannot
format under a running node, and checks them all before writing any: a directory formatted for another cluster or node, or already formatted
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
from kraft.log.bootstrap import DEFAULT_RELEASE, METADATA_VERSION, metadata_version_level, write_bootstrap_checkpoint
from kraft.log.dir_lock import lock_directories
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


def parse_features(items) -> dict[str, int]:
    """``--feature name=level`` items (kafka-storage format's syntax)."""
    out = {}
    for item in items or []:
        name, sep, level = item.partition("=")
        if not sep or not name.strip() or not level.strip().lstrip("-").isdigit():
            raise KraftError(f"--feature: expected NAME=LEVEL, got {item!r}")
        if not -32768 <= int(level) <= 32767:
            raise KraftError(f"--feature: level of {name.strip()} out of the int16 range")
        out[name.strip()] = int(level)
    return out


def finalized_features(release_version: str | None = None, features=None) -> dict[str, int]:
    """The feature levels ``format`` writes: metadata.version from ``--release-version``
    (or ``--feature metadata.version=N``, or the default release), then any other ``--feature``."""
    chosen = dict(features or {})
    if release_version is not None and METADATA_VERSION in chosen:
        raise KraftError("--release-version and --feature metadata.version=... are exclusive")
    if METADATA_VERSION in chosen:
        metadata_version_level(str(chosen[METADATA_VERSION]))  # must be a known level
    else:
        chosen[METADATA_VERSION] = metadata_version_level(release_version or DEFAULT_RELEASE)
    return chosen


def format_storage(cfg: NodeConfig, cluster_id: str, *, ignore_formatted: bool = False,
                   features: dict[str, int] | None = None) -> list[str]:
    """Format every directory; returns the directories written. ``features`` (default: the
    default release's metadata.version) go to bootstrap.checkpoint. Raises KraftError."""
    if not valid_cluster_id(cluster_id):
        raise KraftError(f"cluster id {cluster_id!r} is not a Kafka uuid (use `kraft storage random-uuid`)")
    features = features or finalized_features()
    dirs = list(dict.fromkeys([cfg.metadata_log_dir, *cfg.log_dirs]))
    with lock_directories(dirs, create=True):
        return _format_locked(cfg, cluster_id, dirs, ignore_formatted, features)


def _format_locked(cfg, cluster_id, dirs, ignore_formatted, features) -> list[str]:
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
        if d == cfg.metadata_log_dir:
            write_bootstrap_checkpoint(d, features)
        MetaProperties(cluster_id, cfg.node_id, random_uuid()).write(path)
    return [d for d, _ in todo]
