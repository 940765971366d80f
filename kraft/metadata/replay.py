"""Committed metadata records -> ``MetadataImage``: the one replay loop that the quorum
controller (every node) and a broker's metadata follower share.

``replay_records`` applies records in order on top of an image and an open transaction (KIP-868
Begin/End/AbortTransaction): a record that does not fit the image is counted and skipped, a
transaction that does not fit is dropped whole. ``decode_values`` turns committed record values
into records, counting the ones that are not metadata records. Pure: no I/O, no Raft.
"""

from __future__ import annotations

from kraft.errors import MetadataParseError, MetadataReplayError
from kraft.metadata import batch_codec
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.records import EndTransactionRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.metadata.serde import decode_record
from kraft.metadata.snapshot_image import load_image

_PARTITION = batch_codec.PARTITION
_CHANGE = batch_codec.PARTITION_CHANGE


def _replay_one(delta: MetadataDelta, r):
    """Replay ``r``; (the delta to go on with, errors). A committed transaction that does not fit
    is dropped whole: the delta goes back to what it was before it."""
    if type(r) is EndTransactionRecord and delta.in_transaction:
        before = delta.apply()  # without the open transaction
        try:
            delta.replay(r)
        except MetadataReplayError:
            return MetadataDelta(before), 1
        return delta, 0
    try:
        delta.replay(r)
    except MetadataReplayError:
        return delta, 1
    return delta, 0


def replay_records(image, open_txn, records) -> tuple:
    """(image, open transaction, errors) after replaying ``records`` in order."""
    delta = MetadataDelta(image, open_txn)
    errors = 0
    for r in records:
        delta, bad = _replay_one(delta, r)
        errors += bad
    return delta.apply(), delta.open_transaction, errors


def replay_values(image, open_txn, values, decode=None, on_record=None) -> tuple:
    """``replay_records`` for framed record values, a batch's worth at a time: decoded in one
    call by the batch codec (native when built), PartitionRecords filed as registrations without
    a record object (the hot path: a million partitions are a million of them), PartitionChange
    records merged once per distinct body and registration (a fence is hundreds of thousands
    alike), anything else through ``decode`` (value -> record; default the generic decoder). A
    value that does not decode is counted as an error and skipped, as one that does not fit.
    ``on_record(index, record)`` sees every other record made. Returns (image, open transaction,
    errors, {record type name: how many were filed that way, without ``on_record``})."""
    decode = decode or _record
    delta = MetadataDelta(image, open_txn)
    errors = fast = changes = 0
    items = batch_codec.decode_values(values)
    record_from_item = batch_codec.record_from_item
    for i, item in enumerate(items):
        if item is not None and item[0] == _PARTITION and not delta.in_transaction:
            try:
                delta.replay_registration(item[1], item[2], item[3])
            except MetadataReplayError:
                errors += 1
            fast += 1
            continue
        if item is not None and item[0] == _CHANGE and not delta.in_transaction:
            f = item[2]  # (partition_id, topic_id, ...); item[3]: header + body
            try:
                delta.replay_change_body(f[1], f[0], item[3], lambda item=item: record_from_item(item))
            except MetadataReplayError:
                errors += 1
            changes += 1
            continue
        try:
            r = decode(values[i]) if item is None or item[0] == _PARTITION else record_from_item(item)
        except MetadataParseError:
            errors += 1
            continue
        if on_record is not None:
            on_record(i, r)
        delta, bad = _replay_one(delta, r)
        errors += bad
    direct = {}
    if fast:
        direct["PartitionRecord"] = fast
    if changes:
        direct["PartitionChangeRecord"] = changes
    return delta.apply(), delta.open_transaction, errors, direct


def _record(value):
    return decode_record(value).record


def decode_values(values, decode=_record) -> tuple[list, int]:
    """(records, errors): each value decoded with ``decode`` (value -> record); undecodable
    ones are counted."""
    records = []
    errors = 0
    for value in values:
        try:
            records.append(decode(value))
        except MetadataParseError:
            errors += 1
    return records, errors


def image_from_snapshot(reader, decode=_record) -> tuple:
    """(image, open transaction, errors) of a snapshot (``reader.data_batches()``/``values()``).

    A metadata snapshot goes through the batch codec (native decoding of the hot records: a
    million partitions in about a second). One that is not (only) metadata, e.g. raw records
    written through the Produce writer API, is replayed record by record: what parses and fits
    is kept, the rest counted, as the commit path does."""
    try:
        loaded = load_image(reader.data_batches())
        return loaded.image, loaded.open_transaction, 0
    except (MetadataParseError, MetadataReplayError):
        records, errors = decode_values(reader.values(), decode)
        image, txn, replay_errors = replay_records(EMPTY_IMAGE, None, records)
        return image, txn, errors + replay_errors
