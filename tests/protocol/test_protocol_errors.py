"""Bad input is rejected with the right typed error, and bad values are refused on encode."""

import struct
import uuid

import pytest

from kraft.errors import EncodeError, ProtocolError, UnsupportedVersionError
from kraft.protocol import (BeginQuorumEpochRequest, DescribeQuorumResponse, FetchRequest, FetchResponse,
                            FrameDecoder, MetadataRequest, VoteRequest, VoteResponse, decode_request,
                            decode_response, encode_request, encode_response, peek_correlation_id,
                            uuid_from_base64, uuid_from_longs, uuid_to_base64)
from kraft.protocol.message import REQUESTS
from protocol_samples import message_ids, sample

REQUEST_CASES = [(cls, v) for cls in REQUESTS.values() for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1)]


def vote_v0(topics: bytes) -> bytes:
    """A VoteRequest v0 frame (header v2) whose Topics array is ``topics``."""
    return bytes.fromhex("0034 0000 00000001 ffff 00") + b"\x00" + topics + b"\x00"


# --- request framing ---------------------------------------------------------------


@pytest.mark.parametrize("frame", [b"", b"\x00", b"\x00\x34\x00\x00\x00\x00\x00"])
def test_frame_too_short_for_a_header(frame):
    with pytest.raises(ProtocolError) as info:
        decode_request(frame)
    assert info.value.header is None


def test_unknown_api_key_is_unsupported_and_keeps_the_correlation_id():
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(bytes.fromhex("03e7 0000 0000002a ffff"))
    assert (info.value.header.api_key, info.value.header.correlation_id) == (999, 42)


def test_unsupported_version_of_a_known_api():
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(bytes.fromhex("0034 0007 00000003 ffff 00 00 01 00"))
    assert info.value.header.api_version == 7


@pytest.mark.parametrize("cls,version", REQUEST_CASES, ids=message_ids(REQUEST_CASES))
def test_every_truncation_and_trailing_garbage_is_a_protocol_error(cls, version):
    frame = encode_request(sample(cls, version), version, correlation_id=1, client_id="c")[4:]
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            decode_request(frame[:cut])
    if version >= getattr(cls, "TRAILING_BYTES_FROM_VERSION", 1 << 15):
        decode_request(frame + b"\x00")  # a real client sends these (see the class)
        return
    with pytest.raises(ProtocolError, match="trailing"):
        decode_request(frame + b"\x00")


def test_a_request_kind_seen_before_is_checked_as_the_first_was(monkeypatch):
    """decode_request looks a (key, version)'s class and decoder up once; every later frame
    of that kind must still be refused for the same reasons with the same words."""
    import kraft.protocol.framing as framing
    frame = encode_request(sample(VoteRequest, 1), 1, correlation_id=1, client_id="c")[4:]
    bad = [frame[:len(frame) - 3], frame + b"\x00", frame[:8] + b"\x7f\xff"]
    for broken in bad:
        monkeypatch.setattr(framing, "_SERVED", {})
        errors = []
        for planned in (False, True):
            if planned:
                decode_request(frame)
                assert framing._SERVED  # a good frame of the kind made the plan
            with pytest.raises(ProtocolError) as info:
                decode_request(broken)
            errors.append((str(info.value), info.value.header and info.value.header.correlation_id))
        assert errors[0] == errors[1], broken
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (52, 1, 1) and body == sample(VoteRequest, 1)
    with pytest.raises(UnsupportedVersionError):  # a planned key still refuses versions it does not serve
        decode_request(bytes.fromhex("0034 0007 00000003 ffff 00 00 01 00"))
    assert (52, 7) not in framing._SERVED  # versions not served are not remembered


def test_librdkafka_all_topics_metadata_request_with_its_placeholder_bytes_decodes():
    # librdkafka 2.x, Metadata v12 for all topics: int32 0 placeholder left as the compact
    # array count, then allow_auto_topic_creation=1 and two more bytes. Kafka accepts it.
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    header, body = decode_request(frame)
    assert (header.api_version, body.topics) == (12, None)
    with pytest.raises(ProtocolError, match="trailing"):  # below v9 Metadata stays strict
        decode_request(bytes.fromhex("00030008000000030007") + b"rdkafka" + bytes.fromhex("ffffffff000000") + b"\x00")


def test_client_id_length_past_the_end():
    with pytest.raises(ProtocolError) as info:
        decode_request(bytes.fromhex("0034 0000 00000009 0010 6162"))
    assert info.value.header.correlation_id == 9


# --- body rules ---------------------------------------------------------------------


def test_compact_array_counts_beyond_the_buffer_are_rejected_before_allocating():
    with pytest.raises(ProtocolError, match="cannot fit"):
        decode_request(vote_v0(b"\xff\xff\xff\xff\x07"))  # uvarint 2**32-1: 4 billion topics


