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
from kraft.log.replicated_log import METADATA_DIR
from kraft.log.snapshot import SnapshotFileWriter
from kraft.log.state_files import META_PROPERTIES_FILE, MetaProperties, uuid_text_to_bytes
from kraft.records import Endpoint, Voter, VotersRecord
from kraft.records.bootstrap_snapshot import bootstrap_snapshot_bytes
from kraft.types import OffsetAndEpoch

KRAFT_VERSION_MAX = 1


class InitialVoter:
    """One ``--initial-controllers`` entry: ``id@host:port:directory-id``."""

    def __init__(self, node_id: int, host: str, port: int, directory_id: str):
        self.node_id, self.host, self.port, self.directory_id = node_id, host, port, directory_id

    def __repr__(self) -> str:
        return f"{self.node_id}@{self.host}:{self.port}:{self.directory_id}"


def parse_initial_controllers(text: str) -> list[InitialVoter]:
    """Kafka's ``--initial-controllers`` syntax; KraftError naming the bad entry."""
    out = []
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        m = re.fullmatch(r"(\d+)@(\[[^\]]+\]|[^:@\s]+):(\d+):([A-Za-z0-9_-]{22})", item)
        if m is None:
            raise KraftError(f"--initial-controllers: expected id@host:port:directory-id, got {item!r}")
        port = int(m.group(3))
        if not 0 < port <= 65535 or not valid_cluster_id(m.group(4)):
            raise KraftError(f"--initial-controllers: bad port or directory id in {item!r}")
        out.append(InitialVoter(int(m.group(1)), m.group(2).strip("[]"), port, m.group(4)))
    if not out:
        raise KraftError("--initial-controllers: no controllers given")
    ids = [v.node_id for v in out]
    if len(set(ids)) != len(ids):
        raise KraftError("--initial-controllers: a node id appears twice")
    return out


def _advertised_controller(cfg: NodeConfig):
    name = cfg.controller_listener_names[0]
    for e in (*cfg.advertised_listeners, *cfg.listeners):
        if e.name == name:
            return name, e.host or "localhost", e.port
    raise KraftError(f"listeners: no {name} listener to put in the voter set")


def quorum_bootstrap(cfg: NodeConfig, *, standalone: bool = False, initial_controllers: str | None = None,
                     no_initial_controllers: bool = False):
    """(voters for the 0-0 bootstrap checkpoint or None, directory id for the metadata log
    directory or None), following kafka-storage format's rules (KIP-853): with
    ``controller.quorum.voters`` none of the three flags; without it a controller needs
    exactly one of them."""
    chosen = sum([bool(standalone), initial_controllers is not None, bool(no_initial_controllers)])
    if chosen > 1:
        raise KraftError("--standalone, --initial-controllers and --no-initial-controllers are exclusive")
    if cfg.voters:
        if chosen:
            raise KraftError("controller.quorum.voters is set (a static quorum): --standalone, "
                             "--initial-controllers and --no-initial-controllers are for a dynamic quorum "
                             "(controller.quorum.bootstrap.servers)")
        return None, None
    if not cfg.is_controller:
        return None, None
    if not chosen:
        raise KraftError("controller.quorum.voters is not set: a controller of a dynamic quorum needs one of "
                         "--standalone, --initial-controllers or --no-initial-controllers")
    if no_initial_controllers:
        return None, None
    if standalone:
        name, host, port = _advertised_controller(cfg)
        directory_id = random_uuid()
        return [InitialVoter(cfg.node_id, host, port, directory_id)], directory_id
    voters = parse_initial_controllers(initial_controllers)
    mine = [v for v in voters if v.node_id == cfg.node_id]
    return voters, (mine[0].directory_id if mine else None)


def write_bootstrap_voters(directory: str, cfg: NodeConfig, voters: list[InitialVoter]) -> str:
    """Kafka's ``00000000000000000000-0000000000.checkpoint`` with KRaftVersion 1 and the
    Voters record, in the metadata log's partition directory; returns its path."""
    name = cfg.controller_listener_names[0]
    record = VotersRecord(tuple(Voter(v.node_id, uuid_text_to_bytes(v.directory_id) or bytes(16),
                                      (Endpoint(name, v.host, v.port),), 0, KRAFT_VERSION_MAX)
                                for v in sorted(voters, key=lambda v: v.node_id)))
    w = SnapshotFileWriter(os.path.join(directory, METADATA_DIR), OffsetAndEpoch(0, 0), raw=True)
    w.write_raw(bootstrap_snapshot_bytes(record))
    return w.freeze()


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
                   features: dict[str, int] | None = None, standalone: bool = False,
                   initial_controllers: str | None = None, no_initial_controllers: bool = False,
                   bootstrap_values=()) -> list[str]:
    """Format every directory; returns the directories written. ``features`` (default: the
    default release's metadata.version) go to bootstrap.checkpoint. A dynamic quorum
    (KIP-853) takes one of ``standalone`` / ``initial_controllers`` / ``no_initial_controllers``
    (see ``quorum_bootstrap``). ``bootstrap_values``: framed metadata records (``--add-scram``)
    written into bootstrap.checkpoint after the features. Raises KraftError."""
    if not valid_cluster_id(cluster_id):
        raise KraftError(f"cluster id {cluster_id!r} is not a Kafka uuid (use `kraft storage random-uuid`)")
    features = features or finalized_features()
    voters, metadata_dir_id = quorum_bootstrap(cfg, standalone=standalone, initial_controllers=initial_controllers,
                                               no_initial_controllers=no_initial_controllers)
    dirs = list(dict.fromkeys([cfg.metadata_log_dir, *cfg.log_dirs]))
    with lock_directories(dirs, create=True):
        return _format_locked(cfg, cluster_id, dirs, ignore_formatted, features, voters, metadata_dir_id,
                              bootstrap_values)


def _format_locked(cfg, cluster_id, dirs, ignore_formatted, features, voters=None, metadata_dir_id=None,
                   bootstrap_values=()) -> list[str]:
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
        directory_id = random_uuid()
        if d == cfg.metadata_log_dir:
            write_bootstrap_checkpoint(d, features, extra_values=bootstrap_values)
            if voters is not None:
                write_bootstrap_voters(d, cfg, voters)
            directory_id = metadata_dir_id or directory_id
        MetaProperties(cluster_id, cfg.node_id, directory_id).write(path)
    return [d for d, _ in todo]
