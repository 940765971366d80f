"""The consumer protocol embedded in classic JoinGroup/SyncGroup: ConsumerProtocolSubscription and
ConsumerProtocolAssignment (Kafka's clients JSON files: versions 0-3, not flexible, an int16
version first). A consumer group reads a classic member's subscription (its topics, the
partitions it owns, its rack) and writes its assignment in them, so classic consumers and
KIP-848 consumers can share a group. A newer version than 3 is read as 3 (Kafka's rule: new
fields are ignorable). Schemas and codec only.
"""

from __future__ import annotations

import struct

from kraft.errors import KraftError
from kraft.protocol.message import Message
from kraft.protocol.schema import BYTES, INT32, STRING, Array, Field, Struct

_I16 = struct.Struct(">h")
HIGHEST = 3


class _Embedded(Message):
    __slots__ = ()
    REGISTRY: dict = {}


class TopicPartition(Struct):
    FIELDS = (
        Field("topic", STRING),
        Field("partitions", Array(INT32)),
    )


class ConsumerProtocolSubscription(_Embedded):
    API_KEY = 1
    VERSIONS = "0-3"
    FIELDS = (
        Field("topics", Array(STRING)),
        Field("user_data", BYTES, nullable="0+", default=None),
        Field("owned_partitions", Array(TopicPartition), "1+", ignorable=True),
        Field("generation_id", INT32, "2+", default=-1, ignorable=True),
        Field("rack_id", STRING, "3+", nullable="3+", default=None, ignorable=True),
    )


class ConsumerProtocolAssignment(_Embedded):
    API_KEY = 2
    VERSIONS = "0-3"
    FIELDS = (
        Field("assigned_partitions", Array(TopicPartition)),
        Field("user_data", BYTES, nullable="0+", default=None),
    )


def _read(cls, data):
    data = bytes(data or b"")
    if len(data) < 2:
        return None
    (version,) = _I16.unpack_from(data, 0)
    if version < 0:
        return None
    version = min(version, HIGHEST)
    try:
        return version, cls.decode(memoryview(data)[2:], version)
    except KraftError:
        return None


def parse_subscription(metadata):
    """(version, ConsumerProtocolSubscription) or None when the bytes are not one."""
    return _read(ConsumerProtocolSubscription, metadata)


def parse_assignment(data) -> dict:
    """{topic name: set of partitions} of a ConsumerProtocolAssignment ({} for none or bad bytes)."""
    got = _read(ConsumerProtocolAssignment, data)
    out: dict = {}
    for tp in (got[1].assigned_partitions if got else ()):
        out.setdefault(tp.topic, set()).update(tp.partitions)
    return out


def assignment_bytes(version: int, partitions: dict) -> bytes:
    """``partitions`` ({topic name: partitions}) as a ConsumerProtocolAssignment at ``version``."""
    version = max(0, min(version, HIGHEST))
    value = ConsumerProtocolAssignment(assigned_partitions=[
        TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(partitions.items()) if ps])
    return _I16.pack(version) + value.encode(version)
