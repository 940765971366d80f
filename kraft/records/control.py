"""KRaft control records: the values carried in control batches, and their keys.

A control record's key is ``int16 version (0) + int16 type``; its value is a flexible
message at its own schema version whose first field is ``Version`` (no frame header).
Encoded here by hand because the records layer sits below ``kraft.protocol``. Unknown
control types decode to ``None`` (Kafka ignores them); malformed known ones raise
:class:`CorruptRecordError`. Pure data: no I/O, no batch building beyond the helpers
at the bottom.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kraft.errors import CorruptRecordError
from kraft.records._pure_varint import decode_unsigned_varint, encode_unsigned_varint
from kraft.records.format import ControlType
from kraft.types import Endpoint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_KEY = struct.Struct(">hh")


@dataclass(frozen=True)
class LeaderChangeMessage:
    leader_id: int
    voters: tuple = ()
    granting_voters: tuple = ()
    version: int = 0
    TYPE = ControlType.LEADER_CHANGE


@dataclass(frozen=True)
class SnapshotHeaderRecord:
    last_contained_log_timestamp: int
    version: int = 0
    TYPE = ControlType.SNAPSHOT_HEADER


@dataclass(frozen=True)
class SnapshotFooterRecord:
    version: int = 0
    TYPE = ControlType.SNAPSHOT_FOOTER


@dataclass(frozen=True)
class KRaftVersionRecord:
    kraft_version: int
    version: int = 0
    TYPE = ControlType.KRAFT_VERSION


@dataclass(frozen=True)
class Voter:
    voter_id: int
    directory_id: bytes = bytes(16)
    endpoints: tuple = ()
    min_supported_version: int = 0
    max_supported_version: int = 0


@dataclass(frozen=True)
class VotersRecord:
    voters: tuple = field(default_factory=tuple)
    version: int = 0
    # kraft's own (seed 002): the voter set a reassignment is moving to, or None. Written as
    # a tagged field of the record (tag TARGET_VOTERS_TAG) so Kafka's readers, which skip
    # unknown tags, still parse the record; each step's record carries the target forward.
    target_voters: tuple | None = None
    TYPE = ControlType.KRAFT_VOTERS


#: Tag of VotersRecord's TargetVoters: far above any tag Kafka numbers from 0 upwards.
TARGET_VOTERS_TAG = 10002


# --- a tiny flexible-message writer/reader ---------------------------------------------


def _compact_array(items, write_item) -> bytes:
    return encode_unsigned_varint(len(items) + 1) + b"".join(write_item(i) for i in items)


def _compact_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return encode_unsigned_varint(len(raw) + 1) + raw


_NO_TAGS = b"\x00"


class _Reader:
    """Bounds-checked cursor; every short read is CorruptRecordError."""

    def __init__(self, data):
        self.data = bytes(data)
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptRecordError("control record value is truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def fixed(self, s: struct.Struct) -> int:
        return s.unpack(self.take(s.size))[0]

    def uvarint(self) -> int:
        v, self.pos = decode_unsigned_varint(self.data, self.pos)
        return v

    def array_len(self) -> int:
        n = self.uvarint() - 1
        if n < 0 or n > len(self.data) - self.pos:
            raise CorruptRecordError(f"invalid array length {n} in control record")
        return n

    def string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptRecordError("null string in control record")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError("control record string is not UTF-8") from exc

    def tags(self) -> None:
        """Skip a tagged-field section (unknown tags are allowed and ignored)."""
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def end(self) -> None:
        if self.pos != len(self.data):
            raise CorruptRecordError(f"{len(self.data) - self.pos} trailing bytes in control record")


# --- encode ------------------------------------------------------------------------------


def encode_control_value(msg) -> bytes:
    """The value bytes of a control record for one of the message dataclasses above."""
    v = _I16.pack(msg.version)
    if isinstance(msg, LeaderChangeMessage):
        if msg.version not in (0, 1):
            raise ValueError(f"LeaderChangeMessage version {msg.version} is not 0 or 1")
        # v1 adds VoterDirectoryId; we do not track directory ids yet, so write the zero uuid.
        dir_id = bytes(16) if msg.version >= 1 else b""
        voter = (lambda vid: _I32.pack(vid) + dir_id + _NO_TAGS)
        return (v + _I32.pack(msg.leader_id) + _compact_array(msg.voters, voter)
                + _compact_array(msg.granting_voters, voter) + _NO_TAGS)
    if isinstance(msg, SnapshotHeaderRecord):
        return v + _I64.pack(msg.last_contained_log_timestamp) + _NO_TAGS
    if isinstance(msg, SnapshotFooterRecord):
        return v + _NO_TAGS
    if isinstance(msg, KRaftVersionRecord):
        return v + _I16.pack(msg.kraft_version) + _NO_TAGS
    if isinstance(msg, VotersRecord):
        def endpoint(e: Endpoint) -> bytes:
            return _compact_string(e.name) + _compact_string(e.host) + _U16.pack(e.port) + _NO_TAGS

        def voter(vt: Voter) -> bytes:
            if len(vt.directory_id) != 16:
                raise ValueError("directory_id must be 16 bytes")
            return (_I32.pack(vt.voter_id) + bytes(vt.directory_id)
                    + _compact_array(vt.endpoints, endpoint)
                    + _I16.pack(vt.min_supported_version) + _I16.pack(vt.max_supported_version)
                    + _NO_TAGS + _NO_TAGS)

        tags = _NO_TAGS
        if msg.target_voters is not None:
            body = _compact_array(msg.target_voters, voter)
            tags = (encode_unsigned_varint(1) + encode_unsigned_varint(TARGET_VOTERS_TAG)
                    + encode_unsigned_varint(len(body)) + body)
        return v + _compact_array(msg.voters, voter) + tags
    raise TypeError(f"not a control message: {msg!r}")


def control_key(control_type: int) -> bytes:
    return _KEY.pack(0, control_type)


# --- decode ------------------------------------------------------------------------------


def decode_control_key(key) -> int:
    """The ControlType number in a control record key."""
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    version, ctype = _KEY.unpack_from(bytes(key[:4]))
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    return ctype  # a newer key version is read as version 0, as Kafka's parseTypeId does


def decode_control_record(key, value):
    """Decode a control record; returns one of the dataclasses, or None for unknown types."""
    ctype = decode_control_key(key)
    if value is None:
        raise CorruptRecordError("control record without a value")
    r = _Reader(value)
    version = r.fixed(_I16)
    if ctype == ControlType.LEADER_CHANGE:
        leader = r.fixed(_I32)
        groups = []
        for _ in range(2):
            ids = []
            for _ in range(r.array_len()):
                ids.append(r.fixed(_I32))
                if version >= 1:
                    r.take(16)  # VoterDirectoryId (v1)
                r.tags()
            groups.append(tuple(ids))
        msg = LeaderChangeMessage(leader, groups[0], groups[1], version)
    elif ctype == ControlType.SNAPSHOT_HEADER:
        msg = SnapshotHeaderRecord(r.fixed(_I64), version)
    elif ctype == ControlType.SNAPSHOT_FOOTER:
        msg = SnapshotFooterRecord(version)
    elif ctype == ControlType.KRAFT_VERSION:
        msg = KRaftVersionRecord(r.fixed(_I16), version)
    elif ctype == ControlType.KRAFT_VOTERS:
        voters = _read_voters(r)
        target = None
        for _ in range(r.uvarint()):  # the record's tagged fields
            tag, size = r.uvarint(), r.uvarint()
            data = r.take(size)
            if tag == TARGET_VOTERS_TAG:
                sub = _Reader(data)
                target = _read_voters(sub)
                sub.end()
        r.end()
        return VotersRecord(voters, version, target)
    else:
        return None
    r.tags()
    r.end()
    return msg


def _read_voters(r: _Reader) -> tuple:
    voters = []
    for _ in range(r.array_len()):
        vid, dir_id = r.fixed(_I32), r.take(16)
        eps = []
        for _ in range(r.array_len()):
            eps.append(Endpoint(r.string(), r.string(), r.fixed(_U16)))
            r.tags()
        lo, hi = r.fixed(_I16), r.fixed(_I16)
        r.tags()  # KRaftVersionFeature struct
        r.tags()  # Voter struct
        voters.append(Voter(vid, dir_id, tuple(eps), lo, hi))
    return tuple(voters)
