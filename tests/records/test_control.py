"""KRaft control records: keys, message values (golden bytes written by hand from Kafka's
``clients/src/main/resources/common/message/*.json``), round trips through a control batch
in both codec implementations, unknown types, malformed values."""

import struct

import pytest

from kraft.errors import CorruptRecordError
from kraft.records import (
    ControlType, Endpoint, KRaftVersionRecord, LeaderChangeMessage, SnapshotFooterRecord,
    SnapshotHeaderRecord, Voter, VotersRecord, build_control_record_batch, control_key,
    decode_control_key, decode_control_record, encode_control_value,
)

DIR_A = bytes(range(16))
DIR_B = bytes(range(100, 116))

# LeaderChangeMessage.json, flexible v0: Version int16, LeaderId int32,
# Voters []Voter, GrantingVoters []Voter with Voter = {VoterId int32} + tagged fields.
LEADER_CHANGE_V0 = bytes.fromhex(
    "0000"               # Version 0
    "00000001"           # LeaderId 1
    "04"                 # Voters: compact array, 3 + 1
    "00000001" "00"      #   VoterId 1, no tagged fields
    "00000002" "00"      #   VoterId 2
    "00000003" "00"      #   VoterId 3
    "03"                 # GrantingVoters: 2 + 1
    "00000001" "00"
    "00000002" "00"
    "00"                 # no tagged fields
)

GOLDEN = [
    (LeaderChangeMessage(leader_id=1, voters=(1, 2, 3), granting_voters=(1, 2)), LEADER_CHANGE_V0),
    (LeaderChangeMessage(leader_id=-1), bytes.fromhex("0000" "ffffffff" "01" "01" "00")),
    # SnapshotHeaderRecord.json: Version int16, LastContainedLogTimestamp int64
    (SnapshotHeaderRecord(last_contained_log_timestamp=0x0102030405060708),
     bytes.fromhex("0000" "0102030405060708" "00")),
    # SnapshotFooterRecord.json: Version int16
    (SnapshotFooterRecord(), bytes.fromhex("0000" "00")),
    # KRaftVersionRecord.json: Version int16, KRaftVersion int16
    (KRaftVersionRecord(kraft_version=1), bytes.fromhex("0000" "0001" "00")),
    # VotersRecord.json: Version, Voters [VoterId int32, VoterDirectoryId uuid,
    # Endpoints [Name string, Host string, Port uint16], KRaftVersionFeature {Min, Max int16}]
    (VotersRecord(voters=(Voter(1, DIR_A, (Endpoint("CONTROLLER", "localhost", 9093),), 0, 1),)),
     bytes.fromhex(
         "0000"                          # Version 0
         "02"                            # Voters: 1 + 1
         "00000001"                      #   VoterId 1
         + DIR_A.hex() +                 #   VoterDirectoryId
         "02"                            #   Endpoints: 1 + 1
         "0b" + b"CONTROLLER".hex() +    #     Name: compact string, 10 + 1
         "0a" + b"localhost".hex() +     #     Host: 9 + 1
         "2385"                          #     Port 9093 (uint16)
         "00"                            #     endpoint tagged fields
         "0000" "0001"                   #   KRaftVersionFeature Min 0, Max 1
         "00"                            #   KRaftVersionFeature tagged fields
         "00"                            #   voter tagged fields
         "00")),                         # tagged fields
]

ROUND_TRIP = [msg for msg, _ in GOLDEN] + [
    LeaderChangeMessage(leader_id=7, voters=tuple(range(100)), granting_voters=(7,)),
    SnapshotHeaderRecord(last_contained_log_timestamp=-1),
    KRaftVersionRecord(kraft_version=0),
    VotersRecord(voters=()),
    VotersRecord(voters=(
        Voter(1, DIR_A, (Endpoint("CONTROLLER", "host-ü.example", 65535), Endpoint("", "", 0)), 0, 1),
        Voter(2**31 - 1, DIR_B, (), -1, 32767),
    )),
]


@pytest.mark.parametrize(("msg", "raw"), GOLDEN, ids=lambda x: type(x).__name__)
def test_golden_value_bytes(msg, raw):
    assert encode_control_value(msg) == raw
    assert decode_control_record(control_key(msg.TYPE), raw) == msg


@pytest.mark.parametrize("msg", ROUND_TRIP, ids=lambda m: type(m).__name__)
def test_round_trip_through_a_control_batch(codec, msg):
    import kraft.records

    raw = kraft.records.build_control_record_batch(msg, base_offset=40, partition_leader_epoch=6,
                                                   timestamp=1234)
    batch = codec.RecordBatch(raw)
    batch.validate()
    assert batch.is_control
    assert (batch.base_offset, batch.partition_leader_epoch, batch.records_count) == (40, 6, 1)
    [record] = batch
    assert record.key == struct.pack(">hh", 0, msg.TYPE)
    assert decode_control_key(record.key) == msg.TYPE
    assert decode_control_record(record.key, record.value) == msg
    # both implementations build the same control batch
    assert codec.build_control_batch(msg.TYPE, encode_control_value(msg), base_offset=40,
                                     partition_leader_epoch=6, timestamp=1234) == raw


def test_leader_change_batch_is_what_a_new_leader_appends():
    raw = build_control_record_batch(LeaderChangeMessage(2, (1, 2, 3), (2, 3)),
                                     partition_leader_epoch=5, timestamp=1)
    # attributes: control bit only; key type 2 (LEADER_CHANGE)
    assert struct.unpack_from(">h", raw, 21)[0] == 0x20
    assert struct.unpack_from(">i", raw, 12)[0] == 5


