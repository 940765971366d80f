"""Producer-state snapshot files of a partition (``<20-digit offset>.snapshot`` beside the
segments, Kafka's ``ProducerStateManager`` format) and rebuilding a partition's producer
state on open: load the latest readable snapshot at or below the log end, then replay the
batch headers of the log from the snapshot's offset to the end (Kafka's
``rebuildProducerState``). A snapshot's offset is the log end offset it covers.

File format, version 1 (all big-endian, CRC-32C over everything after the CRC field):
``int16 version | uint32 crc | int32 count | count x (int64 producer_id, int16 epoch,
int32 last_sequence, int64 last_offset, int32 offset_delta, int64 timestamp,
int32 coordinator_epoch, int64 current_txn_first_offset)``. Only each producer's last batch
is stored, as in Kafka: after a restart a retry of an older one of the last five batches is
OUT_OF_ORDER_SEQUENCE_NUMBER rather than a duplicate. A corrupt snapshot is deleted and the
next older one used (Kafka does the same). The replay also rebuilds the aborted-transaction
index (``.txnindex``) past the snapshot. Files only: no sockets, no asyncio.
"""

from __future__ import annotations

import bisect
import logging
import os
import re
import struct

from kraft.broker.producer_state import BatchMetadata, ProducerEntry, ProducerStateTable, producer_batches
from kraft.errors import StateFileError
from kraft.log import files, txn_index
from kraft.records import crc32c

log = logging.getLogger("kraft.broker.producers")

SNAPSHOT_VERSION = 1
SUFFIX = ".snapshot"
_NAME = re.compile(r"^(\d{20})\.snapshot$")
_HEAD = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")  # 46 bytes
_CRC_FROM = 6
#: Bytes read from the log per step while replaying (whole batches; the first may be larger).
REPLAY_READ_BYTES = 1 << 20


class CorruptSnapshotError(StateFileError):
    """A producer snapshot that fails its CRC or does not parse."""


def encode_snapshot(table: ProducerStateTable) -> bytes:
    entries = sorted(table.producers.values(), key=lambda e: e.producer_id)
    out = bytearray(_HEAD.size + _ENTRY.size * len(entries))
    _HEAD.pack_into(out, 0, SNAPSHOT_VERSION, 0, len(entries))
    pos = _HEAD.size
    for e in entries:
        last = e.batches[-1] if e.batches else None
        _ENTRY.pack_into(out, pos, e.producer_id, e.epoch, last.last_seq if last else -1,
                         last.last_offset if last else -1, last.last_seq - last.first_seq if last else 0,
                         e.last_timestamp, e.coordinator_epoch, e.txn_first_offset)
        pos += _ENTRY.size
    struct.pack_into(">I", out, 2, crc32c(memoryview(out)[_CRC_FROM:]))
    return bytes(out)


def decode_snapshot(data: bytes, end_offset: int, what: str = "producer snapshot") -> ProducerStateTable:
    if len(data) < _HEAD.size:
        raise CorruptSnapshotError(f"{what}: {len(data)} bytes is too short")
    version, crc, count = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{what}: version {version}, expected {SNAPSHOT_VERSION}")
    if crc32c(memoryview(data)[_CRC_FROM:]) != crc:
        raise CorruptSnapshotError(f"{what}: CRC mismatch")
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{what}: {count} entries do not fill {len(data)} bytes")
    table = ProducerStateTable(end_offset)
    for pid, epoch, last_seq, last_offset, delta, ts, coord, txn in _ENTRY.iter_unpack(
            memoryview(data)[_HEAD.size:]):
        e = ProducerEntry(pid, epoch, last_timestamp=ts, coordinator_epoch=coord, txn_first_offset=txn)
        if last_seq >= 0:
            e.batches.append(BatchMetadata(last_seq - delta, last_seq, last_offset - delta, last_offset, ts))
        table.producers[pid] = e
    return table


# --- files --------------------------------------------------------------------------------------
def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"{offset:020d}{SUFFIX}")


def snapshot_offsets(directory: str) -> list[int]:
    """Offsets of the snapshot files in ``directory``, ascending."""
    out = []
    for name in os.listdir(directory):
        m = _NAME.match(name)
        if m:
            out.append(int(m.group(1)))
    return sorted(out)


def write_snapshot(directory: str, table: ProducerStateTable) -> str:
    """``<end_offset>.snapshot`` durably (temp, fsync, rename, fsync dir); returns its path."""
    path = snapshot_path(directory, table.end_offset)
    files.atomic_write(path, encode_snapshot(table))
    return path


def delete_snapshots(directory: str, *, above: int | None = None, below: int | None = None) -> list[int]:
    """Remove snapshots with offset > ``above`` (after a truncation) or < ``below`` (after
    the log start moved); returns the offsets removed."""
    removed = []
    for off in snapshot_offsets(directory):
        if (above is not None and off > above) or (below is not None and off < below):
            os.unlink(snapshot_path(directory, off))
            removed.append(off)
    if removed:
        files.fsync_dir(directory)
    return removed


def load_producer_state(seg_log) -> ProducerStateTable:
    """The producer state of ``seg_log`` (a ``SegmentedLog``): the latest valid snapshot at
    or below its end offset (newer ones are stale after a truncation and are removed), then
    the log's batches from there to the end. Also the path after a follower truncation."""
    directory, start, end = seg_log.directory, seg_log.start_offset, seg_log.end_offset
    delete_snapshots(directory, above=end)
    table = None
    for off in reversed(snapshot_offsets(directory)):
        if off < start:
            break
        path = snapshot_path(directory, off)
        try:
            with open(path, "rb") as f:
                table = decode_snapshot(f.read(), off, path)
            break
        except (CorruptSnapshotError, OSError) as exc:
            log.warning("removing unreadable producer snapshot %s: %s", path, exc)
            try:
                os.unlink(path)
            except OSError:
                pass
    if table is None:
        table = ProducerStateTable(start)
    # The aborted-transaction index past the snapshot is rebuilt by the replay (Kafka's
    # recovery does the same): entries a crash or a truncation left there may be stale.
    txn_index.truncate_from(directory, table.end_offset)
    replay(table, seg_log, table.end_offset, end)
    return table


def index_aborted(seg_log, completed) -> None:
    """Append the aborted ones of ``completed`` (``CompletedTxn``) to the ``.txnindex`` of the
    segment holding each marker."""
    aborted = [c for c in completed if c.aborted]
    if not aborted:
        return
    bases = [seg.base_offset for seg in seg_log.segments]
    for c in aborted:
        i = bisect.bisect_right(bases, c.last_offset) - 1
        txn_index.append(seg_log.directory, bases[max(i, 0)],
                         txn_index.AbortedTxn(c.producer_id, c.first_offset, c.last_offset, c.last_stable_offset))


def replay(table: ProducerStateTable, seg_log, from_offset: int, to_offset: int) -> None:
    """Apply the batch headers of ``seg_log`` in ``[from_offset, to_offset)`` to ``table``."""
    offset = max(from_offset, seg_log.start_offset)
    while offset < to_offset:
        data = seg_log.read(offset, REPLAY_READ_BYTES)
        if not data:
            break
        headers = producer_batches(data, only_idempotent=False)
        if not headers:
            break
        index_aborted(seg_log, table.apply([h for h in headers if h.producer_id >= 0 and h.last_offset < to_offset]))
        offset = headers[-1].last_offset + 1
    table.end_offset = max(table.end_offset, min(offset, to_offset))
