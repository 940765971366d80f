"""``__consumer_offsets`` records in Kafka's own key/value schemas, so Kafka's tools read the topic.

Facts from Kafka's group-coordinator ``OffsetCommitKey/Value.json`` and
``GroupMetadataKey/Value.json``: a record key is an int16 *record type* (Kafka calls it the key
version: 0 or 1 offset commit, 2 group metadata) followed by the key struct; a value is an int16
value version followed by the value struct. Kafka writes OffsetCommitKey as type 1,
OffsetCommitValue at v3 (v1 only when an expire timestamp is set) and GroupMetadataValue at v3
(``MetadataVersion.offsetCommitValueVersion`` / ``groupMetadataValueVersion`` since IBP 2.3);
none of these versions is flexible. A null value is a tombstone (offset or group deleted).
Also where a group lives: ``partition_for`` is Kafka's ``Utils.abs(groupId.hashCode) % n``.
"""

from __future__ import annotations

import functools

import struct
from dataclasses import dataclass

from kraft.errors import ProtocolError
from kraft.protocol.message import Message
from kraft.protocol.schema import BYTES, INT32, INT64, STRING, Array, Field, Struct

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_COMMIT_KEY_TYPES = (0, 1)
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_V3_HEAD = struct.Struct(">hqih")  # value version, offset, leader epoch, metadata length
_STRING_MAX = 0x7FFF


class _GroupRecord(Message):
    """A family base of its own: these are not API messages (no collision with request keys)."""
    __slots__ = ()
    REGISTRY: dict = {}


class OffsetCommitKey(_GroupRecord):
    API_KEY = 1000
    VERSIONS = "0-1"
    FIELDS = (
        Field("group", STRING),
        Field("topic", STRING),
        Field("partition", INT32),
    )


class OffsetCommitValue(_GroupRecord):
    API_KEY = 1001
    VERSIONS = "0-4"
    FLEXIBLE = "4+"
    FIELDS = (
        Field("offset", INT64),
        Field("leader_epoch", INT32, "3+", default=-1, ignorable=True),
        Field("metadata", STRING),
        Field("commit_timestamp", INT64),
        Field("expire_timestamp", INT64, "1", default=-1, ignorable=True),
    )


class GroupMetadataKey(_GroupRecord):
    API_KEY = 1002
    VERSIONS = "2"
    FIELDS = (Field("group", STRING, "2"),)


class GroupMetadataValue(_GroupRecord):
    API_KEY = 1003
    VERSIONS = "0-4"
    FLEXIBLE = "4+"

    class MemberMetadata(Struct):
        FIELDS = (
            Field("member_id", STRING),
            Field("group_instance_id", STRING, "3+", nullable="3+", default=None, ignorable=True),
            Field("client_id", STRING),
            Field("client_host", STRING),
            Field("rebalance_timeout", INT32, "1+", default=-1, ignorable=True),
            Field("session_timeout", INT32),
            Field("subscription", BYTES),
            Field("assignment", BYTES),
        )

    FIELDS = (
        Field("protocol_type", STRING),
        Field("generation", INT32),
        Field("protocol", STRING, nullable="0+"),
        Field("leader", STRING, nullable="0+"),
        Field("current_state_timestamp", INT64, "2+", default=-1, ignorable=True),
        Field("members", Array(MemberMetadata)),
    )


@dataclass(frozen=True)
class GroupRecord:
    """One ``__consumer_offsets`` record as key and value bytes (value None: a tombstone)."""
    key: bytes
    value: bytes | None


def _offset_key(group: str, topic: str, partition: int) -> bytes:
    return _key_prefix(group, topic) + _I32.pack(partition)