@pytest.mark.parametrize("ctype", [7, 8, 99, 32767])
def test_unknown_control_type_is_ignored(ctype):
    assert decode_control_record(control_key(ctype), b"\x00\x00\x00") is None


@pytest.mark.parametrize("ctype", [ControlType.ABORT, ControlType.COMMIT])
def test_transaction_markers_have_no_kraft_message(ctype):
    # EndTransactionMarker value: version int16, coordinator epoch int32
    assert decode_control_record(control_key(ctype), b"\x00\x00\x00\x00\x00\x05") is None


def test_control_key_layout():
    assert control_key(ControlType.KRAFT_VOTERS) == b"\x00\x00\x00\x06"
    assert decode_control_key(b"\x00\x00\x00\x03") == 3
    assert decode_control_key(b"\x00\x00\x00\x03trailing") == 3  # Kafka reads the first 4 bytes


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00"])
def test_short_control_key_is_corrupt(key):
    with pytest.raises(CorruptRecordError):
        decode_control_key(key)


def test_negative_control_key_version_is_corrupt():
    # ControlRecordType.parseTypeId: version < 0 -> InvalidRecordException
    with pytest.raises(CorruptRecordError):
        decode_control_key(b"\xff\xff\x00\x02")


def test_newer_control_key_version_is_parsed_as_version_0():
    # ControlRecordType.parseTypeId rejects only version < 0 and reads newer keys as v0.
    assert decode_control_key(b"\x00\x01\x00\x02") == ControlType.LEADER_CHANGE


def test_leader_change_with_version_field_1_round_trips():
    # Regression: version=1 used to be written in the v0 layout and then misread as v1.
    msg = LeaderChangeMessage(leader_id=1, voters=(1, 2), granting_voters=(1,), version=1)
    raw = encode_control_value(msg)
    # v1 Voter = VoterId int32 + VoterDirectoryId uuid (kraft writes the zero uuid) + tags
    assert raw == bytes.fromhex("0001 00000001 03" + ("00000001" + "00" * 16 + "00")
                                + ("00000002" + "00" * 16 + "00") + "02"
                                + ("00000001" + "00" * 16 + "00") + "00")
    assert decode_control_record(control_key(msg.TYPE), raw) == msg


def test_leader_change_version_outside_the_schema_is_refused():
    with pytest.raises(ValueError):
        encode_control_value(LeaderChangeMessage(leader_id=1, version=2))


def test_unknown_tagged_fields_are_skipped():
    # top-level tag section with one unknown tag (tag 9, 3 bytes)
    raw = LEADER_CHANGE_V0[:-1] + b"\x01\x09\x03abc"
    assert decode_control_record(control_key(2), raw) == GOLDEN[0][0]
    # and inside a voter entry
    raw = bytes.fromhex("0000 00000001 02 00000001 01 0001ff 01 00")
    assert decode_control_record(control_key(2), raw) == LeaderChangeMessage(1, (1,), ())


@pytest.mark.parametrize(("msg", "raw"), GOLDEN, ids=lambda x: type(x).__name__)
def test_truncated_values_are_corrupt(msg, raw):
    for cut in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            decode_control_record(control_key(msg.TYPE), raw[:cut])


@pytest.mark.parametrize(("msg", "raw"), GOLDEN, ids=lambda x: type(x).__name__)
def test_trailing_bytes_are_corrupt(msg, raw):
    with pytest.raises(CorruptRecordError):
        decode_control_record(control_key(msg.TYPE), raw + b"\x00")


@pytest.mark.parametrize("ctype", [2, 3, 4, 5, 6])
def test_null_value_is_corrupt(ctype):
    with pytest.raises(CorruptRecordError):
        decode_control_record(control_key(ctype), None)


@pytest.mark.parametrize("raw", [
    bytes.fromhex("0000 00000001 ffffffff0f"),        # 4 billion voters in a few bytes
    bytes.fromhex("0000 00000001 00 01 00"),          # null voters array (length 0 = null)
    bytes.fromhex("0000 00000001 01 01 ff"),          # over-long tag count varint, truncated
    bytes.fromhex("0000 00000001 01 01 01 05 ffffff0f"),  # tag claims 4 GB of data
])
def test_malformed_leader_change_is_corrupt(raw):
    with pytest.raises(CorruptRecordError):
        decode_control_record(control_key(2), raw)


def _voters_with_name(name_field: bytes) -> bytes:
    return (bytes.fromhex("0000 02 00000001") + DIR_A + b"\x02" + name_field
            + b"\x02h" + bytes.fromhex("0001 00 0000 0001 00 00 00"))


def test_voters_record_bad_strings_are_corrupt():
    assert decode_control_record(control_key(6), _voters_with_name(b"\x02n")).voters[0].endpoints[0] \
        == Endpoint("n", "h", 1)
    for bad in (b"\x00", b"\x02\xff", b"\x7f" + b"n" * 5):  # null, not UTF-8, past the end
        with pytest.raises(CorruptRecordError):
            decode_control_record(control_key(6), _voters_with_name(bad))


def test_voter_directory_id_must_be_16_bytes():
    with pytest.raises(ValueError):
        encode_control_value(VotersRecord(voters=(Voter(1, b"short"),)))


def test_encode_rejects_non_messages():
    from types import SimpleNamespace

    with pytest.raises(TypeError):
        encode_control_value(SimpleNamespace(version=0, TYPE=2))
