"""Cross-check against kafka-python's protocol classes (an independent implementation generated
from Kafka's own message JSON), for every message and version both of us support.

For each (message, version): our bytes == kafka-python's bytes for the same values; kafka-python
decodes our bytes to the same values; we decode kafka-python's bytes to the same message; and
the framed forms (size + header + body) are identical, including the ApiVersions header rule.
"""

import uuid

import pytest

pytest.importorskip("kafka.protocol.api_message")

from kafka.protocol.admin import acl as kacl  # noqa: E402
from kafka.protocol.admin import configs as kconfigs  # noqa: E402
from kafka.protocol.admin import topics as ktopics  # noqa: E402
from kafka.protocol.admin.cluster import DescribeQuorumRequest as KDescribeQuorumRequest  # noqa: E402
from kafka.protocol.admin.cluster import DescribeQuorumResponse as KDescribeQuorumResponse  # noqa: E402
from kafka.protocol.admin.topics import CreateTopicsRequest as KCreateTopicsRequest  # noqa: E402
from kafka.protocol.admin.topics import CreateTopicsResponse as KCreateTopicsResponse  # noqa: E402
from kafka.protocol.consumer.fetch import FetchRequest as KFetchRequest  # noqa: E402
from kafka.protocol.consumer.fetch import FetchResponse as KFetchResponse  # noqa: E402
from kafka.protocol.consumer.offsets import ListOffsetsRequest as KListOffsetsRequest  # noqa: E402
from kafka.protocol.consumer.offsets import ListOffsetsResponse as KListOffsetsResponse  # noqa: E402
from kafka.protocol.metadata.api_versions import ApiVersionsRequest as KApiVersionsRequest  # noqa: E402
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KApiVersionsResponse  # noqa: E402
from kafka.protocol.metadata.metadata import MetadataRequest as KMetadataRequest  # noqa: E402
from kafka.protocol.metadata.metadata import MetadataResponse as KMetadataResponse  # noqa: E402
from kafka.protocol.producer.produce import ProduceRequest as KProduceRequest  # noqa: E402
from kafka.protocol.producer.produce import ProduceResponse as KProduceResponse  # noqa: E402

import kraft.protocol as kp  # noqa: E402
from kraft.protocol.schema import Array, Struct, is_struct  # noqa: E402
from protocol_samples import sample  # noqa: E402

PAIRS = [
    (kp.ApiVersionsRequest, KApiVersionsRequest), (kp.ApiVersionsResponse, KApiVersionsResponse),
    (kp.FetchRequest, KFetchRequest), (kp.FetchResponse, KFetchResponse),
    (kp.DescribeQuorumRequest, KDescribeQuorumRequest), (kp.DescribeQuorumResponse, KDescribeQuorumResponse),
    (kp.MetadataRequest, KMetadataRequest), (kp.MetadataResponse, KMetadataResponse),
    (kp.ProduceRequest, KProduceRequest), (kp.ProduceResponse, KProduceResponse),
    (kp.ListOffsetsRequest, KListOffsetsRequest), (kp.ListOffsetsResponse, KListOffsetsResponse),
    (kp.CreateTopicsRequest, KCreateTopicsRequest), (kp.CreateTopicsResponse, KCreateTopicsResponse),
] + [(getattr(kp, name), getattr(module, name)) for module, names in [
    (kconfigs, ("DescribeConfigs", "AlterConfigs", "IncrementalAlterConfigs")),
    (kacl, ("DescribeAcls", "CreateAcls", "DeleteAcls")),
    (ktopics, ("ElectLeaders", "AlterPartitionReassignments", "ListPartitionReassignments")),
] for base in names for name in (base + "Request", base + "Response")]
try:  # UpdateFeatures sits in kafka-python's cluster module
    from kafka.protocol.admin.cluster import UpdateFeaturesRequest as KUpdateFeaturesRequest  # noqa: E402
    from kafka.protocol.admin.cluster import UpdateFeaturesResponse as KUpdateFeaturesResponse  # noqa: E402
    PAIRS += [(kp.UpdateFeaturesRequest, KUpdateFeaturesRequest), (kp.UpdateFeaturesResponse, KUpdateFeaturesResponse)]
except ImportError:  # pragma: no cover - older kafka-python
    pass
CASES = [(ours, theirs, v) for ours, theirs in PAIRS
         for v in range(ours.MIN_VERSION, min(ours.MAX_VERSION, theirs.max_version) + 1)]
IDS = [f"{ours.__name__}-v{v}" for ours, _, v in CASES]

# kafka-python renames Metadata's authorized-operations ints to a set-of-bits "authorized_operations".
_RENAMES = {"cluster_authorized_operations": "authorized_operations",
            "topic_authorized_operations": "authorized_operations"}
_NOT_REQUESTED = -2147483648


def _bits(value: int):
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits


def _from_bits(bits) -> int:
    value = sum(1 << i for i in ({31} if bits is None else bits))
    return value - (1 << 32) if value & 0x80000000 else value


def _their_name(name: str) -> str:
    return _RENAMES.get(name, name)


def _kraft_only(f) -> bool:
    """kraft's own tagged fields (tags from 10000 up) that Kafka's schemas do not have."""
    return f.tag is not None and f.tag >= 10000


def to_theirs(theirs_cls, obj: Struct, version: int, top: bool = True):
    kwargs = {}
    for f in type(obj).FIELDS:
        if version not in f.versions or _kraft_only(f):
            continue
        value = getattr(obj, f.name)
        name = _their_name(f.name)
        their_field = theirs_cls.fields[name]
        if f.name in _RENAMES:
            value = _bits(value)
        elif is_struct(f.type):
            value = to_theirs(their_field.data_class, value, version, top=False)
        elif isinstance(f.type, Array) and is_struct(f.type.elem) and value is not None:
            value = [to_theirs(their_field.data_class, e, version, top=False) for e in value]
        elif isinstance(value, memoryview):
            value = bytes(value)
        kwargs[name] = value
    return theirs_cls(version=version, **kwargs) if top else theirs_cls(**kwargs)


