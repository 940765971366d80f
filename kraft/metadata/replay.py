"""Committed metadata records -> ``MetadataImage``: the one replay loop that the quorum
controller (every node) and a broker's metadata follower share.

``replay_records`` applies records in order on top of an image and an open transaction (KIP-868
Begin/End/AbortTransaction): a record that does not fit the image is counted and skipped, a
transaction that does not fit is dropped whole. ``decode_values`` turns committed record values
into records, counting the ones that are not metadata records. Pure: no I/O, no Raft.
"""

from __future__ import annotations

from kraft.errors import MetadataParseError, MetadataReplayError
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.records import EndTransactionRecord
from kraft.metadata.image import EMPTY_IMAGE
from kraft.metadata.serde import decode_record
from kraft.metadata.snapshot_image import load_image


def replay_records(image, open_txn, records) -> tuple:
    """(image, open transaction, errors) after replaying ``records`` in order."""
    delta = MetadataDelta(image, open_txn)
    errors = 0
    for r in records:
        if type(r) is EndTransactionRecord and delta.in_transaction:
            before = delta.apply()  # without the open transaction
            try:
                delta.replay(r)
            except MetadataReplayError:
                errors += 1
                delta = MetadataDelta(before)
            continue
        try:
            delta.replay(r)
        except MetadataReplayError:
            errors += 1
    return delta.apply(), delta.open_transaction, errors


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
