"""Golden bytes worked out by hand from Kafka's protocol rules (not produced by our encoder).

Each expected frame is written field by field with a comment, so a reader can check it against
the message JSON without running anything.
"""

import array
import uuid

import pytest

from kraft.errors import UnsupportedVersionError
from kraft.protocol import (METADATA_TOPIC_ID, ApiVersionsRequest, ApiVersionsResponse, BeginQuorumEpochRequest,
                            BeginQuorumEpochResponse, FetchRequest, FetchResponse, VoteRequest, VoteResponse,
                            decode_request, decode_response, encode_request, encode_response,
                            request_header_version, response_header_version, unsupported_api_versions_response)


def hx(*parts: str) -> bytes:
    return bytes.fromhex("".join(p.replace(" ", "") for p in parts))


def check(msg, version, expected: bytes):
    assert msg.encode(version) == expected
    assert type(msg).decode(expected, version) == msg


def test_vote_request_v0_is_flexible_from_the_start():
    msg = VoteRequest(cluster_id="abc", topics=[VoteRequest.Topic(
        topic_name="__cluster_metadata",
        partitions=[VoteRequest.Topic.Partition(partition_index=0, replica_epoch=5, replica_id=1,
                                                last_offset_epoch=4, last_offset=100)])])
    check(msg, 0, hx(
        "04 616263",                                    # ClusterId compact nullable: len 3 + 1
        "02",                                           # Topics: 1 + 1
        "13 5f5f636c75737465725f6d65746164617461",      # TopicName: 18 + 1
        "02",                                           # Partitions: 1 + 1
        "00000000 00000005 00000001",                   # PartitionIndex, CandidateEpoch, CandidateId
        "00000004 0000000000000064",                    # LastOffsetEpoch, LastOffset
        "00", "00", "00",                               # tagged fields: partition, topic, request
    ))


def test_vote_request_v2_carries_directory_ids_and_pre_vote():
    msg = VoteRequest(cluster_id=None, voter_id=3, topics=[VoteRequest.Topic(
        topic_name="t", partitions=[VoteRequest.Topic.Partition(
            partition_index=0, replica_epoch=6, replica_id=1, replica_directory_id=uuid.UUID(int=0xA),
            voter_directory_id=uuid.UUID(int=0xB), last_offset_epoch=5, last_offset=7, pre_vote=True)])])
    check(msg, 2, hx(
        "00",                                           # ClusterId: null
        "00000003",                                     # VoterId (v1+)
        "02 02 74 02",                                  # Topics[1], "t", Partitions[1]
        "00000000 00000006 00000001",
        "0000000000000000000000000000000a",             # ReplicaDirectoryId
        "0000000000000000000000000000000b",             # VoterDirectoryId
        "00000005 0000000000000007",
        "01",                                           # PreVote (v2+)
        "00 00 00",
    ))


def test_begin_quorum_epoch_v0_is_not_flexible():
    msg = BeginQuorumEpochRequest(cluster_id=None, topics=[BeginQuorumEpochRequest.Topic(
        topic_name="t", partitions=[BeginQuorumEpochRequest.Topic.Partition(
            partition_index=0, leader_id=2, leader_epoch=7)])])
    body = hx(
        "ffff",                                         # ClusterId: int16 length -1 = null
        "00000001",                                     # Topics: int32 count
        "0001 74",                                      # TopicName: int16 length
        "00000001",                                     # Partitions: int32 count
        "00000000 00000002 00000007",                   # PartitionIndex, LeaderId, LeaderEpoch
    )                                                   # and no tagged-field bytes anywhere
    check(msg, 0, body)
    frame = encode_request(msg, 0, correlation_id=1, client_id="c")
    # Request header v1: ApiKey 53, ApiVersion 0, CorrelationId, ClientId "c"; no tag section.
    assert frame == hx("00000024", "0035 0000 00000001 0001 63") + body  # 11 + 25 bytes
    header, decoded = decode_request(frame[4:])
    assert decoded == msg and header.client_id == "c"


def test_begin_quorum_epoch_v0_response_uses_response_header_v0():
    msg = BeginQuorumEpochResponse(error_code=0, topics=[])
    frame = encode_response(9, 53, 0, msg)
    assert frame == hx("0000000a", "00000009", "0000 00000000")


