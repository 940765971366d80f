"""``bootstrap.checkpoint``: the metadata Kafka's ``kafka-storage format`` leaves in the
metadata log directory for the first controller to write into the log (its BootstrapDirectory).

The file has the snapshot layout (``kraft.log.snapshot``): a SnapshotHeaderRecord control
batch, one batch of metadata records, a SnapshotFooterRecord control batch, offsets from 0,
epoch 0. We write one FeatureLevelRecord per finalized feature (``metadata.version`` first),
then any other records given already framed (``storage format --add-scram``'s
UserScramCredentialRecords), which ``read_bootstrap_values`` returns for the first controller.

The record encoder here is deliberately minimal — FeatureLevelRecord (api key 12, version 0)
only, framed as Kafka's MetadataRecordSerde does — until the metadata record package exists;
then this module should use it. Also the ``metadata.version`` table: release name ↔ level.
"""

from __future__ import annotations

import os
import re

from kraft import records
from kraft.errors import ConfigError, CorruptRecordError, StorageError
from kraft.log import files
from kraft.records import SnapshotFooterRecord, SnapshotHeaderRecord

BOOTSTRAP_FILE = "bootstrap.checkpoint"
FEATURE_LEVEL_RECORD = 12
METADATA_VERSION = "metadata.version"

#: Kafka's MetadataVersion feature levels (IBP_3_3_IV3 is the oldest KRaft supports).
METADATA_VERSIONS: dict[str, int] = {
    "3.3-IV3": 7, "3.4-IV0": 8, "3.5-IV0": 9, "3.5-IV1": 10, "3.5-IV2": 11, "3.6-IV0": 12, "3.6-IV1": 13,
    "3.6-IV2": 14, "3.7-IV0": 15, "3.7-IV1": 16, "3.7-IV2": 17, "3.7-IV3": 18, "3.7-IV4": 19, "3.8-IV0": 20,
    "3.9-IV0": 21, "4.0-IV0": 22, "4.0-IV1": 23, "4.0-IV2": 24, "4.0-IV3": 25,
}
#: What ``format`` writes without ``--release-version`` (Kafka 3.9's latest production level).
DEFAULT_RELEASE = "3.9-IV0"


def metadata_version_level(release: str) -> int:
    """``3.9`` (the release's last level), ``3.7-IV2`` or a bare level number → feature level."""
    text = release.strip().upper()
    if text.isdigit():
        level = int(text)
        if level not in METADATA_VERSIONS.values():
            raise ConfigError(f"--release-version: unknown metadata.version level {level}")
        return level
    if re.fullmatch(r"\d+\.\d+", text):
        levels = [v for k, v in METADATA_VERSIONS.items() if k.startswith(text + "-")]
        if levels:
            return max(levels)
    for name, level in METADATA_VERSIONS.items():
        if name.upper() == text:
            return level
    raise ConfigError(f"--release-version: unknown release {release!r} (known: 3.3 to 4.0, e.g. 3.9 or 3.7-IV4)")


def metadata_version_name(level: int) -> str:
    for name, lv in METADATA_VERSIONS.items():
        if lv == level:
            return name
    return f"level {level}"


def encode_feature_level_record(name: str, level: int) -> bytes:
    """MetadataRecordSerde framing (uvarint frame version 1, api key, record version), then the
    flexible v0 body: compact string Name, int16 FeatureLevel, empty tagged fields."""
    raw = name.encode("utf-8")
    uv = records.encode_unsigned_varint
    return (uv(1) + uv(FEATURE_LEVEL_RECORD) + uv(0)
            + uv(len(raw) + 1) + raw + level.to_bytes(2, "big", signed=True) + uv(0))


def decode_feature_level_record(data: bytes) -> tuple[str, int]:
    """The inverse, for ``storage info`` and tests; ValueError on anything else."""
    pos = 0
    fields = []
    for _ in range(4):
        value, pos = records.decode_unsigned_varint(data, pos)
        fields.append(value)
    frame, api_key, version, name_len = fields
    if (frame, api_key, version) != (1, FEATURE_LEVEL_RECORD, 0) or name_len < 1:
        raise ValueError(f"not a FeatureLevelRecord v0 (frame {frame}, api key {api_key}, version {version})")
    name = bytes(data[pos:pos + name_len - 1]).decode("utf-8")
    pos += name_len - 1
    level = int.from_bytes(data[pos:pos + 2], "big", signed=True)
    return name, level


def write_bootstrap_checkpoint(directory: str, features: dict[str, int], now_ms: int | None = None,
                               extra_values=()) -> str:
    """Write ``directory/bootstrap.checkpoint`` durably (temp, fsync, rename); returns its path.
    ``extra_values``: framed metadata records written after the features."""
    values = [encode_feature_level_record(METADATA_VERSION, features[METADATA_VERSION])]
    values += [encode_feature_level_record(n, lv) for n, lv in sorted(features.items()) if n != METADATA_VERSION]
    values += [bytes(v) for v in extra_values]
    header = records.build_control_record_batch(SnapshotHeaderRecord(-1), base_offset=0, partition_leader_epoch=0,
                                                timestamp=now_ms)
    body = records.build_batch(values, base_offset=1, partition_leader_epoch=0, timestamp=now_ms)
    footer = records.build_control_record_batch(SnapshotFooterRecord(), base_offset=1 + len(values),
                                                partition_leader_epoch=0, timestamp=now_ms)
    path = os.path.join(directory, BOOTSTRAP_FILE)
    files.atomic_write(path, bytes(header) + bytes(body) + bytes(footer))
    return path


def _is_feature_level_record(value: bytes) -> bool:
    return len(value) > 1 and value[0] == 1 and value[1] == FEATURE_LEVEL_RECORD


def _read_values(directory: str) -> list[bytes] | None:
    path = os.path.join(directory, BOOTSTRAP_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        return [bytes(rec.value) for batch in records.iter_batches(data) if not batch.is_control for rec in batch]
    except CorruptRecordError as exc:
        raise StorageError(f"{path} is not a valid bootstrap checkpoint: {exc}") from None


def read_bootstrap_checkpoint(directory: str) -> dict[str, int] | None:
    """The features in ``directory/bootstrap.checkpoint``, or None if there is none."""
    values = _read_values(directory)
    if values is None:
        return None
    features = {}
    try:
        for value in values:
            if _is_feature_level_record(value):
                name, level = decode_feature_level_record(value)
                features[name] = level
    except ValueError as exc:
        path = os.path.join(directory, BOOTSTRAP_FILE)
        raise StorageError(f"{path} is not a valid bootstrap checkpoint: {exc}") from None
    return features


def read_bootstrap_values(directory: str) -> list[bytes]:
    """The framed records of ``bootstrap.checkpoint`` other than its features (empty if none)."""
    return [v for v in _read_values(directory) or () if not _is_feature_level_record(v)]