@functools.lru_cache(maxsize=4096)  # a group commits the same few topics over and over
def _key_prefix(group: str, topic: str) -> bytes:
    """OffsetCommitKey v1 up to its partition: the record type, then the group and topic as
    (non-flexible) STRINGs. The Message codec's own encoding of the same key is the test's
    reference; this is the commit path's, called once per committed partition."""
    g, t = group.encode("utf-8"), topic.encode("utf-8")
    if len(g) > _STRING_MAX or len(t) > _STRING_MAX:  # the codec's error, not a silent cut
        return _I16.pack(OFFSET_COMMIT_KEY_VERSION) + OffsetCommitKey(group=group, topic=topic, partition=0).encode(
            OFFSET_COMMIT_KEY_VERSION)[:-4]
    return _I16.pack(OFFSET_COMMIT_KEY_VERSION) + _I16.pack(len(g)) + g + _I16.pack(len(t)) + t


def offset_commit_record(group: str, topic: str, partition: int, offset: int, leader_epoch: int,
                         metadata: str, commit_ms: int) -> GroupRecord:
    key = _offset_key(group, topic, partition)
    meta = (metadata or "").encode("utf-8")
    if len(meta) > _STRING_MAX:
        value = OffsetCommitValue(offset=offset, leader_epoch=leader_epoch, metadata=metadata,
                                  commit_timestamp=commit_ms).encode(OFFSET_COMMIT_VALUE_VERSION)
        return GroupRecord(key, _I16.pack(OFFSET_COMMIT_VALUE_VERSION) + value)
    # OffsetCommitValue v3: offset, leader epoch, metadata, commit timestamp (not flexible)
    return GroupRecord(key, _VALUE_V3_HEAD.pack(OFFSET_COMMIT_VALUE_VERSION, offset, leader_epoch, len(meta))
                       + meta + _I64.pack(commit_ms))


def offset_tombstone(group: str, topic: str, partition: int) -> GroupRecord:
    key = _offset_key(group, topic, partition)
    return GroupRecord(key, None)


def group_metadata_record(group: str, value: GroupMetadataValue) -> GroupRecord:
    key = _I16.pack(GROUP_METADATA_KEY_TYPE) + GroupMetadataKey(group=group).encode(2)
    return GroupRecord(key, _I16.pack(GROUP_METADATA_VALUE_VERSION) + value.encode(GROUP_METADATA_VALUE_VERSION))


def group_tombstone(group: str) -> GroupRecord:
    return GroupRecord(_I16.pack(GROUP_METADATA_KEY_TYPE) + GroupMetadataKey(group=group).encode(2), None)


def decode_record(key, value):
    """(key struct, value struct or None) of a ``__consumer_offsets`` record; None for a record
    type this coordinator does not know (share-group types are skipped, as a loader of an
    older version would). ProtocolError for bytes that do not decode."""
    if key is None or len(key) < 2:
        raise ProtocolError("a __consumer_offsets record without a key")
    (kind,) = _I16.unpack_from(key, 0)
    if kind in OFFSET_COMMIT_KEY_TYPES:
        k = OffsetCommitKey.decode(memoryview(key)[2:], kind)
        cls = OffsetCommitValue
    elif kind == GROUP_METADATA_KEY_TYPE:
        k = GroupMetadataKey.decode(memoryview(key)[2:], kind)
        cls = GroupMetadataValue
    elif kind in _consumer_types():
        key_cls, cls = _consumer_types()[kind]
        k = key_cls.decode(memoryview(key)[2:], kind)
    else:
        return None
    if value is None:
        return k, None
    if len(value) < 2:
        raise ProtocolError("a __consumer_offsets value without a version")
    (version,) = _I16.unpack_from(value, 0)
    if not cls.supports(version):
        raise ProtocolError(f"{cls.__name__} version {version} is unknown")
    return k, cls.decode(memoryview(value)[2:], version)


_CONSUMER_TYPES: dict = {}


def _consumer_types() -> dict:
    """The KIP-848 record types (``consumer_records`` imports this module, hence the late import)."""
    if not _CONSUMER_TYPES:
        from kraft.coordinator.consumer_records import RECORD_TYPES
        _CONSUMER_TYPES.update(RECORD_TYPES)
    return _CONSUMER_TYPES


@functools.lru_cache(maxsize=65536)  # every group request asks it again for the same few ids
def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % partitions``: ``Utils.abs`` maps MIN_VALUE to 0."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
