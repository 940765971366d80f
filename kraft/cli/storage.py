"""``kraft storage``: ``random-uuid`` and ``format``, as ``kafka-storage.sh`` has them.

``format`` writes ``meta.properties`` (version 1, cluster.id, node.id, a fresh directory.id)
into every log directory and the metadata log directory, and refuses directories already
formatted for another cluster or node unless ``--ignore-formatted`` is given (then a
directory already formatted identically is left alone, as Kafka does).
"""

from __future__ import annotations

import base64
import os
import re
import sys
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


def _valid_cluster_id(text: str) -> bool:
    """Kafka's Uuid.fromString: 22 characters of the URL-safe base64 alphabet, 16 bytes."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}", text or ""):
        return False
    return len(base64.urlsafe_b64decode(text + "==")) == 16


def format_storage(cfg: NodeConfig, cluster_id: str, *, ignore_formatted: bool = False) -> list[str]:
    """Format every directory; returns the directories written. Raises KraftError."""
    if not _valid_cluster_id(cluster_id):
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


def _random_uuid_cmd(args) -> int:
    print(random_uuid())
    return 0


def _format_cmd(args) -> int:
    try:
        overrides = dict(kv.split("=", 1) for kv in args.override or [])
        cfg = NodeConfig.from_file(args.config, overrides)
        written = format_storage(cfg, args.cluster_id, ignore_formatted=args.ignore_formatted)
    except (KraftError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for d in written:
        print(f"Formatting {d} with metadata.version for cluster {args.cluster_id}.")
    if not written:
        print("All of the log directories are already formatted.")
    return 0


def register(sub) -> None:
    p = sub.add_parser("storage", help="format log directories, make cluster ids")
    ss = p.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    r = ss.add_parser("random-uuid", help="print a new cluster id")
    r.set_defaults(func=_random_uuid_cmd)
    f = ss.add_parser("format", help="write meta.properties into the node's log directories")
    f.add_argument("-t", "--cluster-id", required=True)
    f.add_argument("-c", "--config", required=True, help="server.properties")
    f.add_argument("-g", "--ignore-formatted", action="store_true")
    f.add_argument("--override", action="append", metavar="KEY=VALUE")
    f.set_defaults(func=_format_cmd)