def test_fetch_v13_request_with_cluster_id_tag():
    msg = FetchRequest(
        cluster_id="kc", replica_id=1, max_wait_ms=500, min_bytes=1, max_bytes=8 * 1024 * 1024,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[FetchRequest.Topic(topic_id=METADATA_TOPIC_ID, partitions=[FetchRequest.Topic.Partition(
            partition=0, current_leader_epoch=3, fetch_offset=42, last_fetched_epoch=2,
            log_start_offset=-1, partition_max_bytes=1024 * 1024)])])
    check(msg, 13, hx(
        "00000001 000001f4 00000001 00800000",          # ReplicaId, MaxWaitMs, MinBytes, MaxBytes
        "00 00000000 ffffffff",                         # IsolationLevel, SessionId, SessionEpoch
        "02 00000000000000000000000000000001",          # Topics[1], TopicId = Uuid(0, 1)
        "02 00000000 00000003 000000000000002a",        # Partitions[1], Partition, CurrentLeaderEpoch, FetchOffset
        "00000002 ffffffffffffffff 00100000 00",        # LastFetchedEpoch, LogStartOffset, PartitionMaxBytes, tags
        "00",                                           # topic tags
        "01 01",                                        # ForgottenTopicsData[], RackId ""
        "01 00 03 03 6b63",                             # 1 tag: tag 0 (ClusterId), 3 bytes: compact "kc"
    ))


def test_fetch_v17_request_as_a_kraft_follower_sends_it():
    msg = FetchRequest(
        replica_state=FetchRequest.ReplicaState(replica_id=2, replica_epoch=-1), max_wait_ms=500, min_bytes=0,
        topics=[FetchRequest.Topic(topic_id=METADATA_TOPIC_ID, partitions=[FetchRequest.Topic.Partition(
            partition=0, current_leader_epoch=5, fetch_offset=10, last_fetched_epoch=4,
            partition_max_bytes=0, replica_directory_id=uuid.UUID(int=0xAB))])])
    check(msg, 17, hx(
        "000001f4 00000000 7fffffff",                   # no ReplicaId since v15; MaxBytes default
        "00 00000000 ffffffff",
        "02 00000000000000000000000000000001",
        "02 00000000 00000005 000000000000000a 00000004 ffffffffffffffff 00000000",
        "01 00 10 000000000000000000000000000000ab",    # partition tag 0: ReplicaDirectoryId (16 bytes)
        "00 01 01",                                     # topic tags, ForgottenTopicsData[], RackId ""
        "01 01 0d 00000002 ffffffffffffffff 00",        # top tag 1: ReplicaState, 13 bytes
    ))


def test_fetch_v12_response_diverging_epoch_tag_and_omitted_defaults():
    partition = FetchResponse.Topic.Partition(
        partition_index=0, error_code=0, high_watermark=10, last_stable_offset=-1, log_start_offset=0,
        diverging_epoch=FetchResponse.EpochEndOffset(epoch=3, end_offset=8), aborted_transactions=None,
        preferred_read_replica=-1, records=b"")
    msg = FetchResponse(responses=[FetchResponse.Topic(topic="__cluster_metadata", partitions=[partition])])
    check(msg, 12, hx(
        "00000000 0000 00000000",                       # ThrottleTimeMs, ErrorCode, SessionId
        "02 13 5f5f636c75737465725f6d65746164617461",   # Responses[1], Topic
        "02 00000000 0000 000000000000000a",            # Partitions[1], PartitionIndex, ErrorCode, HighWatermark
        "ffffffffffffffff 0000000000000000",            # LastStableOffset, LogStartOffset
        "00 ffffffff 01",                               # AbortedTransactions null, PreferredReadReplica, Records ""
        "01 00 0d 00000003 0000000000000008 00",        # only tag 0 (DivergingEpoch): 1 and 2 equal defaults
        "00 00",                                        # topic tags, response tags (no NodeEndpoints)
    ))


def test_api_versions_v3_response_always_has_header_v0():
    msg = ApiVersionsResponse(error_code=0, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4),
        ApiVersionsResponse.ApiVersion(api_key=52, min_version=0, max_version=2)])
    frame = encode_response(42, 18, 3, msg)
    assert frame == hx(
        "0000001a",                                     # size 26
        "0000002a",                                     # header v0: CorrelationId only, no tag byte
        "0000 03",                                      # ErrorCode, ApiKeys[2]
        "0012 0000 0004 00 0034 0000 0002 00",          # each ApiVersion ends with its tag section
        "00000000 00",                                  # ThrottleTimeMs, tags (features omitted)
    )
    header, decoded = decode_response(frame[4:], 18, 3)
    assert header.correlation_id == 42 and decoded == msg


def test_flexible_response_uses_response_header_v1():
    frame = encode_response(5, 52, 1, VoteResponse(error_code=0, topics=[]))
    assert frame == hx("00000009", "00000005 00", "0000 01 00")


