"""``image_records``: the records of a snapshot replay into the image they came from.

The property is the contract a snapshot needs (Kafka's ``MetadataImage.write`` then a loader):
for any image, replaying ``image_records(image)`` into an empty delta gives an equal image; and
the records are deterministic and in Kafka's order (metadata.version first).
"""

from __future__ import annotations

from hypothesis import given, settings
from image_samples import images, replay, sample_image

from kraft.metadata import EMPTY_IMAGE, FeatureLevelRecord, PartitionRecord, decode_record, encode_record
from kraft.metadata.image_records import image_records


def _round_trip(image):
    return replay([rv.record for rv in image_records(image)])


@settings(max_examples=300, deadline=None)
@given(images)
def test_replaying_the_records_of_an_image_gives_an_equal_image(image):
    assert _round_trip(image) == image


@settings(max_examples=100, deadline=None)
@given(images)
def test_records_survive_their_framing_at_the_version_chosen(image):
    """Each record encodes at the version image_records picked (no value the version cannot carry)."""
    records = []
    for rv in image_records(image):
        back = decode_record(encode_record(rv.record, rv.version))
        assert back == rv
        records.append(back.record)
    assert replay(records) == image


def test_the_empty_image_has_no_records():
    assert list(image_records(EMPTY_IMAGE)) == []


def test_a_rich_image_round_trips_and_every_part_is_written():
    image = sample_image()
    assert _round_trip(image) == image
    kinds = [type(rv.record).__name__ for rv in image_records(image)]
    # Kafka's MetadataImage.write order: features, cluster, topics, configs, quotas, producer ids, ACLs.
    order = ["FeatureLevelRecord", "RegisterBrokerRecord", "TopicRecord", "ConfigRecord", "ClientQuotaRecord",
             "ProducerIdsRecord", "AccessControlEntryRecord"]
    firsts = [kinds.index(k) for k in order]
    assert firsts == sorted(firsts)
    assert kinds[kinds.index("TopicRecord") + 1] == "PartitionRecord"


def test_metadata_version_comes_first_and_output_is_deterministic():
    image = replay([FeatureLevelRecord(name="a.feature", feature_level=1),
                    FeatureLevelRecord(name="metadata.version", feature_level=7)])
    first = list(image_records(image))
    assert first[0].record.name == "metadata.version"
    assert [encode_record(r.record, r.version) for r in first] == [
        encode_record(r.record, r.version) for r in image_records(image)]


def test_partition_record_version_is_the_lowest_that_carries_the_values():
    image = sample_image()
    versions = {(rv.record.partition_id, rv.version) for rv in image_records(image)
                if isinstance(rv.record, PartitionRecord)}
    # sample_records: even partitions have no directories (v0), odd ones do (v1), partition 3 has ELR (v2).
    assert versions == {(0, 0), (1, 1), (2, 0), (3, 2)}