def test_classic_array_counts():
    base = bytes.fromhex("0035 0000 00000001 ffff") + b"\xff\xff"  # BeginQuorumEpoch v0, ClusterId null
    with pytest.raises(ProtocolError, match="non-nullable array"):
        decode_request(base + struct.pack(">i", -1))  # Topics is not nullable
    with pytest.raises(ProtocolError):
        decode_request(base + struct.pack(">i", -2))
    with pytest.raises(ProtocolError, match="cannot fit"):
        decode_request(base + struct.pack(">i", 0x7FFFFFFF))
    assert decode_request(base + struct.pack(">i", 0))[1] == BeginQuorumEpochRequest()


def test_nullable_array_minus_one_is_null():
    body = struct.pack(">i", -1) + b"\x01"  # MetadataRequest v4: Topics null, AllowAutoTopicCreation
    assert MetadataRequest.decode(body, 4).topics is None
    with pytest.raises(ProtocolError):
        MetadataRequest.decode(body[:4], 0)  # v0 Topics is not nullable


def test_null_in_a_non_nullable_compact_array():
    with pytest.raises(ProtocolError, match="null"):
        decode_request(vote_v0(b"\x00"))


def test_string_length_past_the_end():
    # One topic whose name claims 100 bytes.
    with pytest.raises(ProtocolError, match="past the end"):
        decode_request(vote_v0(b"\x02\x65abc"))


def test_compact_strings_longer_than_kafka_allows():
    with pytest.raises(ProtocolError, match="32767"):
        decode_request(vote_v0(b"\x02\x81\x80\x02" + b"x" * 32768 + b"\x01\x00"))


def test_invalid_utf8_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        decode_request(vote_v0(b"\x02\x03\xff\xfe\x01\x00"))


def test_overlong_uvarint():
    with pytest.raises(ProtocolError, match="too long"):
        decode_request(vote_v0(b"\x80\x80\x80\x80\x80\x01"))


def test_tagged_field_sizes_must_match_and_fit():
    good = VoteResponse(error_code=0, topics=[]).encode(0)  # 00 00 | 01 | 00
    assert good == bytes.fromhex("0000 01 00")
    # Tag 5 (unknown), 3 bytes but only 1 present.
    with pytest.raises(ProtocolError, match="past the end"):
        VoteResponse.decode(bytes.fromhex("0000 01 01 05 03 aa"), 0)
    # Known tag 0 (NodeEndpoints, v1) declares 5 bytes but its content is 1 byte (empty array).
    with pytest.raises(ProtocolError, match="declared"):
        VoteResponse.decode(bytes.fromhex("0000 01 01 00 05 01 00 00 00 00"), 1)
    # A count of tagged fields larger than the bytes left.
    with pytest.raises(ProtocolError, match="exceeds"):
        VoteResponse.decode(bytes.fromhex("0000 01 7f"), 0)


def test_unknown_tags_in_the_request_header_are_skipped():
    header_with_tag = bytes.fromhex("0034 0000 00000001 ffff 01 07 02 abcd")
    header, body = decode_request(header_with_tag + b"\x00\x01\x00")
    assert header.unknown_tagged_fields == [(7, b"\xab\xcd")] and body == VoteRequest()


def test_records_decode_as_a_zero_copy_view():
    records = bytes(range(70))
    msg = FetchResponse(responses=[FetchResponse.Topic(
        topic_id=uuid.UUID(int=1), partitions=[FetchResponse.Topic.Partition(records=records)])])
    frame = bytearray(encode_response(1, 1, 16, msg))
    _, decoded = decode_response(frame[4:], 1, 16)
    view = decoded.responses[0].partitions[0].records
    assert isinstance(view, memoryview) and view == records and view.obj is not None


# --- response side -------------------------------------------------------------------


def test_response_errors():
    with pytest.raises(UnsupportedVersionError):
        decode_response(b"\x00\x00\x00\x01\x00", 999, 0)
    with pytest.raises(UnsupportedVersionError):
        decode_response(b"\x00\x00\x00\x01\x00", 52, 9)
    with pytest.raises(ProtocolError):
        decode_response(b"\x00\x00", 52, 0)
    with pytest.raises(ProtocolError):
        decode_response(bytes.fromhex("00000001 00 0000 01 00 ff"), 52, 0)  # trailing byte
    assert peek_correlation_id(bytes.fromhex("0000002a 00")) == 42
    with pytest.raises(ProtocolError):
        peek_correlation_id(b"\x00")


def test_encode_response_checks_the_message_type():
    with pytest.raises(TypeError):
        encode_response(1, 52, 0, DescribeQuorumResponse())
    with pytest.raises(UnsupportedVersionError):
        encode_response(1, 52, 3, VoteResponse())


# --- encoding rules -------------------------------------------------------------------


def test_encode_refuses_values_that_cannot_be_written():
    with pytest.raises(EncodeError):
        VoteRequest(topics=[VoteRequest.Topic(topic_name=None)]).encode(0)
    with pytest.raises(EncodeError):
        VoteResponse(error_code=1 << 20).encode(0)
    with pytest.raises(EncodeError):
        VoteRequest(topics=[VoteRequest.Topic(topic_name="x" * 40000)]).encode(1)
    with pytest.raises(EncodeError):
        VoteRequest(topics=None).encode(1)


