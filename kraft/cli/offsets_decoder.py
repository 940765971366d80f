"""``kraft dump-log --offsets-decoder``: ``__consumer_offsets`` records as Kafka 4's
``kafka-dump-log --offsets-decoder`` prints them: ``key: {"type":"1","data":{...}}`` and
``payload: {"version":"3","data":{...}}`` (``<DELETE>`` for a tombstone), fields in camelCase
as the schemas' JSON converters write them, and in a classic group's metadata the members'
subscription and assignment decoded when the group uses the consumer protocol.
"""

from __future__ import annotations

import base64

from kraft.coordinator.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kraft.coordinator.group_records import GroupMetadataValue, decode_record
from kraft.errors import KraftError
from kraft.metadata.json_form import compact_json, message_json


def offsets_key_and_payload(key, value, offset: int) -> tuple[str, str | None]:
    """The two strings kafka-dump-log prints for one record (payload None when it prints none)."""
    if key is None:
        return (f"Error at offset {offset}, skipping. Failed to decode message at offset {offset} using "
                "offset topic decoder (message had a missing key)", None)
    try:
        got = decode_record(bytes(key), None if value is None else bytes(value))
    except KraftError as exc:
        return f"Error at offset {offset}, skipping. {exc}", None
    if got is None:
        kind = int.from_bytes(bytes(key[:2]), "big", signed=True)
        return f"Unknown record type {kind} at offset {offset}, skipping.", None
    k, v = got
    kind = int.from_bytes(bytes(key[:2]), "big", signed=True)
    key_text = compact_json({"type": str(kind), "data": message_json(k, kind)})
    if v is None:
        return key_text, "<DELETE>"
    version = int.from_bytes(bytes(value[:2]), "big", signed=True)
    data = message_json(v, version)
    if isinstance(v, GroupMetadataValue) and v.protocol_type == "consumer":
        for member in data.get("members") or ():
            _embedded(member, "subscription", ConsumerProtocolSubscription)
            _embedded(member, "assignment", ConsumerProtocolAssignment)
    return key_text, compact_json({"version": str(version), "data": data})


def _embedded(member: dict, field: str, cls) -> None:
    """Replace the base64 bytes of ``field`` by the decoded struct; keep them if they do not decode."""
    try:
        raw = base64.b64decode(member[field])
        version = int.from_bytes(raw[:2], "big", signed=True)
        member[field] = message_json(cls.decode(memoryview(raw)[2:], version), version)
    except (KeyError, ValueError, TypeError, KraftError):
        pass
