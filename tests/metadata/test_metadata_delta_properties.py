"""Properties of MetadataDelta: structural sharing, and "one delta per record" equals "one delta".

The sequences are random but valid: candidates are drawn from a small universe (three topic
ids and names, two partitions, three brokers, two ACL ids, transactions) and a candidate is
kept only if it replays after the records kept so far.
"""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.errors import MetadataReplayError
from kraft.metadata import (EMPTY_IMAGE, AbortTransactionRecord, AccessControlEntryRecord, BeginTransactionRecord,
                            BrokerRegistrationChangeRecord, ClientQuotaRecord, ConfigRecord, EndTransactionRecord,
                            FeatureLevelRecord, FenceBrokerRecord, MetadataDelta, PartitionChangeRecord,
                            PartitionRecord, ProducerIdsRecord, RegisterBrokerRecord, RemoveAccessControlEntryRecord,
                            RemoveTopicRecord, TopicRecord, UnfenceBrokerRecord, UnregisterBrokerRecord)

IDS = [uuid.UUID(int=i) for i in (11, 12, 13)]
NAMES = ["a", "b", "c"]
BROKERS = [1, 2, 3]
ISRS = st.lists(st.sampled_from(BROKERS), max_size=3, unique=True)

PARTITIONS = st.one_of(
    st.builds(lambda i, p, isr: PartitionRecord(partition_id=p, topic_id=i, replicas=[1, 2, 3], isr=isr,
                                                leader=isr[0] if isr else -1, leader_epoch=0, partition_epoch=0),
              st.sampled_from(IDS), st.integers(0, 1), ISRS),
    st.builds(lambda i, p, isr, leader: PartitionChangeRecord(partition_id=p, topic_id=i, isr=isr, leader=leader),
              st.sampled_from(IDS), st.integers(0, 1), st.none() | ISRS, st.sampled_from([-2, -1, 1, 2, 3])),
)

OTHERS = [
    st.builds(lambda i, n: TopicRecord(name=n, topic_id=i), st.sampled_from(IDS), st.sampled_from(NAMES)),
    st.builds(lambda i: RemoveTopicRecord(topic_id=i), st.sampled_from(IDS)),
    st.builds(lambda b, e: RegisterBrokerRecord(broker_id=b, incarnation_id=IDS[0], broker_epoch=e, rack=None),
              st.sampled_from(BROKERS), st.integers(1, 2)),
    st.builds(lambda b, e: FenceBrokerRecord(id=b, epoch=e), st.sampled_from(BROKERS), st.integers(1, 2)),
    st.builds(lambda b, e: UnfenceBrokerRecord(id=b, epoch=e), st.sampled_from(BROKERS), st.integers(1, 2)),
    st.builds(lambda b, e, f: BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=e, fenced=f,
                                                             in_controlled_shutdown=1),
              st.sampled_from(BROKERS), st.integers(1, 2), st.sampled_from([-1, 0, 1])),
    st.builds(lambda b, e: UnregisterBrokerRecord(broker_id=b, broker_epoch=e), st.sampled_from(BROKERS),
              st.integers(1, 2)),
    st.builds(lambda t, n, k, v: ConfigRecord(resource_type=t, resource_name=n, name=k, value=v),
              st.sampled_from([2, 4]), st.sampled_from(NAMES), st.sampled_from(["x", "y"]), st.none() | st.just("1")),
    st.builds(lambda n, k, rm: ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type="user",
                                                                                      entity_name=n)],
                                                 key=k, value=2.0, remove=rm),
              st.none() | st.just("u"), st.sampled_from(["p", "q"]), st.booleans()),
    st.builds(lambda i: AccessControlEntryRecord(id=i, resource_type=2, resource_name="a", pattern_type=3,
                                                 principal="User:x", host="*", operation=2, permission_type=3),
              st.sampled_from(IDS[:2])),
    st.builds(lambda i: RemoveAccessControlEntryRecord(id=i), st.sampled_from(IDS[:2])),
    st.builds(lambda lv: FeatureLevelRecord(name="metadata.version", feature_level=lv), st.integers(0, 3)),
    st.builds(lambda n: ProducerIdsRecord(broker_id=1, next_producer_id=n), st.integers(0, 5000)),
    st.sampled_from([BeginTransactionRecord(), EndTransactionRecord(), AbortTransactionRecord()]),
]
CANDIDATES = st.one_of(PARTITIONS, *OTHERS)
# Partition records fit only after their topic, so draw them more often than the rest.
WEIGHTED = st.sampled_from([PARTITIONS] * 6 + OTHERS).flatmap(lambda strategy: strategy)