def test_null_where_only_later_versions_allow_it():
    assert MetadataRequest.decode(MetadataRequest(topics=None).encode(1), 1).topics is None
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest(topics=None).encode(0)


def test_pre_vote_cannot_be_sent_to_an_old_voter():
    msg = VoteRequest(topics=[VoteRequest.Topic(partitions=[VoteRequest.Topic.Partition(pre_vote=True)])])
    with pytest.raises(UnsupportedVersionError, match="pre_vote"):
        msg.encode(1)
    assert VoteRequest.decode(msg.encode(2), 2) == msg


def test_ignorable_fields_are_dropped_silently():
    msg = FetchRequest(rack_id="rack-a", topics=[])
    assert FetchRequest.decode(msg.encode(10), 10).rack_id == ""
    assert FetchRequest.decode(msg.encode(11), 11).rack_id == "rack-a"


def test_replica_state_tag_is_omitted_for_consumers():
    consumer = FetchRequest(max_wait_ms=1, topics=[])
    follower = FetchRequest(max_wait_ms=1, topics=[], replica_state=FetchRequest.ReplicaState(replica_id=1))
    assert consumer.encode(15).endswith(b"\x01\x01\x00")  # ForgottenTopics[], RackId "", no tags
    assert len(follower.encode(15)) == len(consumer.encode(15)) + 2 + 13
    with pytest.raises(UnsupportedVersionError, match="replica_id"):
        FetchRequest(replica_id=3).encode(15)  # moved into ReplicaState
    with pytest.raises(UnsupportedVersionError, match="replica_state"):
        follower.encode(14)


# --- framing ---------------------------------------------------------------------------


def test_frame_decoder_splits_any_chunking():
    frames = [encode_request(VoteRequest(cluster_id=str(i)), 1, i) for i in range(3)]
    stream = b"".join(frames) + b"\x00\x00\x00\x00"  # and an empty frame
    for step in (1, 2, 3, 7, len(stream)):
        decoder = FrameDecoder(1000)
        got = []
        for i in range(0, len(stream), step):
            got += decoder.feed(stream[i:i + step])
        assert got == [f[4:] for f in frames] + [b""]
        assert decoder.buffered == 0
    decoder = FrameDecoder(1000)
    assert decoder.feed(frames[0][:10]) == [] and decoder.buffered == 10


@pytest.mark.parametrize("size", [-1, -(2**31), 1001, 2**31 - 1])
def test_frame_decoder_rejects_bad_sizes_before_buffering_the_body(size):
    decoder = FrameDecoder(1000)
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">i", size))
    assert decoder.buffered == 0
    with pytest.raises(ProtocolError):  # stays failed: the connection is unusable
        decoder.feed(b"\x00\x00\x00\x00")


def test_frame_decoder_accepts_exactly_the_maximum():
    assert FrameDecoder(3).feed(b"\x00\x00\x00\x03abc") == [b"abc"]


# --- uuids -----------------------------------------------------------------------------


def test_uuid_text_form_matches_kafka():
    assert uuid_to_base64(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert uuid_from_base64("AAAAAAAAAAAAAAAAAAAAAQ") == uuid.UUID(int=1) == uuid_from_longs(0, 1)
    assert uuid_from_longs(-1, -1) == uuid.UUID(int=2**128 - 1)
    assert uuid_to_base64(uuid.UUID(int=2**128 - 1)) == "_____________________w"
    u = uuid.UUID("5b7a6d3c-1f2e-4a8b-9c0d-e1f2a3b4c5d6")
    assert uuid_from_base64(uuid_to_base64(u)) == u
    for bad in ("", "AAAA", "AAAAAAAAAAAAAAAAAAAAA$", "AAAAAAAAAAAAAAAAAAAAAQxx", None):
        with pytest.raises(ValueError):
            uuid_from_base64(bad)


def test_frame_decoder_receives_large_frames_in_place_across_any_split():
    """Clients receive multi-megabyte fetch answers into one buffer of the frame's size; the
    frames around it and every split point must still come out whole and in order."""
    big = bytes(range(256)) * (FrameDecoder.LARGE_FRAME // 256 + 3)
    small = b"tail"
    stream = (struct.pack(">i", 2) + b"hi" + struct.pack(">i", len(big)) + big
              + struct.pack(">i", len(small)) + small)
    for step in (3, 4096, 65537, len(stream)):
        decoder = FrameDecoder(len(big), large_frames_in_place=True)
        got = []
        for i in range(0, len(stream), step):
            got += decoder.feed(stream[i:i + step])
        assert [bytes(f) for f in got] == [b"hi", big, small], step
        assert decoder.buffered == 0
        if step < len(stream):  # received in place, not cut out of the stream buffer
            assert isinstance(got[1], memoryview) and type(got[1].obj) is bytearray and got[1].readonly
    decoder = FrameDecoder(len(big), large_frames_in_place=True)
    assert decoder.feed(stream[:100]) == [b"hi"] and decoder.buffered == 100 - 10
