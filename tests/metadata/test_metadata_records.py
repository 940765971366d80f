"""Metadata records in Kafka's framing: round trips, golden bytes, unknown tags, bad input.

Golden bytes are written out by hand from Kafka's JSON schemas and
``AbstractApiMessageSerde`` (uvarint frame version 1, uvarint api key, uvarint version, body in
the flexible encoding: compact lengths are N+1, every struct ends with its tagged fields).
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.errors import MetadataParseError, UnsupportedVersionError
from kraft.metadata import (ClientQuotaRecord, ConfigRecord, FeatureLevelRecord, PartitionChangeRecord,
                            PartitionRecord, RegisterBrokerRecord, TopicRecord, decode_record, encode_record)
from kraft.metadata.records import METADATA_RECORDS, RECORDS_BY_TYPE_NAME
from metadata_samples import all_records, record_ids, sample

RECORDS = all_records()
TOPIC_ID = uuid.UUID(int=1)
HEX_TOPIC_ID = "00" * 15 + "01"

KAFKA_TYPES = {  # Kafka's MetadataRecordType: id -> name, for the records the brief asks for and more
    0: "REGISTER_BROKER_RECORD", 1: "UNREGISTER_BROKER_RECORD", 2: "TOPIC_RECORD", 3: "PARTITION_RECORD",
    4: "CONFIG_RECORD", 5: "PARTITION_CHANGE_RECORD", 7: "FENCE_BROKER_RECORD", 8: "UNFENCE_BROKER_RECORD",
    9: "REMOVE_TOPIC_RECORD", 10: "DELEGATION_TOKEN_RECORD", 11: "USER_SCRAM_CREDENTIAL_RECORD",
    12: "FEATURE_LEVEL_RECORD", 14: "CLIENT_QUOTA_RECORD", 15: "PRODUCER_IDS_RECORD",
    17: "BROKER_REGISTRATION_CHANGE_RECORD", 18: "ACCESS_CONTROL_ENTRY_RECORD",
    19: "REMOVE_ACCESS_CONTROL_ENTRY_RECORD", 20: "NO_OP_RECORD", 21: "ZK_MIGRATION_STATE_RECORD",
    22: "REMOVE_USER_SCRAM_CREDENTIAL_RECORD", 23: "BEGIN_TRANSACTION_RECORD", 24: "END_TRANSACTION_RECORD",
    25: "ABORT_TRANSACTION_RECORD", 26: "REMOVE_DELEGATION_TOKEN_RECORD", 27: "REGISTER_CONTROLLER_RECORD",
}
LATEST = {"RegisterBrokerRecord": 3, "PartitionRecord": 2, "PartitionChangeRecord": 2,
          "BrokerRegistrationChangeRecord": 2}


def test_registry_matches_kafkas_record_types_and_latest_versions():
    assert {k: c.TYPE_NAME for k, c in METADATA_RECORDS.items()} == KAFKA_TYPES
    for cls in METADATA_RECORDS.values():
        assert cls.MIN_VERSION == 0 and cls.MAX_VERSION == LATEST.get(cls.__name__, 0), cls.__name__
        assert RECORDS_BY_TYPE_NAME[cls.TYPE_NAME] is cls


def test_metadata_records_do_not_enter_the_protocol_registry():
    from kraft.protocol.message import REQUESTS, RESPONSES
    assert not any(c in METADATA_RECORDS.values() for c in list(REQUESTS.values()) + list(RESPONSES.values()))
    assert REQUESTS[0].__name__ == "ProduceRequest"  # api key 0 is still Produce there


@pytest.mark.parametrize("cls,version", RECORDS, ids=record_ids(RECORDS))
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_every_record_round_trips_at_every_version(cls, version, nulls):
    record = sample(cls, version, nulls=nulls)
    data = encode_record(record, version)
    decoded, decoded_version = decode_record(data)
    assert decoded_version == version and type(decoded) is cls
    assert decoded == record
    assert encode_record(decoded, version) == data
    assert decode_record(memoryview(bytearray(data))).record == record


@pytest.mark.parametrize("cls,version", RECORDS, ids=record_ids(RECORDS))
def test_every_strict_prefix_of_a_record_is_a_parse_error(cls, version):
    data = encode_record(sample(cls, version), version)
    for n in range(len(data)):
        with pytest.raises(MetadataParseError):
            decode_record(data[:n])


def test_default_version_is_the_latest():
    record = PartitionRecord(topic_id=TOPIC_ID, partition_id=0)
    assert decode_record(encode_record(record)).version == 2


# --- golden bytes ------------------------------------------------------------------


GOLDEN = [
    ("topic", TopicRecord(name="foo", topic_id=TOPIC_ID), 0,
     "01" "02" "00" "04666f6f" + HEX_TOPIC_ID + "00"),
    ("feature level", FeatureLevelRecord(name="metadata.version", feature_level=20), 0,
     "01" "0c" "00" "11" + b"metadata.version".hex() + "0014" "00"),
    ("partition v0", PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1], leader=1,
                                     leader_epoch=0, partition_epoch=0), 0,
     "01" "03" "00" "00000000" + HEX_TOPIC_ID + "03" "00000001" "00000002" "02" "00000001" "01" "01"
     "00000001" "00000000" "00000000" "00"),
    ("partition v2 with tags", PartitionRecord(partition_id=7, topic_id=TOPIC_ID, replicas=[2], isr=[2], leader=2,
                                               leader_recovery_state=1, leader_epoch=3, partition_epoch=4,
                                               directories=[TOPIC_ID], eligible_leader_replicas=[2]), 2,
     "01" "03" "02" "00000007" + HEX_TOPIC_ID + "02" "00000002" "02" "00000002" "01" "01" "00000002"
     "00000003" "00000004" "02" + HEX_TOPIC_ID +
     "02" "00" "01" "01" "01" "05" "02" "00000002"),  # tag 0: LeaderRecoveryState; tag 1: ELR
    ("partition change", PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, isr=[1, 2], leader=3), 0,
     "01" "05" "00" "00000001" + HEX_TOPIC_ID + "02" "00" "09" "03" "00000001" "00000002" "01" "04" "00000003"),
    ("config delete", ConfigRecord(resource_type=2, resource_name="foo", name="retention.ms", value=None), 0,
     "01" "04" "00" "02" "04666f6f" "0d" + b"retention.ms".hex() + "00" "00"),
    ("client quota", ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type="user", entity_name=None)],
                                       key="producer_byte_rate", value=1024.0, remove=False), 0,
     "01" "0e" "00" "02" "05" + b"user".hex() + "00" "00" "13" + b"producer_byte_rate".hex()
     + "4090000000000000" "00" "00"),
    ("register broker v0", RegisterBrokerRecord(
        broker_id=1, incarnation_id=TOPIC_ID, broker_epoch=10,
        end_points=[RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)],
        features=[], rack=None, fenced=True), 0,
     "01" "00" "00" "00000001" + HEX_TOPIC_ID + "000000000000000a" "02" "0a" + b"PLAINTEXT".hex() + "02" "68"
     "2384" "0000" "00" "01" "00" "01" "00"),
]


@pytest.mark.parametrize("name,record,version,hex_bytes", GOLDEN, ids=[g[0] for g in GOLDEN])
def test_golden_bytes_computed_from_the_schema(name, record, version, hex_bytes):
    assert encode_record(record, version).hex() == hex_bytes
    assert decode_record(bytes.fromhex(hex_bytes)) == (record, version)


def test_unknown_tagged_fields_are_kept_and_written_back():
    # TopicRecord v0 with tags 3 (2 bytes) and 40 (empty), unknown to this version.
    data = bytes.fromhex("01" "02" "00" "04666f6f" + HEX_TOPIC_ID + "02" "03" "02" "abcd" "28" "00")
    record, version = decode_record(data)
    assert record.unknown_tagged_fields == [(3, b"\xab\xcd"), (40, b"")]
    assert encode_record(record, version) == data


def test_unknown_tags_merge_with_known_ones_in_tag_order():
    change = PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, leader=3)
    change.unknown_tagged_fields = [(0 + 20, b"\x01")]
    data = encode_record(change, 0)
    assert data.endswith(bytes.fromhex("02" "01" "04" "00000003" "14" "01" "01"))
    assert decode_record(data).record == change


# --- bad input ------------------------------------------------------------------


@pytest.mark.parametrize("hex_bytes,message", [
    ("", "frame version"),
    ("00" "02" "00", "frame version 0"),
    ("02" "02" "00", "unknown metadata record frame version 2"),
    ("01" "8080808010" "00", "type"),  # a uvarint longer than 5 bytes' worth
    ("01" "ffff03" "00", "too large"),  # 65535 does not fit an int16
    ("01" "10" "00", "unknown metadata record type 16"),
    ("01" "02" "01" "04666f6f" + HEX_TOPIC_ID + "00", "unsupported version 1"),
    ("01" "02" "00" "04666f6f" + HEX_TOPIC_ID + "00" "00", "garbage"),
    ("01" "02" "00" "00" + HEX_TOPIC_ID + "00", "TopicRecord"),  # null non-nullable name
    ("01" "02" "00" "04ff6f6f" + HEX_TOPIC_ID + "00", "TopicRecord"),  # not UTF-8
    ("01" "05" "00" "00000001" + HEX_TOPIC_ID + "01" "00" "09" "03" "00000001", "PartitionChangeRecord"),
    ("01" "03" "00" "00000000" + HEX_TOPIC_ID + "ffffffff0f", "PartitionRecord"),  # absurd array count
])
def test_bad_input_is_a_metadata_parse_error(hex_bytes, message):
    with pytest.raises(MetadataParseError, match=message):
        decode_record(bytes.fromhex(hex_bytes))


def test_encoding_a_field_the_version_lacks_is_refused_and_leaves_no_bytes():
    out = bytearray(b"keep")
    record = PartitionRecord(topic_id=TOPIC_ID, directories=[TOPIC_ID])
    from kraft.metadata import encode_record_into
    with pytest.raises(UnsupportedVersionError):
        encode_record_into(out, record, 0)
    assert out == b"keep"


_VALID = [encode_record(sample(cls, v), v) for cls, v in RECORDS]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_parse_error(data):
    try:
        decode_record(b"\x01" + data)
    except MetadataParseError:
        pass


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(_VALID), st.data())
def test_mutated_records_decode_or_raise_parse_error(data, draw):
    buf = bytearray(data)
    for _ in range(draw.draw(st.integers(1, 4))):
        i = draw.draw(st.integers(0, len(buf) - 1))
        buf[i] = draw.draw(st.integers(0, 255))
    try:
        record, version = decode_record(bytes(buf))
    except MetadataParseError:
        return
    # Whatever decodes must encode again (possibly to different bytes: unknown tags are sorted).
    assert decode_record(encode_record(record, version)) == (record, version)
