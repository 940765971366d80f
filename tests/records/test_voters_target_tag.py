"""VotersRecord's TargetVoters (kraft's own, seed 002) is a tagged field: the record without
it is byte for byte Kafka's, and with it only the final tag section differs, which Kafka's
readers skip."""

from kraft.records import Endpoint, Voter, VotersRecord, decode_control_record, encode_control_value
from kraft.records.control import TARGET_VOTERS_TAG, control_key
from kraft.records.format import ControlType

VOTERS = (Voter(1, b"a" * 16, (Endpoint("CONTROLLER", "h1", 9093),), 0, 1),
          Voter(2, b"b" * 16, (Endpoint("CONTROLLER", "h2", 9093),), 0, 1))
TARGET = (Voter(4, bytes(16), (), 0, 1), Voter(2, b"b" * 16, (), 0, 1))


def test_target_round_trips_and_absent_means_none():
    key = control_key(ControlType.KRAFT_VOTERS)
    plain = encode_control_value(VotersRecord(VOTERS))
    tagged = encode_control_value(VotersRecord(VOTERS, target_voters=TARGET))
    assert decode_control_record(key, plain) == VotersRecord(VOTERS)
    assert decode_control_record(key, tagged) == VotersRecord(VOTERS, target_voters=TARGET)
    assert decode_control_record(key, encode_control_value(VotersRecord(VOTERS, target_voters=()))).target_voters == ()


def test_only_the_tag_section_differs_from_kafkas_record():
    plain = encode_control_value(VotersRecord(VOTERS))
    tagged = encode_control_value(VotersRecord(VOTERS, target_voters=TARGET))
    assert plain.endswith(b"\x00") and tagged.startswith(plain[:-1])
    section = tagged[len(plain) - 1:]
    assert section[0] == 1  # one tagged field
    assert TARGET_VOTERS_TAG >= 10000  # clear of Kafka's tags, which count up from 0


def test_an_unknown_tag_is_skipped():
    # A future Kafka tag (0) in front of ours: the voters still decode, the target is not invented.
    plain = encode_control_value(VotersRecord(VOTERS))
    with_other = plain[:-1] + b"\x01\x00\x02xy"
    msg = decode_control_record(control_key(ControlType.KRAFT_VOTERS), with_other)
    assert msg.voters == VOTERS and msg.target_voters is None


def test_dump_log_shows_the_target(tmp_path):
    """``kraft dump-log`` decodes the Voters record with its TargetVoters."""
    from kraft.cli.dump_log import dump_file
    from kraft.raft.control_state import membership_control_batch
    from kraft.raft.voters import VoterSet
    from kraft.types import ReplicaKey

    voters = VoterSet([ReplicaKey(1, b"a" * 16)])
    target = VoterSet([ReplicaKey(4), ReplicaKey(5, b"e" * 16)])
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(membership_control_batch(voters, None, 0, 3, 0, target))
    doc = dump_file(str(path))
    msg = doc["batches"][0]["records"][0]["control"]["message"]
    assert [v["voter_id"] for v in msg["voters"]] == [1]
    assert [v["voter_id"] for v in msg["target_voters"]] == [4, 5]
    assert msg["target_voters"][0]["directory_id"] == "AAAAAAAAAAAAAAAAAAAAAA"  # any replica of node 4 (the zero Uuid, in Kafka's base64)
