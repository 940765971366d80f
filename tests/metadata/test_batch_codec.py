"""The batch codec of the hot metadata records: native and pure-Python give the same items for
the same bytes (valid, unknown-tagged, truncated, corrupted), items mean what the generic
decoder says, and PartitionRecords encoded from the image are byte for byte the generic ones.

Runs against both implementations (the ``codec`` fixture); with KRAFT_NO_EXTENSIONS=1 only the
pure one is under test and the native/pure comparisons skip.
"""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from image_samples import images, replay, sample_image
from metadata_samples import all_records, sample

from kraft.errors import MetadataParseError
from kraft.metadata import (EMPTY_IMAGE, MetadataDelta, PartitionRecord, TopicRecord, decode_record,
                            encode_record)
from kraft.metadata import batch_codec as BC
from kraft.metadata.image_records import image_records, partition_record
from kraft.metadata.partition import PartitionRegistration
from kraft.metadata.snapshot_image import replay_values

NO_EXTENSIONS = bool(os.environ.get("KRAFT_NO_EXTENSIONS"))
native_only = pytest.mark.skipif(NO_EXTENSIONS, reason="KRAFT_NO_EXTENSIONS is set: no native codec to compare")


@pytest.fixture(params=["native", "python"])
def codec(request):
    if request.param == "native" and NO_EXTENSIONS:
        pytest.skip("KRAFT_NO_EXTENSIONS is set: only the pure-Python codec is under test")
    return BC.implementation(request.param)


def _both(values):
    return BC.implementation("native").decode_values(values), BC.implementation("python").decode_values(values)


def _image_values(image):
    return [encode_record(r, v) for r, v in image_records(image)]


HOT = {"TopicRecord", "PartitionRecord", "PartitionChangeRecord", "RegisterBrokerRecord"}
SAMPLES = [(cls, v, nulls) for cls, v in all_records() for nulls in (False, True)]


@pytest.mark.parametrize("cls,version,nulls", SAMPLES,
                         ids=[f"{cls.__name__}-v{v}{'-nulls' if n else ''}" for cls, v, n in SAMPLES])
def test_every_record_type_decodes_to_what_the_generic_decoder_says(codec, cls, version, nulls):
    try:
        value = encode_record(sample(cls, version, nulls=nulls), version)
    except Exception:
        pytest.skip(f"{cls.__name__} v{version} cannot carry the sample's nulls")  # nulls in non-nullable fields
    record = decode_record(value).record
    [item] = codec.decode_values([value])
    if cls.__name__ not in HOT:
        assert item is None  # not ours: the generic decoder handles it
    elif cls is PartitionRecord:
        if item is not None:
            assert item[:3] == (3, record.topic_id, record.partition_id)
            assert tuple.__new__(PartitionRegistration, item[3]) == PartitionRegistration.from_record(record)
    else:
        assert item is not None and BC.record_from_item(item) == record


@settings(max_examples=150, deadline=None)
@given(images)
def test_replaying_items_gives_the_image_of_the_generic_records(image):
    values = _image_values(image)
    for name in (["native"] if not NO_EXTENSIONS else []) + ["python"]:
        delta = MetadataDelta(EMPTY_IMAGE)
        replay_values(delta, values, BC.implementation(name))
        assert delta.apply() == image


@native_only
@settings(max_examples=150, deadline=None)
@given(images)
def test_native_and_pure_items_are_equal_for_valid_values(image):
    native, pure = _both(_image_values(image))
    assert native == pure


def _mutations():
    image = sample_image(topics=2, partitions=4)
    values = _image_values(image)
    return st.tuples(st.sampled_from(values), st.integers(0, 200), st.integers(0, 255),
                     st.sampled_from(["flip", "cut", "extend"]))


@native_only
@settings(max_examples=1500, deadline=None)
@given(_mutations())
def test_native_and_pure_items_are_equal_for_damaged_values(case):
    """Whatever the bytes, the native decoder accepts exactly what the pure one accepts, with the
    same result; it never raises."""
    value, pos, byte, how = case
    b = bytearray(value)
    if how == "flip":
        b[pos % len(b)] = byte
    elif how == "cut":
        del b[pos % len(b):]
    else:
        b += bytes([byte])
    native, pure = _both([bytes(b)])
    assert native == pure