def assert_same_values(ours: Struct, theirs, version: int, path: str = ""):
    """Every field that exists at ``version`` holds the same value on both sides."""
    for f in type(ours).FIELDS:
        if version not in f.versions or _kraft_only(f):
            continue
        where = f"{path}.{f.name}"
        mine, other = getattr(ours, f.name), getattr(theirs, _their_name(f.name))
        if f.name in _RENAMES:
            assert mine == _from_bits(other), where
        elif is_struct(f.type):
            if other is None:  # kafka-python leaves an absent tagged struct as None
                assert mine == f.type(), where
            else:
                assert_same_values(mine, other, version, where)
        elif isinstance(f.type, Array) and is_struct(f.type.elem) and mine is not None:
            assert other is not None and len(mine) == len(other), where
            for i, (a, b) in enumerate(zip(mine, other)):
                assert_same_values(a, b, version, f"{where}[{i}]")
        elif isinstance(mine, memoryview):
            assert bytes(mine) == bytes(other), where
        else:
            assert mine == other, where


def _ours_sample(ours_cls, version: int, nulls: bool = False):
    msg = sample(ours_cls, version, nulls=nulls)
    if ours_cls is kp.DescribeQuorumResponse:
        msg.target_voters = None  # kraft's own tagged field: see the test below
    if ours_cls is kp.ApiVersionsResponse:
        msg.error_code = 0  # kafka-python reads any error response at v0 (see test_protocol_golden)
    if ours_cls is kp.MetadataResponse:
        # Use bit patterns kafka-python's set-of-bits can represent exactly (31 alone means "null").
        if 8 <= version <= 10:
            msg.cluster_authorized_operations = 0b1011_0110
        for t in msg.topics:
            if version >= 8:
                t.topic_authorized_operations = _NOT_REQUESTED if version % 2 else 0b101
    return msg


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("ours_cls,theirs_cls,version", CASES, ids=IDS)
def test_same_bytes_and_values_as_kafka_python(ours_cls, theirs_cls, version, nulls):
    msg = _ours_sample(ours_cls, version, nulls)
    our_bytes = msg.encode(version)

    their_msg = to_theirs(theirs_cls, msg, version)
    their_bytes = bytes(their_msg.encode(version=version))
    assert our_bytes == their_bytes

    # Their decoder reads our bytes to the same values, ours reads theirs to the same message.
    assert_same_values(msg, theirs_cls.decode(our_bytes, version=version), version)
    assert ours_cls.decode(their_bytes, version) == msg


@pytest.mark.parametrize("ours_cls,theirs_cls,version", CASES, ids=IDS)
def test_same_frames_as_kafka_python(ours_cls, theirs_cls, version):
    msg = _ours_sample(ours_cls, version)
    their_msg = to_theirs(theirs_cls, msg, version)
    if issubclass(ours_cls, kp.Request):
        their_msg.with_header(correlation_id=99, client_id="cross-é")
        ours = kp.encode_request(msg, version, correlation_id=99, client_id="cross-é")
        theirs = bytes(their_msg.encode(version=version, header=True, framed=True))
        assert ours == theirs
        header, decoded = kp.decode_request(theirs[4:])
        assert header.correlation_id == 99 and header.client_id == "cross-é" and decoded == msg
    else:
        their_msg.with_header(correlation_id=99)
        ours = kp.encode_response(99, ours_cls.API_KEY, version, msg)
        # (their encode(version=...) with a response header trips over a request-only attribute;
        # the version is already set by the constructor)
        theirs = bytes(their_msg.encode(header=True, framed=True))
        assert ours == theirs
        back = theirs_cls.decode(ours, version=version, header=True, framed=True)
        assert back.header.correlation_id == 99
        assert_same_values(msg, back, version)


def test_cross_check_covers_every_common_version():
    """Guard against the matrix silently shrinking (e.g. a kafka-python upgrade renaming things)."""
    covered = {(ours.API_KEY, ours.__name__.endswith("Request"), v) for ours, _, v in CASES}
    assert len(covered) == len(CASES) >= 120
    assert (1, True, 17) in covered and (18, False, 4) in covered and (55, False, 2) in covered


def test_uuid_type_matches():
    msg = kp.FetchRequest(topics=[kp.FetchRequest.Topic(topic_id=kp.METADATA_TOPIC_ID)])
    theirs = KFetchRequest.decode(msg.encode(13), version=13)
    assert theirs.topics[0].topic_id == uuid.UUID(int=1)


def test_kafka_python_reads_a_describe_quorum_carrying_kraft_target_voters():
    """DescribeQuorum's TargetVoters (kraft's own tagged field) is skipped by Kafka's readers:
    every field they know decodes to the same value as without it."""
    for version in range(0, min(kp.DescribeQuorumResponse.MAX_VERSION, KDescribeQuorumResponse.max_version) + 1):
        msg = _ours_sample(kp.DescribeQuorumResponse, version)
        plain = msg.encode(version)
        T = kp.DescribeQuorumResponse.TargetVoter
        msg.target_voters = [T(voter_id=4, voter_directory_id=kp.primitives.ZERO_UUID)]
        tagged = msg.encode(version)
        assert tagged != plain
        theirs = KDescribeQuorumResponse.decode(tagged, version=version)
        assert_same_values(kp.DescribeQuorumResponse.decode(plain, version), theirs, version)
        assert kp.DescribeQuorumResponse.decode(tagged, version).target_voters[0].voter_id == 4