def test_request_header_v2_keeps_an_int16_client_id():
    msg = ApiVersionsRequest(client_software_name="kraft", client_software_version="0.1")
    frame = encode_request(msg, 3, correlation_id=1, client_id="cli")
    assert frame == hx(
        "00000019",
        "0012 0003 00000001",                           # ApiKey 18, ApiVersion 3, CorrelationId
        "0003 636c69",                                  # ClientId: int16 length even though flexible
        "00",                                           # header tagged fields (v2)
        "06 6b72616674 04 302e31 00",                   # body: compact strings, tags
    )
    header, decoded = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 3, 1, "cli")
    assert decoded == msg


def test_null_client_id_is_int16_minus_one():
    frame = encode_request(ApiVersionsRequest(), 4, correlation_id=2, client_id=None)
    assert frame[4:] == hx("0012 0004 00000002 ffff 00", "01 01 00")
    assert decode_request(frame[4:])[0].client_id is None


def test_unsupported_api_versions_request_is_answered_at_v0():
    # ApiVersions v9 (unknown to us) with header v2 and a body we cannot know: not parsed.
    header, body = decode_request(hx("0012 0009 00000005 ffff 00 deadbeef"))
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 9, 5)
    assert body == ApiVersionsRequest()
    frame = encode_response(header, 18, header.api_version, unsupported_api_versions_response())
    assert frame == hx(
        "00000010", "00000005",                         # header v0
        "0023",                                         # UNSUPPORTED_VERSION
        "00000001 0012 0000 0004",                      # v0: int32 array count, ApiVersions 0-4
    )
    # A client that asked at v3 still reads it: Kafka's clients retry the parse at v0.
    _, decoded = decode_response(frame[4:], 18, 3)
    assert decoded.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(18, 0, 4)]


def test_header_version_of_each_api_and_version():
    assert request_header_version(52, 0) == 2                      # Vote: flexible from v0
    assert (request_header_version(53, 0), request_header_version(53, 1)) == (1, 2)
    assert (request_header_version(1, 11), request_header_version(1, 12)) == (1, 2)
    assert (request_header_version(18, 2), request_header_version(18, 3)) == (1, 2)
    assert request_header_version(18, 99) == 2                     # unsupported ApiVersions still parsed
    assert [response_header_version(18, v) for v in range(5)] == [0, 0, 0, 0, 0]
    assert (response_header_version(53, 0), response_header_version(53, 1)) == (0, 1)
    assert (response_header_version(1, 11), response_header_version(1, 12)) == (0, 1)
    with pytest.raises(UnsupportedVersionError):
        request_header_version(999, 0)


def test_records_encode_from_any_bytes_like():
    raw = bytes(range(8))
    words = memoryview(array.array("I", [0x03020100, 0x07060504]))  # 2 items, 8 bytes
    for value in (raw, bytearray(raw), memoryview(raw), words):
        part = FetchResponse.Topic.Partition(records=value)
        data = FetchResponse(responses=[FetchResponse.Topic(partitions=[part])]).encode(12)
        got = FetchResponse.decode(data, 12).responses[0].partitions[0].records
        assert bytes(got) == bytes(value) and len(got) == 8


def test_allocate_producer_ids_v0_request_is_flexible():
    from kraft.protocol import AllocateProducerIdsRequest
    check(AllocateProducerIdsRequest(broker_id=1, broker_epoch=5), 0, hx(
        "00000001",                                     # BrokerId
        "0000000000000005",                             # BrokerEpoch
        "00",                                           # tagged fields
    ))


def test_incremental_alter_configs_v1_request():
    from kraft.protocol import IncrementalAlterConfigsRequest as R
    msg = R(resources=[R.Resource(resource_type=2, resource_name="t", configs=[
        R.Resource.Config(name="retention.ms", config_operation=0, value="1000")])], validate_only=True)
    check(msg, 1, hx(
        "02 02 0274",                                   # Resources[1], ResourceType TOPIC, ResourceName "t"
        "02 0d 726574656e74696f6e2e6d73",               # Configs[1], Name "retention.ms" (12 + 1)
        "00 05 31303030 00",                            # ConfigOperation SET, Value "1000", config tags
        "00 01 00",                                     # resource tags, ValidateOnly, request tags
    ))
    # v0 is the same shape with int16/int32 lengths and no tag sections
    assert msg.encode(0) == hx("00000001 02 00 0174 00000001 000c 726574656e74696f6e2e6d73 00 0004 31303030 01")