def test_unknown_tagged_fields_fall_back_to_the_generic_decoder_and_round_trip(codec):
    tid = uuid.UUID(int=7)
    rec = PartitionRecord(partition_id=1, topic_id=tid, replicas=[1, 2], isr=[1], leader=1)
    rec.unknown_tagged_fields = [(9, b"\x01\x02")]
    value = encode_record(rec, 2)
    topic = TopicRecord(name="t", topic_id=tid)
    topic.unknown_tagged_fields = [(3, b"x")]
    topic_value = encode_record(topic, 0)
    assert codec.decode_values([value, topic_value]) == [None, None]
    back = decode_record(value).record
    assert back.unknown_tagged_fields == [(9, b"\x01\x02")] and encode_record(back, 2) == value
    delta = MetadataDelta(EMPTY_IMAGE)
    replay_values(delta, [topic_value, value], codec)
    assert delta.apply() == replay([topic, rec])


def test_a_registration_replay_refuses_goes_the_generic_way_and_raises(codec):
    tid = uuid.UUID(int=8)
    bad = PartitionRecord(partition_id=0, topic_id=tid, replicas=[1, 2], isr=[1], leader=1,
                          directories=[uuid.UUID(int=0x100)])  # 2 replicas, 1 directory
    values = [encode_record(TopicRecord(name="t", topic_id=tid)), encode_record(bad, 1)]
    assert codec.decode_values(values)[1] is None
    from kraft.errors import MetadataReplayError
    with pytest.raises(MetadataReplayError, match="directories"):
        replay_values(MetadataDelta(EMPTY_IMAGE), values, codec)


def test_garbage_and_null_values_are_errors_of_the_generic_decoder(codec):
    assert codec.decode_values([b"\x01\x03\x00", b"\x00\x03\x00\x00", b""]) == [None, None, None]
    with pytest.raises(MetadataParseError):
        replay_values(MetadataDelta(EMPTY_IMAGE), [b"\x01\x03\x02\xff"], codec)
    with pytest.raises(MetadataParseError):
        replay_values(MetadataDelta(EMPTY_IMAGE), [None], codec)


@settings(max_examples=150, deadline=None)
@given(images)
def test_encode_partitions_is_byte_for_byte_the_generic_encoding(image):
    for name in (["native"] if not NO_EXTENSIONS else []) + ["python"]:
        encode = BC.implementation(name).encode_partitions
        for topic in image.topics.by_id.values():
            expected = [encode_record(*partition_record(topic.id, pid, topic.partitions[pid]))
                        for pid in sorted(topic.partitions)]
            assert encode(topic.id, topic.partitions, {}) == expected


def test_partitions_placed_alike_share_one_registration(codec):
    """A million partitions are a few dozen distinct registrations: decoded (either codec) or
    replayed from records, equal ones are one object (memory, and the cyclic collector's walk)."""
    tid = uuid.uuid4()
    records = [PartitionRecord(partition_id=p, topic_id=tid, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1,
                               directories=[]) for p in range(50)]
    items = codec.decode_values([encode_record(r) for r in records])
    regs = {id(item[3]) for item in items}
    assert len(regs) == 1 and type(items[0][3]) is PartitionRegistration
    assert PartitionRegistration.from_record(records[7]) is items[0][3]
    other = PartitionRecord(partition_id=0, topic_id=tid, replicas=[1, 2, 3], isr=[1, 2], leader=1)
    assert PartitionRegistration.from_record(other) is not items[0][3]


@native_only
@given(st.lists(st.tuples(st.integers(-1, 4), st.sets(st.integers(0, 4)), st.sets(st.integers(0, 4))),
                max_size=30), st.integers(0, 4), st.booleans(), st.sampled_from([0, 1, 2]))
@settings(max_examples=200, deadline=None)
def test_native_and_pure_fence_scans_find_the_same_partitions(regs, broker, with_elr, which):
    """A fence's scan (partitions the broker leads / is in the ISR or ELR of) is the same in C and
    Python, in dict order; a wrong field position in the C one (isr 2, leader 5, elr 9) fails."""
    parts = {pid: PartitionRegistration((0, 1, 2, 3, 4), (), tuple(sorted(isr)), (), (), leader, 0, 0, 0,
                                        tuple(sorted(elr)), ())
             for pid, (leader, isr, elr) in enumerate(regs)}
    native = BC._native.partitions_touching(parts, broker, with_elr, which)
    pure = BC._pure_partitions_touching(parts, broker, with_elr, which)
    assert native == pure
    for pid in pure:
        p = parts[pid]
        assert (p.leader == broker) if which == 1 else True
        assert p.leader == broker or broker in p.isr or (with_elr and broker in p.elr)
