"""``__transaction_state`` records byte for byte in Kafka's TransactionLogKey/Value schemas."""

import struct

import pytest

from kraft.coordinator.txn_records import (EMPTY, ONGOING, PREPARE_COMMIT, STATES, TransactionLogValue,
                                           decode_txn_record, partition_for, txn_record, txn_tombstone)
from kraft.errors import ProtocolError


def _kafka_string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def test_key_is_version_0_then_the_transactional_id():
    assert txn_record("t1", 5, 2, 60000, ONGOING, [("a", 0)], 1, 1).key == b"\x00\x00" + _kafka_string("t1")


def test_value_v0_bytes_as_kafka_writes_them():
    rec = txn_record("t1", 5, 2, 60000, ONGOING, [("a", 0), ("b", 1), ("a", 2)], 1000, 900)
    expected = (struct.pack(">hqhib", 0, 5, 2, 60000, 1)
                + struct.pack(">i", 2)  # partitions grouped by topic, first-seen order
                + _kafka_string("a") + struct.pack(">iii", 2, 0, 2)
                + _kafka_string("b") + struct.pack(">ii", 1, 1)
                + struct.pack(">qq", 1000, 900))
    assert rec.value == expected


def test_empty_state_writes_null_partitions_and_refuses_partitions():
    rec = txn_record("t", 1, 0, 100, EMPTY, [], 5, -1)
    assert rec.value == struct.pack(">hqhibiqq", 0, 1, 0, 100, 0, -1, 5, -1)
    with pytest.raises(ValueError):
        txn_record("t", 1, 0, 100, EMPTY, [("a", 0)], 5, -1)


def test_state_ids_are_kafkas():
    assert STATES.index("PrepareCommit") == 2 and STATES.index("CompleteAbort") == 5
    assert STATES.index("PrepareEpochFence") == 7


def test_round_trip_and_tombstone():
    rec = txn_record("x", 7, 3, 10, PREPARE_COMMIT, [("t", 4)], 2, 1)
    tid, v = decode_txn_record(rec.key, rec.value)
    assert tid == "x" and v.producer_id == 7 and v.transaction_status == 2
    assert [(p.topic, list(p.partition_ids)) for p in v.transaction_partitions] == [("t", [4])]
    assert decode_txn_record(txn_tombstone("x").key, None) == ("x", None)


def test_flexible_value_v1_with_tagged_fields_decodes():
    """What a Kafka broker with transaction.version 2 writes: tagged previous/next producer ids."""
    v = TransactionLogValue(producer_id=5, previous_producer_id=3, producer_epoch=1, transaction_timeout_ms=1,
                            transaction_status=0, transaction_partitions=None,
                            transaction_last_update_timestamp_ms=1, transaction_start_timestamp_ms=1,
                            client_transaction_version=2)
    body = v.encode(1)
    assert body.endswith(bytes([2, 0, 8]) + struct.pack(">q", 3) + bytes([2, 2]) + struct.pack(">h", 2))
    tid, back = decode_txn_record(b"\x00\x00" + _kafka_string("t"), struct.pack(">h", 1) + body)
    assert back.previous_producer_id == 3 and back.client_transaction_version == 2


@pytest.mark.parametrize("key,value", [(b"\x00", None), (b"\x00\x05" + _kafka_string("t"), None),
                                       (b"\x00\x00" + _kafka_string("t"), b"\x00\x09"),
                                       (b"\x00\x00" + _kafka_string("t"), struct.pack(">hqhib", 0, 1, 0, 1, 9))])
def test_bad_bytes_raise_protocol_error(key, value):
    with pytest.raises(ProtocolError):
        decode_txn_record(key, value)


def test_partition_for_is_abs_java_hashcode_mod_n():
    # "my-txn".hashCode() is -1061187895 in Java: abs, then mod 50
    assert partition_for("my-txn", 50) == 1061187895 % 50 == 45
    # Integer.MIN_VALUE hash maps to 0 ("polygenelubricants".hashCode() == Integer.MIN_VALUE)
    assert partition_for("polygenelubricants", 50) == 0
