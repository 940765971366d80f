"""The hot metadata records a batch at a time: decoding values into what the image needs,
and encoding an image's PartitionRecords, each in one call.

``decode_values(values)`` returns one *item* per value:

* ``(3, topic_id, partition_id, registration)`` for a PartitionRecord: the
  :class:`PartitionRegistration` (replica lists interned, directories resolved as Kafka's
  ``defaultToMigrating``, shared with equal ones: ``partition.intern_registration``), so replay
  only files it;
* ``(api_key, version, fields)`` for TopicRecord (2), PartitionChangeRecord (5) and
  RegisterBrokerRecord (0): the record's fields in schema order (``record_from_item`` turns them
  into the record the generic decoder would give); a PartitionChangeRecord's item has a fourth
  element, its value but for its ids (header + body: equal ones change a partition equally);
* ``None`` for anything else, and for any value with unknown tagged fields, a version or shape
  this decoder does not handle, or a registration replay would refuse: the caller decodes that
  value with the generic ``decode_record``, which keeps unknown tags and raises the right errors.

``encode_partitions(topic_id, partitions)`` gives the framed PartitionRecord value of each
partition of a topic (sorted by id), byte for byte ``encode_record(*partition_record(...))``.
``partitions_touching`` finds the partitions a broker leads or is in sync for (a fence's scan).

Two implementations with the same results: ``kraft._native._metadata`` and
``_metadata_encode`` (default), and the pure-Python twin below (``KRAFT_NO_EXTENSIONS=1``, or
when the extensions are not built);
``IMPLEMENTATION`` says which one is loaded. This module must not do I/O.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from kraft.errors import MetadataParseError
from kraft.metadata import partition as _partition
from kraft.metadata import records as R
from kraft.metadata.partition import (MIGRATING_DIR, RECOVERED, RECOVERING, PartitionRegistration, _directories,
                                      intern_registration, intern_tuple)
from kraft.metadata.image_records import partition_record
from kraft.metadata.serde import decode_record, encode_record
from kraft.protocol.primitives import uuid_from_wire

PARTITION, TOPIC, PARTITION_CHANGE, REGISTER_BROKER = 3, 2, 5, 0

# Raw directory bytes -> resolved tuple, shared by every call (bounded like partition._TUPLES).
_DIR_CACHE: dict[bytes, tuple] = {}


def _item_of(record, version: int):
    """The item of one generically decoded record (the pure twin of the native decoder)."""
    if record.unknown_tagged_fields:
        return None
    kind = type(record)
    if kind is R.PartitionRecord:
        replicas, dirs = record.replicas, record.directories
        lrs = record.leader_recovery_state
        if (dirs and len(dirs) != len(replicas)) or (lrs != RECOVERED and lrs != RECOVERING):
            return None
        intern = intern_tuple
        fields = (intern(replicas), _directories(dirs, len(replicas)), intern(record.isr),
                  intern(record.removing_replicas), intern(record.adding_replicas), record.leader, lrs,
                  record.leader_epoch, record.partition_epoch, intern(record.eligible_leader_replicas or ()),
                  intern(record.last_known_elr or ()))
        return (PARTITION, record.topic_id, record.partition_id, intern_registration(fields))
    if kind is R.TopicRecord:
        return (TOPIC, version, (record.name, record.topic_id))
    if kind is R.PartitionChangeRecord:
        r = record
        return (PARTITION_CHANGE, version, (r.partition_id, r.topic_id, r.isr, r.leader, r.replicas,
                                            r.removing_replicas, r.adding_replicas, r.leader_recovery_state,
                                            r.directories, r.eligible_leader_replicas, r.last_known_elr))
    if kind is R.RegisterBrokerRecord:
        r = record
        if any(e.unknown_tagged_fields for e in r.end_points) or any(f.unknown_tagged_fields for f in r.features):
            return None
        return (REGISTER_BROKER, version, (
            r.broker_id, r.is_migrating_zk_broker, r.incarnation_id, r.broker_epoch,
            [(e.name, e.host, e.port, e.security_protocol) for e in r.end_points],
            [(f.name, f.min_supported_version, f.max_supported_version) for f in r.features],
            r.rack, r.fenced, r.in_controlled_shutdown, r.log_dirs))
    return None


def _pure_decode_values(values) -> list:
    out = []
    for value in values:
        try:
            record, version = decode_record(value)
        except (MetadataParseError, TypeError):
            out.append(None)  # the caller's generic decode reports it
            continue
        item = _item_of(record, version)
        if item is not None and item[0] == PARTITION_CHANGE:
            value = bytes(value)
            item = item + (value[:3] + value[23:],)
        out.append(item)
    return out


def _native_decode_values(values) -> list:
    tuples = _partition._TUPLES
    return _native.decode_values(values if type(values) is list else list(values), tuples, _DIR_CACHE)


def _pure_encode_partitions(topic_id, partitions: dict, raw_cache: dict | None = None) -> list:
    return [encode_record(*partition_record(topic_id, pid, partitions[pid])) for pid in sorted(partitions)]


def _native_encode_partitions(topic_id, partitions: dict, raw_cache: dict | None = None) -> list:
    """``raw_cache`` (one per snapshot) remembers the wire bytes of each directory tuple."""
    return _native.encode_partitions(topic_id.bytes, sorted(partitions), partitions,
                                     {} if raw_cache is None else raw_cache)


def _pure_partitions_touching(partitions: dict, broker: int, with_elr: bool, which: int = 0) -> list:
    return [pid for pid, p in partitions.items()
            if (p.leader == broker and which != 2)
            or (p.leader != broker and which != 1 and (broker in p.isr or (with_elr and broker in p.elr)))]


def _load_native():
    from types import SimpleNamespace

    from kraft._native import _metadata, _metadata_encode
    _metadata.configure(uuid_from_wire, MIGRATING_DIR, _partition._TUPLES_LIMIT, PartitionRegistration,
                        _partition._REGISTRATIONS, _partition._MIGRATING_BY_COUNT)
    return SimpleNamespace(decode_values=_metadata.decode_values,
                           encode_partitions=_metadata_encode.encode_partitions,
                           partitions_touching=_metadata.partitions_touching)


NATIVE_IMPORT_ERROR: Exception | None = None
_native = None
if not os.environ.get("KRAFT_NO_EXTENSIONS"):
    try:
        _native = _load_native()
    except ImportError as exc:  # not built: fall back, but say so (tests/conftest.py asserts on it)
        NATIVE_IMPORT_ERROR = exc
IMPLEMENTATION = "native" if _native is not None else "python"
decode_values = _native_decode_values if _native is not None else _pure_decode_values
encode_partitions = _native_encode_partitions if _native is not None else _pure_encode_partitions
#: ``partitions_touching(partitions, broker, with_elr, which=0)``: the ids of the partitions (id ->
#: registration) ``broker`` leads or is in the ISR (or ELR) of (which 1: only those it leads, 2:
#: only those it does not); a scan in C when built.
partitions_touching = _native.partitions_touching if _native is not None else _pure_partitions_touching


class Codec(NamedTuple):
    decode_values: Callable
    encode_partitions: Callable


def implementation(name: str) -> Codec:
    """The codec ``"native"`` or ``"python"``, for tests and benchmarks comparing both.
    Raises ImportError if the native one is not built."""
    if name == "native":
        global _native
        if _native is None:
            _native = _load_native()
        return Codec(_native_decode_values, _native_encode_partitions)
    return Codec(_pure_decode_values, _pure_encode_partitions)


# --- items back to records ---------------------------------------------------------------


def _topic(f):
    return R.TopicRecord(name=f[0], topic_id=f[1])


def _partition_change(f):
    return R.PartitionChangeRecord(partition_id=f[0], topic_id=f[1], isr=f[2], leader=f[3], replicas=f[4],
                                   removing_replicas=f[5], adding_replicas=f[6], leader_recovery_state=f[7],
                                   directories=f[8], eligible_leader_replicas=f[9], last_known_elr=f[10])


def _register_broker(f):
    E, F = R.RegisterBrokerRecord.BrokerEndpoint, R.RegisterBrokerRecord.BrokerFeature
    return R.RegisterBrokerRecord(
        broker_id=f[0], is_migrating_zk_broker=f[1], incarnation_id=f[2], broker_epoch=f[3],
        end_points=[E(name=n, host=h, port=p, security_protocol=s) for n, h, p, s in f[4]],
        features=[F(name=n, min_supported_version=lo, max_supported_version=hi) for n, lo, hi in f[5]],
        rack=f[6], fenced=f[7], in_controlled_shutdown=f[8], log_dirs=f[9])


_MAKERS = {TOPIC: _topic, PARTITION_CHANGE: _partition_change, REGISTER_BROKER: _register_broker}


def record_from_item(item):
    """The record of a Topic/PartitionChange/RegisterBroker item, equal to what ``decode_record``
    gives for the same value (PartitionRecord items hold resolved fields: they have no record)."""
    return _MAKERS[item[0]](item[2])
