"""The native codec (``kraft._native._wire``) and the generated Python codec are twins: on every
message at every version they write the same bytes and read back equal messages, and on
damaged or hostile bytes they fail the same way (same exception type and message) or both
decode to equal messages. The Python codec is the reference the rest of tests/protocol also
checks against Kafka's bytes."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.errors import EncodeError, UnsupportedVersionError
from kraft.protocol import codec
from kraft.protocol.message import DECODE_FAILURES, as_view
from kraft.protocol.primitives import SPLICE_BYTES, SplicedFrame
from protocol_samples import all_messages, message_ids, mutated, sample

pytestmark = pytest.mark.skipif(codec.IMPLEMENTATION != "native", reason="the native codec is not built "
                                "(KRAFT_NO_EXTENSIONS=1 or no compiler): nothing to compare")

MESSAGES = all_messages()


def encoded(cls, version, obj, impl) -> bytes:
    out = bytearray()
    codec.plan(cls, version, cls.is_flexible(version), impl).encode(obj, out)
    return bytes(out)


def outcome(cls, version, data: bytes, impl):
    """("ok", message, end) or ("error", exception type, message)."""
    try:
        obj, end = codec.plan(cls, version, cls.is_flexible(version), impl).decode(as_view(data), 0)
    except DECODE_FAILURES + (Exception,) as exc:
        return ("error", type(exc).__name__, str(exc))
    return ("ok", obj.to_dict(), end, obj.unknown_tagged_fields)


@pytest.mark.parametrize("cls,version", MESSAGES, ids=message_ids(MESSAGES))
def test_same_bytes_and_same_messages_for_every_version(cls, version):
    for obj in (sample(cls, version), sample(cls, version, seed=50, unknown_tags=True),
                sample(cls, version, nulls=True), cls()):
        native, python = encoded(cls, version, obj, "native"), encoded(cls, version, obj, "python")
        assert native == python
        assert outcome(cls, version, native, "native") == outcome(cls, version, native, "python")
        back = outcome(cls, version, native, "native")
        assert back[0] == "ok" and back[2] == len(native)


FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BODIES = [(cls, v, encoded(cls, v, sample(cls, v, seed=s, unknown_tags=True), "python"))
          for cls, v in MESSAGES for s in (1, 50)]


@st.composite
def damaged(draw):
    cls, version, data = draw(st.sampled_from(BODIES))
    return cls, version, draw(mutated(data))


@FUZZ
@given(damaged())
def test_damaged_bodies_fail_or_decode_alike(case):
    cls, version, data = case
    assert outcome(cls, version, data, "native") == outcome(cls, version, data, "python")


@FUZZ
@given(st.sampled_from(MESSAGES), st.binary(max_size=120))
def test_random_bytes_fail_or_decode_alike(message, data):
    cls, version = message
    assert outcome(cls, version, data, "native") == outcome(cls, version, data, "python")


def encode_outcome(cls, version, obj, impl):
    try:
        return ("ok", encoded(cls, version, obj, impl))
    except (EncodeError, UnsupportedVersionError) + codec_failures() as exc:
        return ("error", type(exc).__name__, str(exc))


def codec_failures():
    return (struct.error, OverflowError, UnicodeEncodeError, AttributeError, TypeError)


def bad_values():
    from kraft.protocol import FetchRequest, FetchResponse, ProduceRequest, VoteRequest
    W = FetchRequest
    yield W, 17, W(replica_state=W.ReplicaState(replica_id=2**31))                 # int32 out of range
    yield W, 17, W(max_wait_ms="soon")                                                # not an integer
    yield W, 17, W(cluster_id="x" * 40000)                                             # string too long
    yield W, 17, W(topics=None)                                                        # non-nullable array
    yield W, 3, W(replica_state=W.ReplicaState(replica_id=5))                         # a field v3 lacks
    yield W, 17, W(topics=[W.Topic(topic_id=None)])                                    # a uuid that is None
    from types import SimpleNamespace
    yield W, 17, W(topics=[W.Topic(topic_id=SimpleNamespace(bytes=b"short"))])           # padded as '16s' does
    yield W, 17, W(topics=[W.Topic(topic_id=SimpleNamespace(bytes=bytearray(20)))])      # cut as '16s' does
    yield W, 17, W(cluster_id="\udc80")                                                # unencodable string
    R = FetchResponse
    yield R, 17, R(responses=[R.Topic(partitions=[R.Topic.Partition(current_leader=None)])])  # tagged struct None
    yield R, 17, R(responses=[R.Topic(partitions=[R.Topic.Partition(high_watermark=2**63)])])
    P = ProduceRequest
    yield P, 9, P(transactional_id="t" * 10, topic_data=[P.Topic(name="a", partition_data=[
        P.Topic.Partition(index=0, records=None)])])
    V = VoteRequest
    yield V, 0, V(cluster_id=None, topics=[V.Topic(topic_name="t", partitions=[V.Topic.Partition(pre_vote=True)])])
    yield V, 2, V(voter_id=uuid.UUID(int=3))                                           # an int field given a uuid


@pytest.mark.parametrize("case", list(bad_values()), ids=lambda c: f"{c[0].__name__}-v{c[1]}" if isinstance(c, tuple)
                         else str(c))
def test_values_a_version_cannot_carry_fail_alike(case):
    cls, version, obj = case
    assert encode_outcome(cls, version, obj, "native") == encode_outcome(cls, version, obj, "python")


def test_large_records_are_spliced_alike():
    from kraft.protocol import FetchResponse as R
    big = bytes(range(256)) * (SPLICE_BYTES // 256 + 1)
    obj = R(responses=[R.Topic(partitions=[R.Topic.Partition(records=big), R.Topic.Partition(records=b"small")])])
    frames = {}
    for impl in ("native", "python"):
        out = SplicedFrame()
        codec.plan(R, 17, True, impl).encode(obj, out)
        frames[impl] = (bytes(out), [(pos, bytes(v)) for pos, v in out.splices], out.spliced_bytes)
    assert frames["native"] == frames["python"]
    assert frames["native"][2] == len(big) and len(frames["native"][1]) == 1


def test_tagged_structs_at_or_near_their_default_are_written_alike():
    """A tagged struct is left out exactly when it equals its class's default: unknown tags
    that are [] count as none, any other difference (a field, a tag) writes it."""
    from kraft.protocol import FetchResponse as R
    P = R.Topic.Partition
    cases = [P(), P(current_leader=R.LeaderIdAndEpoch(unknown_tagged_fields=[])),
             P(current_leader=R.LeaderIdAndEpoch(unknown_tagged_fields=[(9, b"z")])),
             P(current_leader=R.LeaderIdAndEpoch(leader_id=0)), P(snapshot_id=R.SnapshotId(epoch=0)),
             P(diverging_epoch=R.EpochEndOffset(end_offset=7)), P(current_leader=None)]
    for p in cases:
        obj = R(responses=[R.Topic(partitions=[p])])
        assert encode_outcome(R, 17, obj, "native") == encode_outcome(R, 17, obj, "python"), p
    plain = encoded(R, 17, R(responses=[R.Topic(partitions=[cases[0]])]), "native")
    assert encoded(R, 17, R(responses=[R.Topic(partitions=[cases[1]])]), "native") == plain
    assert encoded(R, 17, R(responses=[R.Topic(partitions=[cases[2]])]), "native") != plain
