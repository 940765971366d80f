"""The partition-record cache writes exactly what encode_record writes and reads exactly what
decode_record reads, for every shape, hit or miss."""

import random
import uuid

import pytest

from kraft.controller.record_cache import RecordCodecCache
from kraft.errors import MetadataParseError
from kraft.metadata import PartitionChangeRecord, PartitionRecord, TopicRecord, decode_record, encode_record


def _records(rng, n):
    for i in range(n):
        tid = uuid.UUID(int=rng.getrandbits(128))
        rep = rng.sample(range(1, 7), 3)
        yield PartitionRecord(partition_id=rng.randrange(-5, 1 << 31), topic_id=tid, replicas=tuple(rep),
                              isr=rep[:rng.randrange(1, 4)], removing_replicas=[], adding_replicas=(),
                              leader=rep[0], leader_epoch=rng.randrange(3), partition_epoch=rng.randrange(2),
                              directories=[])
        yield PartitionChangeRecord(partition_id=i, topic_id=tid, leader=rng.choice([-2, -1, 1, 2]),
                                    isr=rng.choice([None, [1, 2], (3,)]), leader_recovery_state=rng.choice([-1, 1]))
        yield TopicRecord(name=f"t{i}", topic_id=tid)


def test_cached_encode_and_decode_equal_the_general_codec():
    cache = RecordCodecCache()
    for rec in _records(random.Random(7), 2000):
        value = cache.encode(rec)
        assert value == encode_record(rec)
        got = cache.decode(value)
        assert got == decode_record(value).record and encode_record(got) == value
    assert len(cache._enc) < 2000 and len(cache._dec) < 2000  # shapes were shared


def test_a_hit_carries_its_own_partition_and_topic_id():
    cache = RecordCodecCache()
    a = PartitionRecord(partition_id=1, topic_id=uuid.UUID(int=5 << 64), replicas=(1, 2), isr=(1, 2), leader=1)
    b = PartitionRecord(partition_id=2, topic_id=uuid.UUID(int=6 << 64), replicas=(1, 2), isr=(1, 2), leader=1)
    da, db = cache.decode(cache.encode(a)), cache.decode(cache.encode(b))
    assert (da.partition_id, da.topic_id, db.partition_id, db.topic_id) == (1, a.topic_id, 2, b.topic_id)


def test_garbage_is_still_refused():
    cache = RecordCodecCache()
    value = cache.encode(PartitionChangeRecord(partition_id=1, topic_id=uuid.UUID(int=9 << 64), leader=3))
    with pytest.raises(MetadataParseError):
        cache.decode(value + b"\x00")
    with pytest.raises(MetadataParseError):
        cache.decode(b"\x01\x05\x00" + b"\x00" * 10)
