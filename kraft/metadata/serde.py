"""Metadata record framing exactly as Kafka's ``MetadataRecordSerde`` writes a record value.

A record value is ``uvarint frame_version (1) | uvarint api_key | uvarint version | body`` where
the body is the record in Kafka's flexible encoding. Reading follows
``AbstractApiMessageSerde.read``: frame version 0 (the 2.8 preview) and any other frame version
are rejected, the api key and version must fit an int16, the body must decode, and bytes left
after it are garbage. Every failure is a :class:`MetadataParseError`; nothing else escapes.
This module must not know what records mean (see ``delta.py``).
"""

from __future__ import annotations

from typing import NamedTuple

from kraft.errors import MetadataParseError, ProtocolError, UnsupportedVersionError
from kraft.metadata.records import METADATA_RECORDS, MetadataRecord
from kraft.protocol.message import DECODE_FAILURES, as_view
from kraft.protocol.primitives import read_uvarint, uvarint_bytes

FRAME_VERSION = 1
_FRAME = uvarint_bytes(FRAME_VERSION)
_SHORT_MAX = 0x7FFF


class RecordAndVersion(NamedTuple):
    """Kafka's ``ApiMessageAndVersion``: a decoded record and the version it was written at."""

    record: MetadataRecord
    version: int


def encode_record(record: MetadataRecord, version: int | None = None) -> bytes:
    """The framed value of ``record`` at ``version`` (default: the record's latest version)."""
    out = bytearray()
    encode_record_into(out, record, version)
    return bytes(out)


def encode_record_into(out: bytearray, record: MetadataRecord, version: int | None = None) -> None:
    if version is None:
        version = record.MAX_VERSION
    start = len(out)
    out += _FRAME
    out += uvarint_bytes(record.API_KEY)
    out += uvarint_bytes(version)
    try:
        record.encode_into(out, version)
    except BaseException:
        del out[start:]  # never leave half a record behind in a shared buffer
        raise


def _read_short(view, pos: int, entity: str) -> tuple[int, int]:
    try:
        value, pos = read_uvarint(view, pos)
    except (IndexError, ProtocolError) as e:
        raise MetadataParseError(f"error while reading {entity}: {e or 'no bytes left'}") from e
    if value > _SHORT_MAX:
        raise MetadataParseError(f"value for {entity} was too large: {value}")
    return value, pos


def _read_header(view) -> tuple[int, int, int]:
    frame, pos = _read_short(view, 0, "frame version")
    if frame != FRAME_VERSION:
        if frame == 0:
            raise MetadataParseError("metadata record with frame version 0 (KRaft preview in 2.8) is not supported")
        raise MetadataParseError(f"unknown metadata record frame version {frame} (only {FRAME_VERSION} is supported)")
    api_key, pos = _read_short(view, pos, "type")
    version, pos = _read_short(view, pos, "version")
    return api_key, version, pos


def decode_record(buf) -> RecordAndVersion:
    """Decode one framed record value (bytes, bytearray or memoryview); the whole buffer must
    be the record. Raises :class:`MetadataParseError` for anything that is not one."""
    view = as_view(buf)
    if len(view) > 3 and view[0] == FRAME_VERSION and view[1] < 0x80 and view[2] < 0x80:
        api_key, version, pos = view[1], view[2], 3  # the usual one-byte header
    else:
        api_key, version, pos = _read_header(view)
    cls = METADATA_RECORDS.get(api_key)
    if cls is None:
        raise MetadataParseError(f"unknown metadata record type {api_key}")
    dec = cls._DECODERS.get(version)
    try:
        if dec is None:
            dec = cls.decoder(version)
        record, end = dec(view, pos)
    except UnsupportedVersionError as e:
        raise MetadataParseError(f"unsupported version {version} of {cls.__name__}") from e
    except ProtocolError as e:
        raise MetadataParseError(f"failed to deserialize {cls.__name__} v{version}: {e}") from e
    except DECODE_FAILURES as e:
        raise MetadataParseError(f"failed to deserialize {cls.__name__} v{version}: "
                                 f"{type(e).__name__}: {e}") from e
    if end != len(view):
        raise MetadataParseError(f"found {len(view) - end} byte(s) of garbage after {cls.__name__} v{version}")
    return RecordAndVersion(record, version)
