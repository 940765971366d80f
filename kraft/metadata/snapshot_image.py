"""Snapshots of a ``MetadataImage``: the image as batches of record values, and batches back
into an image.

Writing: ``write_image_snapshot(image, append)`` encodes ``image_records(image)`` and hands
``append`` one list of framed values per batch of about ``max_batch_bytes`` (8 KiB, the size
Kafka's accumulator aims for), the interface of the Raft core's ``SnapshotWriter.append`` and
``log.snapshot.SnapshotFileWriter.append_values``; the caller freezes the writer. It reads
nothing but the image, which is immutable, so it may run on a worker thread while the loop goes
on (it holds the GIL while it encodes, so the loop is slowed, never blocked for long). Freeze a
Raft core's writer back on the loop thread: its ``freeze`` tells the core, which then trims the
log below the snapshot.

Loading: ``load_image(snapshot_batches, log_batches, start_offset=...)`` replays the snapshot's
batches, then the records of the log from ``start_offset`` (the snapshot's end offset), into
one delta and applies it once. Record values are decoded a batch at a time by
``batch_codec.decode_values`` (native when built). This module does no I/O: the caller opens
files (kraft.log) and passes ``RecordBatch`` objects.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable
from typing import NamedTuple

from kraft.errors import MetadataParseError, MetadataReplayError
from kraft.metadata import batch_codec
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import EMPTY_IMAGE, MetadataImage
from kraft.metadata import image_records as IR
from kraft.metadata.serde import decode_record, encode_record

#: Target size of the values of one snapshot batch.
DEFAULT_MAX_BATCH_BYTES = 8 * 1024
#: Kafka's controller writes at most this many records per batch.
MAX_BATCH_RECORDS = 10_000
# Per-record framing inside a batch (length, attributes, deltas, key, header count), roughly.
_RECORD_OVERHEAD = 8


class SnapshotWriteStats(NamedTuple):
    records: int
    batches: int
    value_bytes: int


class LoadedImage(NamedTuple):
    image: MetadataImage
    next_offset: int  # one past the last record replayed (start_offset if none)
    records: int  # records replayed (snapshot + log)
    batches: int
    open_transaction: tuple | None  # records of a transaction still open at the end of the log


def image_value_chunks(image: MetadataImage, codec=None):
    """Framed values of ``image_records(image)``, in order, as lists: a topic's record and its
    partitions' together (encoded by the batch codec, native when built), anything else one by
    one."""
    encode_partitions = (codec or batch_codec).encode_partitions
    for part in (IR.feature_records, IR.cluster_records):
        for record, version in part(image):
            yield [encode_record(record, version)]
    raw_cache: dict = {}
    by_name = image.topics.by_name
    for name in sorted(by_name):
        topic = by_name[name]
        chunk = [encode_record(*next(IR.topic_records_of(topic)))]
        chunk += encode_partitions(topic.id, topic.partitions, raw_cache)
        yield chunk
    for part in (IR.config_records, IR.client_quota_records, IR.producer_id_records, IR.acl_records,
                 IR.scram_records):
        for record, version in part(image):
            yield [encode_record(record, version)]


def image_values(image: MetadataImage, codec=None):
    """Framed values of ``image_records(image)``, in order."""
    for chunk in image_value_chunks(image, codec):
        yield from chunk


def snapshot_value_batches(image: MetadataImage, *, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                           max_batch_records: int = MAX_BATCH_RECORDS, codec=None):
    """Lists of framed record values, one per batch, in ``image_records`` order. Whole chunks (a
    topic with its partitions) are sized in C and go into the current batch, or else start the
    next, at once; only a chunk larger than a batch is split value by value (a million
    partitions: a loop per topic, not per value)."""
    values: list[bytes] = []
    size = 0
    for chunk in image_value_chunks(image, codec):
        grow = sum(map(len, chunk)) + _RECORD_OVERHEAD * len(chunk)
        if size + grow <= max_batch_bytes and len(values) + len(chunk) <= max_batch_records:
            values += chunk
            size += grow
            continue
        if grow <= max_batch_bytes and len(chunk) <= max_batch_records:  # a batch of its own
            if values:
                yield values
            values, size = list(chunk), grow
            continue
        for value in chunk:
            if values and (size + len(value) + _RECORD_OVERHEAD > max_batch_bytes or len(values) >= max_batch_records):
                yield values
                values, size = [], 0
            values.append(value)
            size += len(value) + _RECORD_OVERHEAD
    if values:
        yield values


def write_image_snapshot(image: MetadataImage, append: Callable[[list], object], *,
                         max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, codec=None) -> SnapshotWriteStats:
    """Write every record of ``image`` through ``append(values)``, a batch per call."""
    records = batches = value_bytes = 0
    for values in snapshot_value_batches(image, max_batch_bytes=max_batch_bytes, codec=codec):
        append(values)
        records += len(values)
        batches += 1
        value_bytes += sum(map(len, values))
    return SnapshotWriteStats(records, batches, value_bytes)


def _generic(value):
    if value is None:
        raise MetadataParseError("metadata record without a value")
    return decode_record(value).record


def replay_values(delta: MetadataDelta, values: list, codec=None) -> None:
    """Replay one batch's record values into ``delta``: decoded in one call, PartitionRecords
    filed as registrations directly, anything unusual through the generic decoder."""
    items = (codec or batch_codec).decode_values(values)
    replay = delta.replay
    fast = delta.replay_registration
    PARTITION = batch_codec.PARTITION
    record_from_item = batch_codec.record_from_item
    for value, item in zip(values, items):
        if item is None:
            replay(_generic(value))
        elif item[0] == PARTITION:
            if delta.in_transaction:  # held back with the transaction: it needs the record
                replay(_generic(value))
            else:
                fast(item[1], item[2], item[3])
        else:
            replay(record_from_item(item))


@contextlib.contextmanager
def _collector_paused(pause: bool):
    """A bulk load creates about one tuple per partition and no reference cycles, yet the cyclic
    collector would rescan the growing image again and again: more than half of the load time
    of a million partitions. It is paused for the load and restored after (it is process-wide:
    other threads simply see no cyclic collection for those seconds)."""
    was_enabled = gc.isenabled()
    if pause and was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if pause and was_enabled:
            gc.enable()


def load_image(snapshot_batches: Iterable = (), log_batches: Iterable = (), *, start_offset: int = 0,
               image: MetadataImage = EMPTY_IMAGE, codec=None, pause_gc: bool = True) -> LoadedImage:
    """The image after the snapshot's batches and then the log's records at offsets
    ``>= start_offset``. Control batches are skipped. A record that does not decode or replay
    raises MetadataParseError / MetadataReplayError naming its batch."""
    with _collector_paused(pause_gc):
        return _load(snapshot_batches, log_batches, start_offset, image, codec)


def _load(snapshot_batches, log_batches, start_offset: int, image: MetadataImage, codec) -> LoadedImage:
    delta = MetadataDelta(image)
    records = batches = 0
    next_offset = start_offset
    for source, batch_iter in (("snapshot", snapshot_batches), ("log", log_batches)):
        for batch in batch_iter:
            if batch.is_control:
                if source == "log":
                    next_offset = max(next_offset, batch.next_offset)
                continue
            if source == "log":
                if batch.next_offset <= start_offset:
                    continue
                if batch.base_offset < start_offset:  # a batch the snapshot ends inside of
                    values = [r.value for r in batch if r.offset >= start_offset]
                else:
                    values = batch.values()
                next_offset = batch.next_offset
            else:
                values = batch.values()
            try:
                replay_values(delta, values, codec)
            except (MetadataParseError, MetadataReplayError) as exc:
                raise type(exc)(f"{source} batch at offset {batch.base_offset}: {exc}") from exc
            records += len(values)
            batches += 1
    return LoadedImage(delta.apply(), next_offset, records, batches, delta.open_transaction)
