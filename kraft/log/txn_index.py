"""The aborted-transaction index of a segment, ``<20-digit base offset>.txnindex``, in Kafka's
format (``TransactionIndex`` / ``AbortedTxn``): a sequence of 34-byte entries, big-endian
``int16 version (0) | int64 producer_id | int64 first_offset | int64 last_offset |
int64 last_stable_offset``, appended when an ABORT marker is written to the segment
(``last_offset`` is the marker's offset, ``last_stable_offset`` the LSO once the transaction
ended). A read_committed Fetch collects the entries overlapping its range and sends
(producer id, first offset) so the consumer can drop the aborted records.

Files only: which entries to write is the producer state's business. A torn tail (a partial
entry after a crash) is ignored on read; the producer state rebuilds the entries past its
snapshot on load (``truncate_from``), as Kafka's recovery rebuilds the index.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from kraft.errors import CorruptRecordError
from kraft.log import files

SUFFIX = ".txnindex"
VERSION = 0
_ENTRY = struct.Struct(">hqqqq")  # 34 bytes
ENTRY_SIZE = _ENTRY.size


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode(entries) -> bytes:
    return b"".join(_ENTRY.pack(VERSION, *e) for e in entries)


def decode(data) -> list[AbortedTxn]:
    """Whole entries of ``data``; a partial last entry (torn write) is left out."""
    out = []
    for i in range(len(data) // ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, i * ENTRY_SIZE)
        if version != VERSION:
            raise CorruptRecordError(f"transaction index entry {i} has version {version}")
        out.append(AbortedTxn(*fields))
    return out


def path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, files.segment_name(base_offset, SUFFIX))


def base_offsets(directory: str) -> list[int]:
    """The base offsets of the ``.txnindex`` files in ``directory``, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(n[:-len(SUFFIX)]) for n in names
                  if n.endswith(SUFFIX) and len(n) == files.OFFSET_WIDTH + len(SUFFIX) and n[:files.OFFSET_WIDTH].isdigit())


def read(directory: str, base_offset: int) -> list[AbortedTxn]:
    try:
        with open(path(directory, base_offset), "rb") as f:
            return decode(f.read())
    except FileNotFoundError:
        return []


def append(directory: str, base_offset: int, entry: AbortedTxn) -> None:
    """Append one entry (page cache; flushed with the segment it belongs to, as Kafka)."""
    p = path(directory, base_offset)
    with open(p, "ab") as f:
        size = f.tell()
        if size % ENTRY_SIZE:  # a torn entry from a crash: cut it so entries stay aligned
            f.truncate(size - size % ENTRY_SIZE)
            f.seek(0, os.SEEK_END)
        f.write(encode([entry]))


def truncate_from(directory: str, offset: int) -> None:
    """Drop every entry whose marker is at or after ``offset`` (a log truncation, or entries
    about to be rebuilt by replaying the log from ``offset``)."""
    for base in base_offsets(directory):
        entries = read(directory, base)
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) == len(entries) and os.path.getsize(path(directory, base)) % ENTRY_SIZE == 0:
            continue
        if keep:
            with open(path(directory, base), "r+b") as f:
                f.truncate(len(keep) * ENTRY_SIZE)
        else:
            os.unlink(path(directory, base))


def delete(directory: str, base_offset: int) -> None:
    try:
        os.unlink(path(directory, base_offset))
    except FileNotFoundError:
        pass


def collect(directory: str, bases: list[int], fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
    """Kafka's ``collectAbortedTransactions``: the entries of the segments from the one
    holding ``fetch_offset`` on whose transaction overlaps ``[fetch_offset, upper_offset)``
    (``bases``: the ``.txnindex`` files there are, ascending)."""
    out = []
    start = 0
    for i, b in enumerate(bases):
        if b <= fetch_offset:
            start = i
    for b in bases[start:]:  # a later segment may hold the marker of a transaction begun in range
        out.extend(e for e in read(directory, b) if e.last_offset >= fetch_offset and e.first_offset < upper_offset)
    return out
