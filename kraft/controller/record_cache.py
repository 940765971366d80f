"""Fast encode and decode of the two records a controller writes by the ten thousand:
``PartitionRecord`` and ``PartitionChangeRecord``.

Both start with ``partition_id`` (int32) and ``topic_id`` (uuid) right after the three header
bytes (frame version, api key, version, one byte each), and the rest of a record repeats across
partitions: a few replica lists, a few leaders, epochs 0. So a record's value is cached as the
bytes after the topic id, keyed by the other fields (encode) or by those bytes (decode), and a
new record only pays for splicing or reading its partition id and topic id. The result is
byte-for-byte what ``encode_record`` writes and equal to what ``decode_record`` returns (the
first of each kind is computed by them and checked); anything else takes the general path.
Decoded records share their list fields with other records of the same shape: callers must
treat them as read-only (replay does). This module must not know what records mean.
"""

from __future__ import annotations

import copy
import operator
import struct
import uuid

from kraft.metadata import batch_codec, decode_record, encode_record
from kraft.metadata.image_records import partition_record
from kraft.metadata.records import PartitionChangeRecord, PartitionRecord

_I32 = struct.Struct(">i")
_HOT = (PartitionRecord, PartitionChangeRecord)
_LIMIT = 1 << 14  # entries per cache; cleared when full (only speed is lost)


class PartitionRecordRun:
    """The PartitionRecords of new partitions of one topic, given as their registrations
    (partition id -> ``PartitionRegistration``, shared among partitions placed alike): a handler
    creating a million partitions returns one of these per topic instead of a record object per
    partition, and the encoder writes them all in one native call (``encode_partitions``: the
    bytes ``encode_record`` gives each record). Counts as ``len()`` records; iterating makes the
    records (for whoever wants objects)."""

    __slots__ = ("topic_id", "partitions")

    def __init__(self, topic_id, partitions: dict):
        self.topic_id = topic_id
        self.partitions = partitions

    def __len__(self) -> int:
        return len(self.partitions)

    def __iter__(self):
        parts = self.partitions
        for pid in sorted(parts):
            yield partition_record(self.topic_id, pid, parts[pid]).record

    def values(self) -> list:
        return batch_codec.encode_partitions(self.topic_id, self.partitions)


class ChangeRecordRun:
    """PartitionChangeRecords of one topic as (partition id, template) pairs, a template being
    the record made for the first partition of its shape (a fence changes hundreds of thousands
    of partitions in a few dozen ways): no record object per partition, and each encoded by
    splicing its ids into its template's bytes. Counts as ``len()`` records; iterating makes the
    records."""

    __slots__ = ("topic_id", "entries")

    def __init__(self, topic_id, entries: list):
        self.topic_id = topic_id
        self.entries = entries

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        for pid, t in self.entries:
            r = copy.copy(t)
            r.partition_id = pid
            r.topic_id = self.topic_id
            yield r


RUNS = (PartitionRecordRun, ChangeRecordRun)


def record_count(records) -> int:
    """How many records ``records`` are (a run counts its partitions)."""
    return sum(len(r) if type(r) in RUNS else 1 for r in records)


def expand_records(records):
    """``records`` with every run replaced by its records."""
    for r in records:
        if type(r) in RUNS:
            yield from r
        else:
            yield r


def _frozen(v):
    return tuple(v) if isinstance(v, list) else v


class RecordCodecCache:
    def __init__(self):
        self._enc: dict = {}
        self._dec: dict = {}
        self._templates: dict = {}
        self._ids: dict[bytes, uuid.UUID] = {}
        self._names = {cls: tuple(f.name for f in cls.FIELDS if f.name not in ("partition_id", "topic_id"))
                       + ("unknown_tagged_fields",) for cls in _HOT}
        self._hot_keys = {cls.API_KEY: cls for cls in _HOT}
        self._getters = {cls: operator.attrgetter(*self._names[cls]) for cls in _HOT}

    # --- encode ---------------------------------------------------------------------------
    def encode(self, record) -> bytes:
        cls = type(record)
        if cls not in _HOT or record.unknown_tagged_fields:
            return encode_record(record)
        try:  # handlers build records with tuples: hashable as they are
            key = (cls, self._getters[cls](record))
            tail = self._enc.get(key)
        except TypeError:  # a list somewhere
            key = (cls, tuple(_frozen(getattr(record, n)) for n in self._names[cls]))
            tail = self._enc.get(key)
        if tail is None:
            full = encode_record(record)
            if (len(full) < 23 or full[3:7] != _I32.pack(record.partition_id)
                    or full[7:23] != record.topic_id.bytes):
                return full
            if len(self._enc) >= _LIMIT:
                self._enc.clear()
            tail = self._enc[key] = (full[:3], full[23:])
            return full
        return b"".join((tail[0], _I32.pack(record.partition_id), record.topic_id.bytes, tail[1]))

    def encode_all(self, records) -> list[bytes]:
        enc = self.encode
        out = []
        for r in records:
            t = type(r)
            if t is PartitionRecordRun:
                out.extend(r.values())
            elif t is ChangeRecordRun:
                self._encode_changes(r, out)
            else:
                out.append(enc(r))
        return out

    def _encode_changes(self, run: ChangeRecordRun, out: list) -> None:
        # id(template) -> (template, head, tail): templates are shared by the runs of one unit
        # (each entry keeps its template alive, so its id is not reused meanwhile).
        parts = self._templates
        tid = run.topic_id.bytes
        pack, join, append = _I32.pack, b"".join, out.append
        for pid, t in run.entries:
            ht = parts.get(id(t))
            if ht is None or ht[0] is not t:
                full = encode_record(t)
                if len(parts) >= _LIMIT:
                    parts.clear()
                ht = parts[id(t)] = (t, full[:3], full[23:])
            append(join((ht[1], pack(pid), tid, ht[2])))

    # --- decode ---------------------------------------------------------------------------
    def decode(self, value):
        """The record in ``value`` (a framed record value); MetadataParseError as decode_record."""
        if len(value) < 24 or value[0] != 1 or value[1] not in self._hot_keys or value[2] >= 0x80:
            return decode_record(value).record
        key = bytes(value[:3]) + bytes(value[23:])
        proto = self._dec.get(key)
        if proto is None:
            record = decode_record(value).record
            if len(self._dec) >= _LIMIT:
                self._dec.clear()
            self._dec[key] = record
            return record
        cls = type(proto)
        r = cls.new_default()
        for n in self._names[cls]:
            setattr(r, n, getattr(proto, n))
        r.partition_id = _I32.unpack_from(value, 3)[0]
        raw = bytes(value[7:23])
        tid = self._ids.get(raw)
        if tid is None:
            if len(self._ids) >= _LIMIT:
                self._ids.clear()
            tid = self._ids[raw] = uuid.UUID(bytes=raw)
        r.topic_id = tid
        return r