def _fits(records) -> bool:
    try:
        MetadataDelta(EMPTY_IMAGE).replay_all(records)
    except MetadataReplayError:
        return False
    return True


@st.composite
def valid_sequences(draw):
    kept, in_transaction = [], False
    if draw(st.booleans()):  # often start from existing topics, so partition changes fit
        for tid, name in zip(IDS, NAMES):
            kept += [TopicRecord(name=name, topic_id=tid)] + [
                PartitionRecord(partition_id=p, topic_id=tid, replicas=[1, 2, 3], isr=[1, 2], leader=1)
                for p in (0, 1)]
    for candidate in draw(st.lists(WEIGHTED, min_size=20, max_size=80)):
        marker = isinstance(candidate, (BeginTransactionRecord, EndTransactionRecord, AbortTransactionRecord))
        # Inside a transaction records are held back, so check that they would commit.
        probe = [candidate, EndTransactionRecord()] if in_transaction and not marker else [candidate]
        if _fits(kept + probe):
            kept.append(candidate)
            if marker:
                in_transaction = isinstance(candidate, BeginTransactionRecord)
    return kept


def _one_delta(records):
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all(records)
    return delta.apply()


def _in_chunks(records, cuts):
    image, pending = EMPTY_IMAGE, None
    bounds = sorted({0, len(records), *[c % (len(records) + 1) for c in cuts]})
    for lo, hi in zip(bounds, bounds[1:]):
        delta = MetadataDelta(image, open_transaction=pending)
        delta.replay_all(records[lo:hi])
        image, pending = delta.apply(), delta.open_transaction
    return image


@settings(max_examples=250, deadline=None)
@given(valid_sequences(), st.lists(st.integers(0, 100), max_size=6))
def test_one_delta_per_record_or_per_chunk_equals_one_delta(records, cuts):
    expected = _one_delta(records)
    assert _in_chunks(records, range(len(records))) == expected
    assert _in_chunks(records, cuts) == expected


@settings(max_examples=150, deadline=None)
@given(valid_sequences(), CANDIDATES)
def test_a_record_that_does_not_fit_changes_nothing(records, candidate):
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all(records)
    before = delta.apply()
    if isinstance(candidate, EndTransactionRecord):
        return  # a failing commit drops its transaction (and may poison the delta): tested elsewhere
    try:
        delta.replay(candidate)
    except MetadataReplayError:
        assert delta.apply() == before


def _big_image(topics=200, partitions=10):
    delta = MetadataDelta(EMPTY_IMAGE)
    for t in range(topics):
        tid = uuid.UUID(int=1000 + t)
        delta.replay(TopicRecord(name=f"t{t}", topic_id=tid))
        for p in range(partitions):
            delta.replay(PartitionRecord(partition_id=p, topic_id=tid, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1))
    delta.replay(RegisterBrokerRecord(broker_id=1, incarnation_id=IDS[0], broker_epoch=1, rack=None))
    delta.replay(ConfigRecord(resource_type=4, resource_name="", name="x", value="1"))
    return delta.apply()


def test_untouched_parts_topics_and_partitions_are_shared_with_the_old_image():
    old = _big_image()
    changed = uuid.UUID(int=1005)
    delta = MetadataDelta(old)
    delta.replay(PartitionChangeRecord(partition_id=3, topic_id=changed, leader=2))
    new = delta.apply()
    # Parts no record touched are the very same objects.
    for part in ("features", "cluster", "configs", "client_quotas", "acls", "producer_ids"):
        assert getattr(new, part) is getattr(old, part), part
    assert new.topics is not old.topics
    # Untouched topics are shared; the touched one shares its untouched partitions.
    for tid, topic in old.topics.by_id.items():
        if tid != changed:
            assert new.topics.by_id[tid] is topic
            assert new.topics.by_name[topic.name] is topic
    old_t, new_t = old.topics.by_id[changed], new.topics.by_id[changed]
    assert new_t is not old_t and new_t.partitions[3].leader == 2 and old_t.partitions[3].leader == 1
    assert all(new_t.partitions[p] is old_t.partitions[p] for p in range(10) if p != 3)
    # Replica lists repeat, so they are one tuple across the image.
    assert new_t.partitions[0].replicas is new.topics.by_id[uuid.UUID(int=1100)].partitions[7].replicas


def test_an_empty_delta_gives_back_every_part():
    old = _big_image(topics=3)
    new = MetadataDelta(old).apply()
    assert all(a is b for a, b in zip(new, old))
