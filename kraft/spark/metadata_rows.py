"""Decoded metadata-log batches -> Arrow rows of the ``kraft-metadata`` schema.

Each batch's values go through ``kraft.metadata.batch_codec.decode_values`` (the native batch
decoder the image loader uses) for TopicRecord, PartitionChangeRecord and RegisterBrokerRecord;
the rest, and anything that decoder leaves alone, through ``decode_record`` (the same code the
controller replays). The JSON column is kafka-dump-log's line (``record_json``'s compiled
writers); rows are appended column by column, with no dict per record. Control records are named as Kafka names them. A record
that does not decode becomes a row with ``error`` set (PERMISSIVE) or raises (FAILFAST).
No file access here: that is ``segment_reader``.
"""

from __future__ import annotations

import json
import uuid

import pyarrow as pa

from kraft.errors import CorruptRecordError
from kraft.metadata import decode_record, record_json
from kraft.metadata.batch_codec import PARTITION, decode_values, record_from_item
from kraft.records import ControlType, decode_control_key, decode_control_record
from kraft.types import uuid_text as _kafka_uuid_text

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
    return _kafka_uuid_text(raw)


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
    return {name: get(record) for name, get in _typed_getters(type(record)) if get(record) is not None}


_GETTERS: dict = {}
_UUID_TEXT: dict = {}


def _topic_id_text(record):
    u = record.topic_id
    text = _UUID_TEXT.get(u)
    if text is None and u is not None:
        if len(_UUID_TEXT) >= 1 << 16:
            _UUID_TEXT.clear()
        text = _UUID_TEXT[u] = uuid_text(u)
    return text


def _typed_getters(cls) -> tuple:
    """``(column, record -> value or None)`` for the typed columns ``cls`` can fill; once per class."""
    getters = _GETTERS.get(cls)
    if getters is not None:
        return getters
    fields = {f.name for f in getattr(cls, "FIELDS", ())}
    out = []
    if "topic_id" in fields:
        out.append(("topic_id", _topic_id_text))
    if cls.__name__ == "TopicRecord":
        out.append(("topic_name", lambda r: r.name))
    if "partition_id" in fields:
        out.append(("partition_id", lambda r: r.partition_id))
    if "broker_id" in fields:
        out.append(("broker_id", lambda r: r.broker_id))
    elif cls.__name__ in ("FenceBrokerRecord", "UnfenceBrokerRecord"):  # Kafka calls the broker id "id" there
        out.append(("broker_id", lambda r: r.id))
    if "leader" in fields:  # -2: PartitionChangeRecord's "unchanged"
        out.append(("leader", lambda r: None if r.leader == -2 else r.leader))
    for field in ("isr", "replicas"):
        if field in fields:
            out.append((field, lambda r, f=field: None if getattr(r, f) is None else list(getattr(r, f))))
    getters = _GETTERS[cls] = tuple(out)
    return getters


def _api_key(value) -> int:
    """The api key of a framed metadata value (frame version, api key, version: uvarints),
    -1 when it does not fit in one byte; only used to skip PartitionRecords (whose batch
    decode gives image fields, not a record)."""
    return value[1] if value is not None and len(value) > 1 and value[1] < 0x80 else -1


class MetadataRows:
    """Row columns for one slice; ``take()`` hands them out as an Arrow batch."""

    def __init__(self, node: str, source: str, failfast: bool):
        self.node, self.source, self.failfast = node, source, failfast
        self._reset()

    def _reset(self) -> None:
        self._cols = {name: [] for name in METADATA_SCHEMA.names}
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add_batch(self, batch, decoded, first_offset: int, end_offset: int) -> None:
        wanted = [i for i in range(len(decoded)) if first_offset <= int(decoded.offsets[i]) < end_offset]
        if not wanted:
            return
        epoch, base, control = batch.partition_leader_epoch, batch.base_offset, bool(batch.is_control)
        values = [decoded.value(i) for i in wanted]
        items = [None] * len(values)
        if not control:
            fast = [j for j, v in enumerate(values) if _api_key(v) not in (PARTITION, -1)]
            for j, item in zip(fast, decode_values([values[j] for j in fast])):
                items[j] = item
        c = self._cols
        for j, i in enumerate(wanted):
            offset = int(decoded.offsets[i])
            record = version = error = None
            try:
                if control:
                    rtype, rversion, text = self._control(decoded, i)
                else:
                    record, version = self._record(values[j], items[j])
                    rtype, rversion, text = type(record).__name__, version, record_json(record, version)
            except CorruptRecordError as exc:
                if self.failfast:
                    raise
                rtype = rversion = text = None
                record, error = None, f"offset {offset}: {exc}"
            c["node"].append(self.node)
            c["source"].append(self.source)
            c["offset"].append(offset)
            c["leader_epoch"].append(epoch)
            c["timestamp"].append(int(decoded.timestamps[i]))
            c["batch_offset"].append(base)
            c["is_control"].append(control)
            c["record_type"].append(rtype)
            c["record_version"].append(rversion)
            c["json"].append(text)
            c["error"].append(error)
            self._typed(record)
            self._n += 1

    def _typed(self, record) -> None:
        c = self._cols
        got = dict.fromkeys(_TYPED)
        if record is not None:
            for name, get in _typed_getters(type(record)):
                got[name] = get(record)
        for name in _TYPED:
            c[name].append(got[name])

    @staticmethod
    def _record(value, item):
        if item is not None and item[0] != PARTITION:
            return record_from_item(item), item[1]
        if value is None:
            raise CorruptRecordError("metadata record without a value")
        return decode_record(value)

    def add_error(self, offset: int, message: str) -> None:
        row = {"node": self.node, "source": self.source, "offset": offset, "error": message}
        for name, values in self._cols.items():
            values.append(row.get(name))
        self._n += 1

    def _control(self, decoded, i) -> tuple:
        key, value = decoded.key(i), decoded.value(i)
        ctype = decode_control_key(key)
        msg = decode_control_record(key, value)
        name = CONTROL_NAMES.get(ctype, f"Control{ctype}")
        return name, None if msg is None else msg.version, None if msg is None else json.dumps(_plain(msg))

    def take(self) -> pa.RecordBatch:
        out = pa.RecordBatch.from_pydict(self._cols, schema=METADATA_SCHEMA)
        self._reset()
        return out
