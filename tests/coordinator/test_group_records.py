"""``__consumer_offsets`` records byte for byte against layouts derived from Kafka's
OffsetCommitKey/Value and GroupMetadataKey/Value schemas (non-flexible versions: int16-length
strings, int32-length bytes, int32-count arrays), and Kafka's group -> partition mapping."""

import struct

import pytest

from kraft.coordinator.group_records import (GroupMetadataValue, decode_record, group_metadata_record,
                                             group_tombstone, java_string_hashcode, offset_commit_record,
                                             offset_tombstone, partition_for)


def s16(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def test_offset_commit_record_is_key_type_1_and_value_version_3():
    r = offset_commit_record("grp", "orders", 7, 42, 5, "meta", 1_700_000_000_000)
    assert r.key == struct.pack(">h", 1) + s16("grp") + s16("orders") + struct.pack(">i", 7)
    assert r.value == (struct.pack(">h", 3) + struct.pack(">q", 42) + struct.pack(">i", 5) + s16("meta")
                       + struct.pack(">q", 1_700_000_000_000))
    key, value = decode_record(r.key, r.value)
    assert (key.group, key.topic, key.partition, value.offset, value.leader_epoch, value.metadata) == \
        ("grp", "orders", 7, 42, 5, "meta")


@pytest.mark.parametrize("group, topic, meta", [
    ("g", "t", ""), ("grüppe-ß", "tópico", "métadonnées ✓"), ("x" * 32767, "t", None), ("g", "y" * 249, "z" * 4096),
    ("", "t", "m" * 32767)])
@pytest.mark.parametrize("partition, offset, epoch, ts", [(0, 0, -1, 0), (2**31 - 1, 2**63 - 1, 2**31 - 1, -1)])
def test_offset_commit_record_is_what_the_schema_codec_writes(group, topic, meta, partition, offset, epoch, ts):
    """The commit path packs the record itself; the Message codec of the schema is the reference
    (non-ASCII strings: lengths in bytes; the longest strings a STRING holds)."""
    from kraft.coordinator.group_records import OffsetCommitKey, OffsetCommitValue
    r = offset_commit_record(group, topic, partition, offset, epoch, meta, ts)
    assert r.key == struct.pack(">h", 1) + OffsetCommitKey(group=group, topic=topic, partition=partition).encode(1)
    assert r.value == struct.pack(">h", 3) + OffsetCommitValue(
        offset=offset, leader_epoch=epoch, metadata=meta or "", commit_timestamp=ts).encode(3)


def test_offset_commit_record_refuses_strings_a_string_cannot_hold():
    from kraft.errors import KraftError
    for args in (("g" * 32768, "t", ""), ("g", "t", "m" * 32768), ("é" * 16384, "t", "")):
        with pytest.raises(KraftError, match="longer than 32767"):
            offset_commit_record(args[0], args[1], 0, 1, 2, args[2], 3)


def test_offset_commit_value_v1_with_expire_timestamp_decodes():
    """What Kafka writes when a v2-4 OffsetCommit carried a retention time."""
    value = struct.pack(">h", 1) + struct.pack(">q", 9) + s16("") + struct.pack(">qq", 100, 200)
    key = struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 0)  # key type 0: the old key
    k, v = decode_record(key, value)
    assert (k.group, v.offset, v.commit_timestamp, v.expire_timestamp, v.leader_epoch) == ("g", 9, 100, 200, -1)


def test_group_metadata_record_is_key_type_2_and_value_version_3():
    M = GroupMetadataValue.MemberMetadata
    value = GroupMetadataValue(protocol_type="consumer", generation=4, protocol="range", leader="m1",
                               current_state_timestamp=77, members=[M(
                                   member_id="m1", group_instance_id="i1", client_id="c", client_host="/h",
                                   rebalance_timeout=300, session_timeout=100, subscription=b"S",
                                   assignment=b"AA")])
    r = group_metadata_record("grp", value)
    assert r.key == struct.pack(">h", 2) + s16("grp")
    want = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 4) + s16("range") + s16("m1")
            + struct.pack(">q", 77) + struct.pack(">i", 1)
            + s16("m1") + s16("i1") + s16("c") + s16("/h") + struct.pack(">ii", 300, 100)
            + struct.pack(">i", 1) + b"S" + struct.pack(">i", 2) + b"AA")
    assert r.value == want
    assert decode_record(r.key, r.value)[1].members[0].assignment == b"AA"


def test_tombstones_have_null_values():
    assert offset_tombstone("g", "t", 1).value is None
    assert group_tombstone("g").value is None
    k, v = decode_record(group_tombstone("g").key, None)
    assert k.group == "g" and v is None


def test_unknown_record_types_are_skipped():
    """Share-group records (key types 9+) are skipped; KIP-848's (3-8) decode."""
    assert decode_record(struct.pack(">h", 10) + s16("g"), b"\x00\x00") is None
    key, value = decode_record(struct.pack(">h", 3) + s16("g"), b"\x00\x00" + struct.pack(">i", 7) + b"\x00")
    assert (key.group_id, value.epoch) == ("g", 7)


@pytest.mark.parametrize("text,want", [("", 0), ("hello", 99162322), ("polygenelubricants", -2147483648),
                                       ("é", 233), ("😀", 1772899)])
def test_java_string_hashcode(text, want):
    assert java_string_hashcode(text) == want


def test_partition_for_is_kafkas_abs_hash_mod():
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(Integer.MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("my-group", 50) == abs(java_string_hashcode("my-group")) % 50
