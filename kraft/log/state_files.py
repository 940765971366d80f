"""The small state files of a KRaft node, in Kafka's formats: ``quorum-state`` (one-line
JSON of QuorumStateData plus ``data_version``) and ``meta.properties`` (Java properties).

Both are written temp → fsync → rename → fsync directory, so a crash leaves the old or the
new file, never a mix. Reading is strict: a malformed file raises :class:`StateFileError`
whose message names the file and what is wrong with it. What the fields mean (elections,
cluster identity) belongs to Raft and the server; this module only stores them.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass

from kraft.config import parse_properties  # one Java .properties reader for the whole project
from kraft.errors import StateFileError
from kraft.log import files
from kraft.types import uuid_text

QUORUM_STATE_FILE = "quorum-state"
META_PROPERTIES_FILE = "meta.properties"
_I32 = (-(1 << 31), (1 << 31) - 1)
_I64 = (-(1 << 63), (1 << 63) - 1)
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def _check_uuid(text, what: str, path: str) -> str:
    """Kafka's Uuid string: 16 bytes in URL-safe base64 without padding."""
    if not isinstance(text, str) or len(text) != 22:
        raise StateFileError(f"{what} in {path} is not a Kafka uuid: {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as exc:
        raise StateFileError(f"{what} in {path} is not a Kafka uuid: {text!r}") from exc
    if len(raw) != 16:
        raise StateFileError(f"{what} in {path} is not a Kafka uuid: {text!r}")
    return text


def uuid_text_to_bytes(text: str | None) -> bytes | None:
    """A Kafka uuid string as 16 bytes; None for None or the zero uuid (unknown)."""
    if text is None or text == ZERO_UUID:
        return None
    return base64.urlsafe_b64decode(_check_uuid(text, "uuid", "-") + "==")


def uuid_bytes_to_text(raw: bytes | None) -> str:
    """16 bytes as a Kafka uuid string (the zero uuid for None)."""
    if not raw:
        return ZERO_UUID
    return uuid_text(raw)


# --- quorum-state ---------------------------------------------------------------------------


@dataclass(frozen=True)
class QuorumStateData:
    """Kafka's QuorumStateData. Version 0 (static quorum) has ``cluster_id``,
    ``applied_offset`` and ``current_voters``; version 1 (KIP-853) has ``voted_directory_id``
    instead. ``-1`` means none for the ids and the epoch."""

    leader_id: int = -1
    leader_epoch: int = -1
    voted_id: int = -1
    data_version: int = 0
    cluster_id: str = ""
    applied_offset: int = 0
    current_voters: tuple | None = ()
    voted_directory_id: str = ZERO_UUID

    def to_json(self) -> str:
        """The single line Kafka writes (fields in schema order, then ``data_version``)."""
        if self.data_version == 0:
            voters = None if self.current_voters is None else [{"voterId": v} for v in self.current_voters]
            obj = {"clusterId": self.cluster_id, "leaderId": self.leader_id,
                   "leaderEpoch": self.leader_epoch, "votedId": self.voted_id,
                   "appliedOffset": self.applied_offset, "currentVoters": voters}
        elif self.data_version == 1:
            obj = {"leaderId": self.leader_id, "leaderEpoch": self.leader_epoch,
                   "votedId": self.voted_id, "votedDirectoryId": self.voted_directory_id}
        else:
            raise ValueError(f"quorum-state data_version {self.data_version} is not 0 or 1")
        obj["data_version"] = self.data_version
        return json.dumps(obj, separators=(",", ":"))


def _field(obj: dict, name: str, kind, path: str, lo_hi=None):
    if name not in obj:
        raise StateFileError(f"quorum-state file {path} has no field {name!r}")
    value = obj[name]
    if kind is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise StateFileError(f"field {name!r} in quorum-state file {path} is not an integer: {value!r}")
        if lo_hi and not lo_hi[0] <= value <= lo_hi[1]:
            raise StateFileError(f"field {name!r} in quorum-state file {path} is out of range: {value}")
    elif kind is str and not isinstance(value, str):
        raise StateFileError(f"field {name!r} in quorum-state file {path} is not a string: {value!r}")
    return value


def parse_quorum_state(text: str, path: str) -> QuorumStateData:
    line = text.split("\n", 1)[0]
    if not line.strip():
        raise StateFileError(f"quorum-state file {path} is empty")
    try:
        obj = json.loads(line)
    except ValueError as exc:
        raise StateFileError(f"quorum-state file {path} is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise StateFileError(f"quorum-state file {path} does not hold a JSON object")
    version = _field(obj, "data_version", int, path)
    if version not in (0, 1):
        raise StateFileError(f"quorum-state file {path}: data_version {version} is not within "
                             "the supported versions 0 to 1")
    common = dict(leader_id=_field(obj, "leaderId", int, path, _I32),
                  leader_epoch=_field(obj, "leaderEpoch", int, path, _I32),
                  voted_id=_field(obj, "votedId", int, path, _I32), data_version=version)
    if version == 1:
        return QuorumStateData(**common, voted_directory_id=_check_uuid(
            _field(obj, "votedDirectoryId", str, path), "votedDirectoryId", path))
    if "currentVoters" not in obj:
        raise StateFileError(f"quorum-state file {path} has no field 'currentVoters'")
    voters = obj["currentVoters"]  # nullable in version 0
    if voters is not None:
        if not isinstance(voters, list):
            raise StateFileError(f"field 'currentVoters' in quorum-state file {path} is not a list")
        ids = []
        for v in voters:
            if not isinstance(v, dict):
                raise StateFileError(f"entry of 'currentVoters' in quorum-state file {path} is not an object: {v!r}")
            ids.append(_field(v, "voterId", int, path, _I32))
        voters = tuple(ids)
    return QuorumStateData(**common, cluster_id=_field(obj, "clusterId", str, path),
                           applied_offset=_field(obj, "appliedOffset", int, path, _I64),
                           current_voters=voters)


class QuorumStateFile:
    """``quorum-state`` in the metadata log directory."""

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def in_directory(cls, directory: str) -> "QuorumStateFile":
        return cls(os.path.join(directory, QUORUM_STATE_FILE))

    def read(self) -> QuorumStateData | None:
        """The stored state, None if there is no file. StateFileError if malformed."""
        text = files.read_text(self.path, "quorum-state")
        return None if text is None else parse_quorum_state(text, self.path)

    def write(self, state: QuorumStateData) -> None:
        """Durable on return (Raft persists its vote before answering)."""
        files.atomic_write(self.path, state.to_json().encode("utf-8"))

    def clear(self) -> None:
        for p in (self.path, self.path + files.TEMP_SUFFIX):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


# --- meta.properties ------------------------------------------------------------------------


def _escape(s: str, is_key: bool) -> str:
    out = []
    for k, c in enumerate(s):
        if c in "\\=:#!" or (c == " " and (is_key or k == 0)):
            out.append("\\" + c)
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


@dataclass(frozen=True)
class MetaProperties:
    """``meta.properties`` of a log directory. Version 1 (KRaft) requires ``cluster.id``
    and ``node.id``; ``directory.id`` is optional. Version 0 (ZooKeeper era) uses
    ``broker.id``; it is read but never written by kraft."""

    cluster_id: str | None
    node_id: int
    directory_id: str | None = None
    version: int = 1

    @classmethod
    def read(cls, path: str) -> "MetaProperties | None":
        text = files.read_text(path, "meta.properties")
        return None if text is None else cls.parse(text, path)

    @classmethod
    def parse(cls, text: str, path: str = META_PROPERTIES_FILE) -> "MetaProperties":
        props = parse_properties(text)
        raw_version = props.get("version", "0")
        if raw_version not in ("0", "1"):
            raise StateFileError(f"{path}: unsupported version {raw_version!r} (expected 0 or 1)")
        version = int(raw_version)
        id_key = "node.id" if version == 1 else "broker.id"
        if id_key not in props:
            raise StateFileError(f"{path}: {id_key} was not found")
        try:
            node_id = int(props[id_key])
        except ValueError:
            raise StateFileError(f"{path}: {id_key} is not an integer: {props[id_key]!r}") from None
        if not _I32[0] <= node_id <= _I32[1]:
            raise StateFileError(f"{path}: {id_key} out of range: {node_id}")
        cluster_id = props.get("cluster.id")
        if version == 1 and not cluster_id:
            raise StateFileError(f"{path}: cluster.id was not found")
        directory_id = props.get("directory.id")
        if directory_id is not None:
            _check_uuid(directory_id, "directory.id", path)
        return cls(cluster_id, node_id, directory_id, version)

    def to_text(self, now_ms: int | None = None) -> str:
        props = {"version": str(self.version), "cluster.id": self.cluster_id,
                 "node.id" if self.version == 1 else "broker.id": str(self.node_id),
                 "directory.id": self.directory_id}
        stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y",
                              time.gmtime((now_ms if now_ms is not None else time.time() * 1000) / 1000))
        lines = ["#", f"#{stamp}"]
        lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in sorted(props.items()) if v is not None]
        return "\n".join(lines) + "\n"

    def write(self, path: str) -> None:
        if self.version == 1 and not self.cluster_id:
            raise ValueError("meta.properties version 1 needs a cluster.id")
        files.atomic_write(path, self.to_text().encode("utf-8"))
