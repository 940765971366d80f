"""``__transaction_state`` records in Kafka's own key/value schemas, so Kafka's tools (and a
Kafka broker given these logs) read the topic.

Facts from Kafka's transaction-coordinator ``TransactionLogKey.json`` / ``TransactionLogValue.json``
and ``TransactionLog.keyToBytes/valueToBytes``: a key is an int16 version (0) followed by the
transactional id; a value is an int16 version followed by the value struct. Kafka writes value
version 0 (not flexible) until ``transaction.version`` 2 is finalized; version 1 is flexible with
three tagged fields (previous/next producer id, client transaction version). The partition list
is null in state Empty. A null value is a tombstone (the transactional id expired). The state is
stored as its id (``TransactionState.id``): Empty 0 ... PrepareEpochFence 7.
Also where a transactional id lives: Kafka's ``Utils.abs(transactionalId.hashCode) % n``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kraft.coordinator.group_records import partition_for as _partition_for
from kraft.errors import ProtocolError
from kraft.protocol.message import Message
from kraft.protocol.schema import INT8, INT16, INT32, INT64, STRING, Array, Field, Struct

TRANSACTION_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
_I16 = struct.Struct(">h")

# Kafka's TransactionState names (DescribeTransactions / ListTransactions show them) and ids.
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT = "Empty", "Ongoing", "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = "CompleteCommit", "CompleteAbort", "Dead", \
    "PrepareEpochFence"
STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE)
STATE_IDS = {name: i for i, name in enumerate(STATES)}


class _TxnRecord(Message):
    """A family base of its own: these are not API messages (no collision with request keys)."""
    __slots__ = ()
    REGISTRY: dict = {}


class TransactionLogKey(_TxnRecord):
    API_KEY = 1100
    VERSIONS = "0"
    FIELDS = (Field("transactional_id", STRING),)


class TransactionLogValue(_TxnRecord):
    API_KEY = 1101
    VERSIONS = "0-1"
    FLEXIBLE = "1+"

    class PartitionsSchema(Struct):
        FIELDS = (
            Field("topic", STRING),
            Field("partition_ids", Array(INT32)),
        )

    FIELDS = (
        Field("producer_id", INT64),
        Field("previous_producer_id", INT64, "1+", tag=0, tagged="1+", default=-1),
        Field("next_producer_id", INT64, "1+", tag=1, tagged="1+", default=-1),
        Field("producer_epoch", INT16),
        Field("transaction_timeout_ms", INT32),
        Field("transaction_status", INT8),
        Field("transaction_partitions", Array(PartitionsSchema), nullable="0+"),
        Field("transaction_last_update_timestamp_ms", INT64),
        Field("transaction_start_timestamp_ms", INT64),
        Field("client_transaction_version", INT16, "1+", tag=2, tagged="1+", default=0),
    )


@dataclass(frozen=True)
class TxnRecord:
    """One ``__transaction_state`` record as key and value bytes (value None: a tombstone)."""
    key: bytes
    value: bytes | None


def key_bytes(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + TransactionLogKey(transactional_id=transactional_id).encode(KEY_VERSION)


def txn_record(transactional_id: str, producer_id: int, producer_epoch: int, timeout_ms: int, state: str,
               partitions, last_update_ms: int, start_ms: int) -> TxnRecord:
    """``partitions``: (topic, partition) pairs; grouped by topic in first-seen order."""
    if state == EMPTY and partitions:
        raise ValueError("a transaction in state Empty has no partitions")
    by_topic: dict = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    P = TransactionLogValue.PartitionsSchema
    value = TransactionLogValue(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_timeout_ms=timeout_ms,
        transaction_status=STATE_IDS[state],
        transaction_partitions=None if state == EMPTY else [P(topic=t, partition_ids=ps) for t, ps in by_topic.items()],
        transaction_last_update_timestamp_ms=last_update_ms, transaction_start_timestamp_ms=start_ms)
    return TxnRecord(key_bytes(transactional_id), _I16.pack(VALUE_VERSION) + value.encode(VALUE_VERSION))


def txn_tombstone(transactional_id: str) -> TxnRecord:
    return TxnRecord(key_bytes(transactional_id), None)


def decode_txn_record(key, value):
    """(transactional id, TransactionLogValue or None); ProtocolError for bytes that do not
    decode or a version this coordinator does not know."""
    if key is None or len(key) < 2:
        raise ProtocolError("a __transaction_state record without a key")
    (kv,) = _I16.unpack_from(key, 0)
    if not TransactionLogKey.supports(kv):
        raise ProtocolError(f"TransactionLogKey version {kv} is unknown")
    tid = TransactionLogKey.decode(memoryview(key)[2:], kv).transactional_id
    if value is None:
        return tid, None
    if len(value) < 2:
        raise ProtocolError("a __transaction_state value without a version")
    (vv,) = _I16.unpack_from(value, 0)
    if not TransactionLogValue.supports(vv):
        raise ProtocolError(f"TransactionLogValue version {vv} is unknown")
    v = TransactionLogValue.decode(memoryview(value)[2:], vv)
    if not 0 <= v.transaction_status < len(STATES):
        raise ProtocolError(f"unknown transaction status {v.transaction_status}")
    return tid, v


def partition_for(transactional_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % partitions`` (the same rule as groups)."""
    return _partition_for(transactional_id, partitions)
