"""Shared helpers for the codec tests: an independent batch writer, header patching,
outcome comparison and a hang guard.

Everything that builds bytes here is written from the spec (REFERENCE.md section 1) with
``struct`` and the ``crc32c`` package, never with kraft's own builder, so a test that uses
these helpers checks kraft against something it did not produce itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct

import crc32c as crc32c_pkg
from hypothesis import HealthCheck, settings

from kraft.errors import CorruptRecordError, UnsupportedCodecError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_FIELDS = (
    "base_offset", "length", "partition_leader_epoch", "magic", "crc", "attributes",
    "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "records_count",
)
HEADER_SIZE = 61
CRC_START = 21

# (struct format, byte offset) of each header field.
FIELD_AT = {
    "base_offset": (">q", 0), "length": (">i", 8), "partition_leader_epoch": (">i", 12),
    "magic": (">b", 16), "crc": (">I", 17), "attributes": (">h", 21),
    "last_offset_delta": (">i", 23), "base_timestamp": (">q", 27), "max_timestamp": (">q", 35),
    "producer_id": (">q", 43), "producer_epoch": (">h", 51), "base_sequence": (">i", 53),
    "records_count": (">i", 57),
}

TYPED_ERRORS = (CorruptRecordError, UnsupportedCodecError)

#: Length field values for which ``length + 12`` overflows int32 (the native reader once
#: segfaulted on them; test_fuzz_native.py keeps that in a subprocess).
INT32_OVERFLOW_LENGTHS = range(2**31 - 12, 2**31)


def hyp(max_examples: int):
    """Hypothesis settings for codec tests: the ``codec`` fixture is stateless, so reusing
    it across examples is safe; no per-example deadline (the machine is shared and noisy,
    hangs are caught by :func:`time_limit` instead)."""
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def implementations() -> list:
    """The codec namespaces under test in this run: both, or only the pure one when
    ``KRAFT_NO_EXTENSIONS`` is set."""
    import kraft.records

    names = ["python"] if os.environ.get("KRAFT_NO_EXTENSIONS") else ["native", "python"]
    return [kraft.records.implementation(n) for n in names]


def is_pure(codec) -> bool:
    return codec.RecordBatch.__module__.startswith("kraft.records._pure")


# --- an independent writer ------------------------------------------------------------


def zigzag_varint(value: int) -> bytes:
    """Kafka's zig-zag varint, written out longhand."""
    raw = (value << 1) ^ (value >> 63) if value < 0 else value << 1
    raw &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _blob(data) -> bytes:
    return zigzag_varint(-1) if data is None else zigzag_varint(len(data)) + bytes(data)


def raw_record(offset_delta: int, ts_delta: int, key, value, headers=()) -> bytes:
    """One encoded record (length prefix included), per DefaultRecord.java."""
    body = bytearray(b"\x00")
    body += zigzag_varint(ts_delta)
    body += zigzag_varint(offset_delta)
    body += _blob(key)
    body += _blob(value)
    body += zigzag_varint(len(headers))
    for hkey, hvalue in headers:
        raw = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
        body += zigzag_varint(len(raw)) + raw
        body += _blob(hvalue)
    return zigzag_varint(len(body)) + bytes(body)


def raw_batch(records: bytes, count: int, *, base_offset=0, epoch=-1, magic=2, attributes=0,
              last_offset_delta=None, base_timestamp=0, max_timestamp=0, producer_id=-1,
              producer_epoch=-1, base_sequence=-1, length=None, crc=None) -> bytes:
    """A batch around an already encoded (or compressed) records block. ``length`` and
    ``crc`` default to the correct values; pass them to forge a broken batch."""
    if last_offset_delta is None:
        last_offset_delta = count - 1
    if length is None:
        length = HEADER_SIZE + len(records) - 12
    out = bytearray(HEADER.pack(base_offset, length, epoch, magic, 0, attributes,
                                last_offset_delta, base_timestamp, max_timestamp, producer_id,
                                producer_epoch, base_sequence, count) + records)
    if crc is None:
        crc = crc32c_pkg.crc32c(bytes(out[CRC_START:]))
    struct.pack_into(">I", out, 17, crc)
    return bytes(out)


def header(buf, pos=0) -> dict:
    return dict(zip(HEADER_FIELDS, HEADER.unpack_from(buf, pos)))


def fix_crc(batch, pos=0) -> bytes:
    """Recompute the CRC of the batch at ``pos`` (over bytes 21..end of that batch, or the
    buffer end if the length field is unusable)."""
    out = bytearray(batch)
    (length,) = struct.unpack_from(">i", out, pos + 8)
    end = pos + length + 12 if 49 <= length and pos + length + 12 <= len(out) else len(out)
    struct.pack_into(">I", out, pos + 17, crc32c_pkg.crc32c(bytes(out[pos + CRC_START : end])))
    return bytes(out)


def patch(batch, field: str, value: int, *, pos=0, recrc=True) -> bytes:
    """Overwrite one header field; the CRC is recomputed unless ``recrc`` is false (fields
    before Attributes are not covered by it anyway)."""
    fmt, off = FIELD_AT[field]
    out = bytearray(batch)
    struct.pack_into(fmt, out, pos + off, value)
    return fix_crc(out, pos) if recrc and off >= CRC_START else bytes(out)


# --- comparing implementations ----------------------------------------------------------


def outcome(fn):
    """``("ok", value)`` or ``("error", exception type name)``; a typed error is reported as
    its class name so that two implementations raising CorruptRecordError compare equal."""
    try:
        return ("ok", fn())
    except TYPED_ERRORS as exc:
        return ("error", type(exc).__name__)


def scan_summary(codec, buffer):
    s = codec.scan_batches(buffer)
    return (s.positions.tolist(), s.base_offsets.tolist(), s.last_offsets.tolist(),
            s.partition_leader_epochs.tolist(), s.max_timestamps.tolist(), s.sizes.tolist(),
            s.valid_end, s.error)


def assign_summary(codec, buffer):
    buf = bytearray(buffer)
    try:
        return ("ok", codec.assign_offsets(buf, 1000, 5), bytes(buf))
    except TYPED_ERRORS as exc:
        assert bytes(buf) == bytes(buffer), "assign_offsets changed the buffer before failing"
        return ("error", type(exc).__name__)


def describe_batch(batch):
    """Everything one RecordBatch says about itself, each reading wrapped in :func:`outcome`
    so that where exactly a corrupt batch fails is part of the comparison."""
    fields = tuple(getattr(batch, name) for name in HEADER_FIELDS)

    def records():
        return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]

    def decoded():
        d = batch.decode()
        n = len(d)
        return (d.offsets.tolist(), d.timestamps.tolist(), [d.key(i) for i in range(n)],
                [d.value(i) for i in range(n)], [d.headers(i) for i in range(n)], d.values())

    return (fields, batch.is_valid(), batch.size, batch.tobytes(), outcome(records),
            outcome(batch.values), outcome(decoded))


def read_everything(codec, buffer):
    """All that the reader exposes about ``buffer``: each batch iter_batches yields, described
    by :func:`describe_batch`, and how the iteration ended."""
    seen = []

    def walk():
        for batch in codec.iter_batches(buffer):
            seen.append(describe_batch(batch))

    return seen, outcome(walk)


class Hang(Exception):
    """A codec call ran past the time guard."""


@contextlib.contextmanager
def time_limit(seconds: int):
    """Fail (rather than hang the suite) when the block runs longer than ``seconds``.
    A guard against infinite loops, not a performance assertion."""

    def on_alarm(signum, frame):
        raise Hang(f"still running after {seconds}s: probable infinite loop")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
