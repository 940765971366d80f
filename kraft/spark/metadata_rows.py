"""Decoded metadata-log batches -> Arrow rows of the ``kraft-metadata`` schema.

Metadata records are small and few (a cluster's metadata log, not its data), so each one is
decoded in Python by ``kraft.metadata`` (the same code the controller replays) and the JSON
column is kafka-dump-log's line. Control records are named as Kafka names them. A record
that does not decode becomes a row with ``error`` set (PERMISSIVE) or raises (FAILFAST).
No file access here: that is ``segment_reader``.
"""

from __future__ import annotations

import base64
import json
import uuid

import pyarrow as pa

from kraft.errors import CorruptRecordError
from kraft.metadata import decode_record, record_json
from kraft.records import ControlType, decode_control_key, decode_control_record

METADATA_SCHEMA = pa.schema([
    ("node", pa.string()), ("source", pa.string()), ("offset", pa.int64()), ("leader_epoch", pa.int32()),
    ("timestamp", pa.int64()), ("batch_offset", pa.int64()), ("is_control", pa.bool_()),
    ("record_type", pa.string()), ("record_version", pa.int32()), ("json", pa.string()),
    ("topic_id", pa.string()), ("topic_name", pa.string()), ("partition_id", pa.int32()),
    ("broker_id", pa.int32()), ("leader", pa.int32()), ("isr", pa.list_(pa.int32())),
    ("replicas", pa.list_(pa.int32())), ("error", pa.string()),
])
METADATA_DDL = ("node string, source string, offset long, leader_epoch int, timestamp long, batch_offset long, "
                "is_control boolean, record_type string, record_version int, json string, topic_id string, "
                "topic_name string, partition_id int, broker_id int, leader int, isr array<int>, "
                "replicas array<int>, error string")
CONTROL_NAMES = {
    ControlType.ABORT: "AbortMarker", ControlType.COMMIT: "CommitMarker",
    ControlType.LEADER_CHANGE: "LeaderChange", ControlType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlType.SNAPSHOT_FOOTER: "SnapshotFooter", ControlType.KRAFT_VERSION: "KRaftVersion",
    ControlType.KRAFT_VOTERS: "Voters",
}
_TYPED = ("topic_id", "topic_name", "partition_id", "broker_id", "leader", "isr", "replicas")


def uuid_text(u) -> str | None:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    if u is None:
        return None
    raw = u.bytes if isinstance(u, uuid.UUID) else bytes(u)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _plain(obj):
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _plain(getattr(obj, k)) for k in obj.__dataclass_fields__ if k != "TYPE"}
    if isinstance(obj, (tuple, list)):
        return [_plain(x) for x in obj]
    if isinstance(obj, (bytes, bytearray)):
        return uuid_text(obj) if len(obj) == 16 else bytes(obj).hex()
    return obj


def typed_columns(record) -> dict:
    """The typed columns a metadata record has (others stay null)."""
    out = {}
    name = type(record).__name__
    if hasattr(record, "topic_id"):
        out["topic_id"] = uuid_text(record.topic_id)
    if name == "TopicRecord":
        out["topic_name"] = record.name
    if hasattr(record, "partition_id"):
        out["partition_id"] = record.partition_id
    if hasattr(record, "broker_id"):
        out["broker_id"] = record.broker_id
    elif name in ("FenceBrokerRecord", "UnfenceBrokerRecord"):  # Kafka calls the broker id "id" there
        out["broker_id"] = record.id
    if hasattr(record, "leader") and record.leader != -2:  # -2: PartitionChangeRecord's "unchanged"
        out["leader"] = record.leader
    for field in ("isr", "replicas"):
        value = getattr(record, field, None)
        if value is not None:
            out[field] = list(value)
    return out


class MetadataRows:
    """Row columns for one slice; ``take()`` hands them out as an Arrow batch."""

    def __init__(self, node: str, source: str, failfast: bool):
        self.node, self.source, self.failfast = node, source, failfast
        self._cols = {name: [] for name in METADATA_SCHEMA.names}

    def __len__(self) -> int:
        return len(self._cols["offset"])

    def add_batch(self, batch, decoded, first_offset: int, end_offset: int) -> None:
        for i in range(len(decoded)):
            offset = int(decoded.offsets[i])
            if not first_offset <= offset < end_offset:
                continue
            row = {"offset": offset, "leader_epoch": batch.partition_leader_epoch,
                   "timestamp": int(decoded.timestamps[i]), "batch_offset": batch.base_offset,
                   "is_control": bool(batch.is_control)}
            try:
                row.update(self._control(decoded, i) if batch.is_control else self._metadata(decoded, i))
            except CorruptRecordError as exc:
                if self.failfast:
                    raise
                row["error"] = f"offset {offset}: {exc}"
            self._append(row)

    def add_error(self, offset: int, message: str) -> None:
        self._append({"offset": offset, "error": message})

    def _control(self, decoded, i) -> dict:
        key, value = decoded.key(i), decoded.value(i)
        ctype = decode_control_key(key)
        msg = decode_control_record(key, value)
        name = CONTROL_NAMES.get(ctype, f"Control{ctype}")
        return {"record_type": name, "record_version": None if msg is None else msg.version,
                "json": None if msg is None else json.dumps(_plain(msg))}

    def _metadata(self, decoded, i) -> dict:
        value = decoded.value(i)
        if value is None:
            raise CorruptRecordError("metadata record without a value")
        record, version = decode_record(value)
        row = {"record_type": type(record).__name__, "record_version": version,
               "json": record_json(record, version)}
        row.update(typed_columns(record))
        return row

    def _append(self, row: dict) -> None:
        row.setdefault("node", self.node)
        row.setdefault("source", self.source)
        for name, values in self._cols.items():
            values.append(row.get(name))

    def take(self) -> pa.RecordBatch:
        out = pa.RecordBatch.from_pydict(self._cols, schema=METADATA_SCHEMA)
        self._cols = {name: [] for name in METADATA_SCHEMA.names}
        return out
